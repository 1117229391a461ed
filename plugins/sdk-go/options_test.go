// Tests of contract 0.2.0's additions: related objects declared and read, child options in
// the response.

package operatorhost

import (
	"reflect"
	"strings"
	"testing"
)

func TestRelatedAreDeclaredInInfo(t *testing.T) {
	plugin := gadgetPlugin()
	plugin.Related = []Related{
		RelatedByNameAt("tls", KindSecret, "spec.tls.secretName"),
		RelatedByLabels("config", KindConfigMap, "app=web").WithSecretData(),
	}
	info, err := plugin.info()
	if err != nil {
		t.Fatal(err)
	}
	want := []Related{
		{Name: "tls", Kind: KindSecret, Selector: RelatedSelector{Type: SelectNameFromPath, Value: "spec.tls.secretName"}, SecretView: SecretDataHash},
		{Name: "config", Kind: KindConfigMap, Selector: RelatedSelector{Type: SelectByLabels, Value: "app=web"}, SecretView: SecretFull},
	}
	if !reflect.DeepEqual(info.Related, want) {
		t.Errorf("related = %+v, want %+v", info.Related, want)
	}
}

func TestTheRequestsRelatedObjectsReachTheAuthor(t *testing.T) {
	plugin := gadgetPlugin()
	plugin.Related = []Related{RelatedByNameAt("tls", KindSecret, "spec.tlsSecret"), RelatedByLabels("config", KindConfigMap, "app=g")}
	var seen []string
	plugin.Reconcile = func(_ *Parent[gadgetSpec, gadgetStatus], observed *Observed) (*Desired, error) {
		for _, name := range []string{"tls", "config", "undeclared"} {
			for _, object := range observed.Related(name) {
				text, _ := CanonicalJSON(object)
				seen = append(seen, name+" "+text)
			}
		}
		type configMap struct {
			Data map[string]string `json:"data"`
		}
		decoded, err := RelatedAs[configMap](observed, "config")
		if err != nil {
			return nil, err
		}
		for _, config := range decoded {
			seen = append(seen, "decoded "+config.Data["k"])
		}
		return &Desired{}, nil
	}
	request := Request{
		Parent:   `{"spec":{"size":1}}`,
		Observed: []string{},
		Related: []RelatedObjects{
			{Name: "tls", Objects: []string{`{"kind":"Secret","metadata":{"name":"t"}}`}},
			{Name: "config", Objects: []string{`{"data":{"k":"one"}}`, `{"data":{"k":"two"}}`}},
		},
	}
	if _, err := plugin.reconcile(request); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`tls {"kind":"Secret","metadata":{"name":"t"}}`,
		`config {"data":{"k":"one"}}`,
		`config {"data":{"k":"two"}}`,
		"decoded one",
		"decoded two",
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("seen:\n%q\nwant\n%q", seen, want)
	}

	// A related object that is not JSON is the host's problem: retried.
	request.Related[1].Objects = []string{"{"}
	_, err := plugin.reconcile(request)
	if retry, ok := err.(*Retry); !ok || !strings.HasPrefix(retry.Message, "related config #0 is not valid JSON: ") {
		t.Errorf("related text that is not JSON: %#v", err)
	}
	// One that does not decode as the author's type is retried too, naming it.
	request.Related[1].Objects = []string{`{"data":{"k":1}}`}
	_, err = plugin.reconcile(request)
	if retry, ok := err.(*Retry); !ok || !strings.HasPrefix(retry.Message, "related config #0 does not decode: json: cannot unmarshal number") {
		t.Errorf("related object that does not decode: %#v", err)
	}
}

func TestRunWithRelatedSendsWhatTheHostWould(t *testing.T) {
	plugin := gadgetPlugin()
	plugin.Related = []Related{RelatedByLabels("config", KindConfigMap, "app=g")}
	count := -1
	plugin.Reconcile = func(_ *Parent[gadgetSpec, gadgetStatus], observed *Observed) (*Desired, error) {
		count = len(observed.Related("config"))
		return &Desired{}, nil
	}
	parent := gadget(map[string]any{"size": 1})
	if _, err := plugin.RunWithRelated(parent, map[string][]any{"config": {map[string]any{"data": map[string]any{}}}}); err != nil || count != 1 {
		t.Errorf("RunWithRelated: %d related, %v", count, err)
	}
	_, err := plugin.RunWithRelated(parent, map[string][]any{"secrets": {}})
	if err == nil || err.Error() != `related objects given as "secrets", which the plugin does not declare` {
		t.Errorf("an undeclared related name: %v", err)
	}
	observed := (&Observed{}).WithRelated("config", map[string]any{"a": 1})
	if got, _ := CanonicalJSON(observed.Related("config")); got != `[{"a":1}]` {
		t.Errorf("WithRelated = %s", got)
	}
}

func TestChildOptionsReachTheResponse(t *testing.T) {
	plugin := gadgetPlugin()
	plugin.Reconcile = func(_ *Parent[gadgetSpec, gadgetStatus], _ *Observed) (*Desired, error) {
		desired := &Desired{}
		// A child appended directly has no options entry: it gets the default.
		desired.Children = append(desired.Children, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "direct"}})
		desired.ChildWith(KindJob, map[string]any{"metadata": ChildMeta("migrate", nil)}, ChildOptions{}.Recreate().ReadyWhenCondition("Complete"))
		desired.ChildWith(KindConfigMap, map[string]any{"metadata": ChildMeta("kept", nil)}, ChildOptions{}.CreateOnly().OrphanOnPrune().ReadyWhenField("status.readyReplicas", 3))
		desired.Child(KindService, map[string]any{"metadata": ChildMeta("svc", nil)})
		return desired, nil
	}
	response, err := plugin.reconcile(Request{Parent: `{"spec":{"size":1}}`})
	if err != nil {
		t.Fatal(err)
	}
	var got []ChildOptions
	for _, child := range response.Children {
		got = append(got, child.Options)
	}
	want := []ChildOptions{
		{},
		{Update: UpdateRecreate, ReadyWhen: &Readiness{Condition: "Complete"}},
		{Update: UpdateCreateOnly, OnPrune: PruneOrphan, ReadyWhen: &Readiness{Path: "status.readyReplicas", Value: "3"}},
		{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("options = %+v, want %+v", got, want)
	}
	if !strings.Contains(response.Children[1].Object, `"name":"migrate"`) {
		t.Errorf("child 1 = %s", response.Children[1].Object)
	}
}

func TestOptionsOfAndReadinessValues(t *testing.T) {
	desired := (&Desired{}).ChildWith(KindConfigMap, map[string]any{"metadata": ChildMeta("c", nil)}, ChildOptions{}.ReadyWhenField("status.phase", "Running"))
	options, found := desired.OptionsOf(KindConfigMap, "c")
	if !found || *options.ReadyWhen != (Readiness{Path: "status.phase", Value: `"Running"`}) {
		t.Errorf("OptionsOf = %+v, %v", options, found)
	}
	if _, found := desired.OptionsOf(KindSecret, "c"); found {
		t.Error("OptionsOf found a child of another kind")
	}
	defer func() {
		if recovered := recover(); recovered == nil || !strings.Contains(recovered.(string), "the readiness value of status.x does not encode as JSON") {
			t.Errorf("ReadyWhenField of a channel panicked with %v", recovered)
		}
	}()
	ChildOptions{}.ReadyWhenField("status.x", make(chan int))
}
