// Tests of the schema and decoding a plugin's Go types give, and of the parent's decoding.
package operatorhost

import (
	"errors"
	"reflect"
	"testing"
)

type nested struct {
	Enabled bool `json:"enabled"`
}

type sampleSpec struct {
	Replicas  int                   `json:"replicas" oh:"minimum=0,maximum=10" description:"How many."`
	Image     string                `json:"image" default:"nginx:1"`
	Port      int64                 `json:"port" default:"8080"`
	Ratio     float64               `json:"ratio" default:"0.5"`
	Tags      []string              `json:"tags"`
	Labels    map[string]string     `json:"labels"`
	Nested    *nested               `json:"nested,omitempty"`
	Resources *ResourceRequirements `json:"resources,omitempty"`
	Mode      string                `json:"mode" default:"fast" oh:"enum=fast|safe"`
	Extra     map[string]any        `json:"extra"`
}

type sampleStatus struct {
	Phase      string     `json:"phase" default:"\"\""`
	Conditions Conditions `json:"conditions" default:"[]"`
}

var sample = &Plugin[sampleSpec, sampleStatus]{
	Name: "sample", Version: "0.1.0",
	Parent:    ParentKind{Group: "example.com", Version: "v1", Kind: "Sample"},
	Reconcile: func(*Parent[sampleSpec, sampleStatus], *Observed) (*Desired, error) { return &Desired{}, nil },
}

func TestTheSchemaFollowsTheGoTypesAsSchemarsWritesThem(t *testing.T) {
	schema, err := SchemaOf(reflect.TypeFor[sampleSpec]())
	if err != nil {
		t.Fatal(err)
	}
	text, err := CanonicalJSON(schema)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"properties":{` +
		`"extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true},` +
		`"image":{"default":"nginx:1","type":"string"},` +
		`"labels":{"additionalProperties":{"type":"string"},"type":"object"},` +
		`"mode":{"default":"fast","enum":["fast","safe"],"type":"string"},` +
		`"nested":{"nullable":true,"properties":{"enabled":{"type":"boolean"}},"required":["enabled"],"type":"object"},` +
		`"port":{"default":8080,"format":"int64","type":"integer"},` +
		`"ratio":{"default":0.5,"format":"double","type":"number"},` +
		`"replicas":{"description":"How many.","format":"int32","maximum":10.0,"minimum":0.0,"type":"integer"},` +
		`"resources":{"nullable":true,"properties":{"claims":{"items":{"properties":{"name":{"type":"string"},"request":{"type":"string"}},"required":["name"],"type":"object"},"type":"array"},` +
		`"limits":{"additionalProperties":{"x-kubernetes-int-or-string":true},"type":"object"},` +
		`"requests":{"additionalProperties":{"x-kubernetes-int-or-string":true},"type":"object"}},"type":"object"},` +
		`"tags":{"items":{"type":"string"},"type":"array"}},` +
		`"required":["replicas"],"type":"object"}`
	if text != want {
		t.Errorf("schema:\n got %s\nwant %s", text, want)
	}
}

func TestTheCRDHasTheStatusSubresourceAndTheParentsNames(t *testing.T) {
	crd, err := sample.CRD()
	if err != nil {
		t.Fatal(err)
	}
	spec := crd["spec"].(map[string]any)
	if names := spec["names"].(map[string]any); names["plural"] != "samples" || names["singular"] != "sample" {
		t.Errorf("names = %v", names)
	}
	version := spec["versions"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(version["subresources"], map[string]any{"status": map[string]any{}}) {
		t.Errorf("subresources = %v", version["subresources"])
	}
	conditions := version["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["status"].(map[string]any)["properties"].(map[string]any)["conditions"].(map[string]any)
	if conditions["x-kubernetes-list-type"] != "map" || !reflect.DeepEqual(conditions["default"], []any{}) {
		t.Errorf("conditions = %v", conditions)
	}
}

func decodeSpec(spec map[string]any) (*Parent[sampleSpec, sampleStatus], error) {
	return sample.Decode(map[string]any{"metadata": map[string]any{"name": "s", "generation": 2}, "spec": spec})
}

func TestDecodingFillsDefaultsAndNamesTheFieldThatDoesNotFit(t *testing.T) {
	parent, err := decodeSpec(map[string]any{"replicas": 3})
	if err != nil {
		t.Fatal(err)
	}
	if parent.Spec.Image != "nginx:1" || parent.Spec.Port != 8080 || parent.Spec.Ratio != 0.5 || parent.Spec.Mode != "fast" {
		t.Errorf("defaults not filled in: %+v", parent.Spec)
	}
	if parent.Metadata.Name != "s" || *parent.Metadata.Generation != 2 {
		t.Errorf("metadata = %+v", parent.Metadata)
	}
	for _, c := range []struct {
		spec    map[string]any
		message string
	}{
		{map[string]any{}, "spec: missing field `replicas`"},
		{map[string]any{"replicas": "three"}, `spec.replicas: expected an integer, got "three"`},
		{map[string]any{"replicas": 1.5}, "spec.replicas: expected an integer, got 1.5"},
		{map[string]any{"replicas": 1 << 40}, "spec.replicas: expected a int32 integer, got 1099511627776"},
		{map[string]any{"replicas": 1, "tags": []any{"a", 2}}, "spec.tags[1]: expected a string, got 2"},
		{map[string]any{"replicas": 1, "labels": map[string]any{"a b": true}}, `spec.labels["a b"]: expected a string, got true`},
		{map[string]any{"replicas": 1, "nested": map[string]any{}}, "spec.nested: missing field `enabled`"},
	} {
		_, err := decodeSpec(c.spec)
		var invalid *InvalidSpec
		if !errors.As(err, &invalid) || invalid.Message != c.message {
			t.Errorf("%v: got %v, want InvalidSpec %q", c.spec, err, c.message)
		}
	}
}

func TestAPreviousStatusThatNoLongerDecodesIsDropped(t *testing.T) {
	object := map[string]any{
		"metadata": map[string]any{"name": "s"},
		"spec":     map[string]any{"replicas": 1},
		"status":   map[string]any{"phase": "Ready", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}
	parent, err := sample.Decode(object)
	if err != nil || parent.Status == nil || parent.Status.Phase != "Ready" || len(parent.Status.Conditions) != 1 {
		t.Fatalf("a status that decodes: %+v, %v", parent, err)
	}
	object["status"] = map[string]any{"phase": 7}
	parent, err = sample.Decode(object)
	if err != nil || parent.Status != nil {
		t.Errorf("a status that does not decode must be dropped, got %+v, %v", parent, err)
	}
}

func TestAnErrorThatIsNotAnInvalidSpecIsRetried(t *testing.T) {
	if invalid, message := contractError(InvalidField("size", "too big")); !invalid || message != "spec.size: too big" {
		t.Errorf("InvalidSpec: %v %q", invalid, message)
	}
	if invalid, message := contractError(errors.New("the API is slow")); invalid || message != "the API is slow" {
		t.Errorf("other error: %v %q", invalid, message)
	}
}
