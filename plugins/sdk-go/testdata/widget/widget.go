// A plugin that uses every type of contract 0.3.0, for the SDK's test of its canonical ABI
// against the host (abi_host_test.go): related objects of both selectors and secret views,
// child options with both barriers, field errors of several types, default and convert.
package main

import (
	"fmt"
	"strings"

	oh "operator-host.dev/sdk"
)

type WidgetSpec struct {
	SecretName string `json:"secretName"`
	Size       int    `json:"size" default:"1"`
}

type WidgetSpecV2 struct {
	SecretName string `json:"secretName"`
	Replicas   int    `json:"replicas" default:"1"`
}

type WidgetStatus struct {
	Seen []string `json:"seen" default:"[]"`
}

var plugin = &oh.Plugin[WidgetSpec, WidgetStatus]{
	Name: "widget", Version: "0.2.0",
	Parent:   oh.ParentKind{Group: "abi.example.com", Version: "v1", Kind: "Widget"},
	Children: []oh.Kind{oh.KindConfigMap, oh.KindJob, oh.KindService},
	Related: []oh.Related{
		oh.RelatedByNameAt("tls", oh.KindSecret, "spec.secretName").WithSecretData(),
		oh.RelatedByLabels("hashed", oh.KindSecret, "app=widget"),
		oh.RelatedByLabels("config", oh.KindConfigMap, "app=widget"),
	},
	Reconcile: func(parent *oh.Parent[WidgetSpec, WidgetStatus], observed *oh.Observed) (*oh.Desired, error) {
		var seen []string
		for _, name := range []string{"tls", "hashed", "config"} {
			for _, object := range observed.Related(name) {
				metadata := object["metadata"].(map[string]any)
				data, _ := oh.CanonicalJSON(object["data"])
				seen = append(seen, fmt.Sprintf("%s/%s %s", name, metadata["name"], data))
			}
		}
		desired := &oh.Desired{}
		desired.ChildWith(oh.KindJob, map[string]any{"metadata": oh.ChildMeta("migrate", nil), "spec": map[string]any{"template": map[string]any{}}},
			oh.ChildOptions{}.Recreate().ReadyWhenCondition("Complete"))
		desired.ChildWith(oh.KindConfigMap, map[string]any{"metadata": oh.ChildMeta("kept", nil), "data": map[string]any{"a": "b"}},
			oh.ChildOptions{}.CreateOnly().OrphanOnPrune().ReadyWhenField("data.a", "b"))
		desired.Child(oh.KindService, map[string]any{"metadata": oh.ChildMeta("plain", nil), "spec": map[string]any{"ports": []any{map[string]any{"port": 80}}}})
		desired.SetStatus(WidgetStatus{Seen: seen})
		desired.RequeueAfter(1500)
		return desired, nil
	},
	Validate: func(parent, old *oh.Parent[WidgetSpec, WidgetStatus]) *oh.Validation {
		v := oh.NewValidation()
		if parent.Spec.Size > 5 {
			v.Invalid("spec.size", parent.Spec.Size, "must be at most 5")
			v.NotSupported("spec.size", parent.Spec.Size, "1", "2")
		}
		if parent.Spec.SecretName == "" {
			v.Required("spec.secretName", "a Secret's name")
		}
		v.Warn("checked by " + parent.Metadata.NameAny())
		return v
	},
	ValidateDelete: func(parent *oh.Parent[WidgetSpec, WidgetStatus]) *oh.Validation {
		return oh.NewValidation().Forbidden("metadata.name", "never deleted")
	},
	Default: func(parent *oh.Parent[WidgetSpec, WidgetStatus]) {
		parent.Spec.SecretName = strings.ToLower(parent.Spec.SecretName)
	},
	Convert: func(object map[string]any, toVersion string) (map[string]any, error) {
		spec, _ := object["spec"].(map[string]any)
		from := strings.TrimPrefix(object["apiVersion"].(string), "abi.example.com/")
		switch {
		case from == toVersion:
		case from == "v1" && toVersion == "v2":
			spec["replicas"] = spec["size"]
			delete(spec, "size")
		case from == "v2" && toVersion == "v1":
			spec["size"] = spec["replicas"]
			delete(spec, "replicas")
		default:
			return nil, fmt.Errorf("cannot convert a Widget from %s to %s: the versions are v1 and v2", from, toVersion)
		}
		object["apiVersion"] = "abi.example.com/" + toVersion
		return object, nil
	},
	OtherVersions: []oh.ServedVersion{oh.ServedVersionOf[WidgetSpecV2, WidgetStatus]("v2")},
}

func init() { oh.Register(plugin) }

func main() {}
