// The recommended labels, the Rust SDK's labels.rs test ported.

package operatorhost

import (
	"reflect"
	"testing"
)

func TestComponentLabelsAddTheComponentToTheAppLabels(t *testing.T) {
	labels := ComponentLabels("webapp", "shop", "server")
	want := map[string]string{
		"app.kubernetes.io/component": "server",
		"app.kubernetes.io/instance":  "shop",
		"app.kubernetes.io/name":      "webapp",
	}
	if !reflect.DeepEqual(labels, want) {
		t.Errorf("ComponentLabels(webapp, shop, server) = %v, want %v", labels, want)
	}
	for key, value := range AppLabels("webapp", "shop") {
		if labels[key] != value {
			t.Errorf("the component labels have %s=%q, the app labels %q", key, labels[key], value)
		}
	}
	// As the Rust SDK writes them: keys sorted.
	if got, _ := CanonicalJSON(ChildMeta("svc", labels)); got != `{"labels":{"app.kubernetes.io/component":"server","app.kubernetes.io/instance":"shop","app.kubernetes.io/name":"webapp"},"name":"svc"}` {
		t.Errorf("the labels write as %s", got)
	}
	// Each call is a map of its own: changing one changes no other.
	ComponentLabels("webapp", "shop", "server")["extra"] = "x"
	if _, shared := AppLabels("webapp", "shop")["extra"]; shared {
		t.Error("AppLabels returned a shared map")
	}
}
