// Tests of kinds, observed and desired children, ported from the JS SDK's plugin.test.js and view.test.js.

package operatorhost

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestKindAPIVersion(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{KindConfigMap, "v1"},
		{KindDeployment, "apps/v1"},
		{KindHorizontalPodAutoscaler, "autoscaling/v2"},
		{KindRoleBinding, "rbac.authorization.k8s.io/v1"},
	}
	for _, tt := range tests {
		if got := tt.kind.APIVersion(); got != tt.want {
			t.Errorf("%s.APIVersion() = %s, want %s", tt.kind.Kind, got, tt.want)
		}
	}
}

func TestChildMeta(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   string
	}{
		{nil, `{"name":"svc"}`},
		{map[string]string{}, `{"name":"svc"}`},
		{map[string]string{"app": "x"}, `{"labels":{"app":"x"},"name":"svc"}`},
	}
	for _, tt := range tests {
		if got, _ := CanonicalJSON(ChildMeta("svc", tt.labels)); got != tt.want {
			t.Errorf("ChildMeta(svc, %v) = %s, want %s", tt.labels, got, tt.want)
		}
	}
	labels := map[string]string{"app": "x"}
	meta := ChildMeta("svc", labels)
	labels["app"] = "y"
	if meta["labels"].(map[string]any)["app"] != "x" {
		t.Error("ChildMeta shares the caller's labels")
	}
}

func TestChildrenCarryTheirKind(t *testing.T) {
	desired := new(Desired).Child(KindService, map[string]any{"metadata": ChildMeta("svc", nil)})
	if got, _ := CanonicalJSON(desired.Children[0]); got != `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"}}` {
		t.Errorf("child = %s", got)
	}
	// A child's own apiVersion and kind are kept.
	desired.Child(KindDeployment, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d"}, "spec": map[string]any{"replicas": 1}})
	hash, _ := desired.Get(KindDeployment, "d")["metadata"].(map[string]any)["annotations"].(map[string]any)[SpecHashAnnotation].(string)
	if len(hash) != 64 {
		t.Errorf("spec hash = %q, want 64 hex digits", hash)
	}
	// As plugin.test.js's reconcile answers its ConfigMap.
	configMap := new(Desired).Child(KindConfigMap, map[string]any{"metadata": ChildMeta("a", map[string]string{"app": "x"}), "data": map[string]any{"n": "1"}})
	if got, _ := CanonicalJSON(configMap.Children[0]); got != `{"apiVersion":"v1","data":{"n":"1"},"kind":"ConfigMap","metadata":{"labels":{"app":"x"},"name":"a"}}` {
		t.Errorf("ConfigMap = %s", got)
	}
	if desired.Get(KindDeployment, "e") != nil || desired.Get(KindStatefulSet, "d") != nil {
		t.Error("Get finds a child of another name or kind")
	}
}

func TestChildPanicsOnAKindThatIsNotAString(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Child of a kind that is not a string did not panic")
		}
	}()
	new(Desired).Child(KindService, map[string]any{"kind": 5})
}

func TestChildIsACopyAsJSON(t *testing.T) {
	data := map[string]any{"n": 1}
	desired := new(Desired).Child(KindConfigMap, map[string]any{"metadata": ChildMeta("c", nil), "data": data, "skip": nil})
	data["n"] = 2
	child := desired.Get(KindConfigMap, "c")
	if n := child["data"].(map[string]any)["n"]; n != json.Number("1") {
		t.Errorf("data.n = %#v, want json.Number(\"1\")", n)
	}
	desired.SetStatus(struct {
		Ready bool `json:"ready"`
	}{true}).RequeueAfter(1500)
	if got, _ := CanonicalJSON(desired.Status); got != `{"ready":true}` {
		t.Errorf("status = %s", got)
	}
	if desired.RequeueAfterMs == nil || *desired.RequeueAfterMs != 1500 {
		t.Errorf("RequeueAfterMs = %v", desired.RequeueAfterMs)
	}
}

func TestObserved(t *testing.T) {
	observed, err := NewObserved([]string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"},"data":{"n":"1"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"q"}}`,
		`[1]`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if observed.Len() != 4 {
		t.Errorf("Len() = %d, want 4", observed.Len())
	}
	if got := observed.Get(KindConfigMap, "p"); got == nil || got["data"].(map[string]any)["n"] != "1" {
		t.Errorf("Get(ConfigMap, p) = %v", got)
	}
	if got := observed.Get(KindSecret, "p"); got != nil {
		t.Errorf("Get(Secret, p) = %v, want nil", got)
	}
	if got := len(observed.All(KindConfigMap)); got != 2 {
		t.Errorf("All(ConfigMap) has %d, want 2", got)
	}
	if empty, _ := NewObserved(nil); empty.Len() != 0 {
		t.Error("no texts, yet children")
	}
}

func TestObservedThatIsNotJSONIsARetry(t *testing.T) {
	_, err := NewObserved([]string{"{}", "not json"})
	var retry *Retry
	if !errors.As(err, &retry) || !strings.HasPrefix(retry.Message, "observed child #1 is not valid JSON: ") {
		t.Errorf("NewObserved = %v, want a Retry naming child #1", err)
	}
}
