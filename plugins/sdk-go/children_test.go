// Tests of kinds, observed and desired children, ported from the JS SDK's plugin.test.js and view.test.js.

package operatorhost

import (
	"encoding/json"
	"errors"
	"reflect"
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

// contentHashOf is the content hash on the pod template of d's first child.
func contentHashOf(d *Desired) any {
	template := d.Children[0]["spec"].(map[string]any)["template"].(map[string]any)
	return template["metadata"].(map[string]any)["annotations"].(map[string]any)[ContentHashAnnotation]
}

func TestARunOnceJobIsRecreatedBehindABarrierAndChangesWithItsInputs(t *testing.T) {
	job := map[string]any{"metadata": ChildMeta("migrate", nil)}
	first := new(Desired).RunOnce(job, map[string]any{"schema": 3})
	options, ok := first.OptionsOf(KindJob, "migrate")
	if want := (ChildOptions{}).Recreate().ReadyWhenCondition("Complete"); !ok || !reflect.DeepEqual(options, want) {
		t.Errorf("OptionsOf(Job, migrate) = %+v, %v; want %+v", options, ok, want)
	}
	same := new(Desired).RunOnce(job, map[string]any{"schema": 3})
	next := new(Desired).RunOnce(job, map[string]any{"schema": 4})
	if contentHashOf(first) != contentHashOf(same) {
		t.Error("the same inputs, different hashes")
	}
	if contentHashOf(first) == contentHashOf(next) {
		t.Error("different inputs, the same hash")
	}
	if hash, ok := contentHashOf(first).(string); !ok || hash != ContentHash(map[string]any{"schema": 3}) {
		t.Errorf("content hash = %#v, want ContentHash of the inputs", contentHashOf(first))
	}
	// The caller's Job is not changed.
	if got, _ := CanonicalJSON(job); got != `{"metadata":{"name":"migrate"}}` {
		t.Errorf("the Job passed = %s", got)
	}
}

func TestRunOnceIsTheRustSDKs(t *testing.T) {
	// The Rust SDK's Desired::run_once of the same Jobs and inputs, byte for byte.
	tests := []struct {
		name   string
		job    map[string]any
		inputs any
		want   string
	}{
		{"a Job with a pod template", migrationJob(), map[string]any{"image": "app:2", "schema": 4},
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"0553b6fb0bd74d49443f3365d0b2935d6da0ab1d79885898807e61f5793e9b39"},"name":"migrate"},"spec":{"backoffLimit":3,"template":{"metadata":{"annotations":{"sdk.operator-host.dev/content-hash":"2f8869cf48c9e58e7819601615aeadf739e3583e9abd11863f50abc5e4a89aec"},"labels":{"job":"migrate"}},"spec":{"containers":[{"command":["migrate","--to=4"],"env":[{"name":"DSN","valueFrom":{"secretKeyRef":{"key":"dsn","name":"db"}}}],"image":"app:2","name":"migrate"}],"restartPolicy":"Never"}},"ttlSecondsAfterFinished":600}}`},
		{"a Job without a spec", map[string]any{"metadata": ChildMeta("migrate", nil)}, map[string]any{"schema": 3},
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"7914dec95d66d8b4f50f1cd7c4dfb1c4459f92b07f3b17597515cb52971c3e70"},"name":"migrate"},"spec":{"template":{"metadata":{"annotations":{"sdk.operator-host.dev/content-hash":"dff5301227e85f41ec2776b60d699f43920caefa2928d292d6ad4944296005d8"}}}}}`},
		// A struct of the same fields is the same content.
		{"inputs as a struct", map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": ChildMeta("migrate", nil), "spec": nil}, struct {
			Schema int `json:"schema"`
		}{3},
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"7914dec95d66d8b4f50f1cd7c4dfb1c4459f92b07f3b17597515cb52971c3e70"},"name":"migrate"},"spec":{"template":{"metadata":{"annotations":{"sdk.operator-host.dev/content-hash":"dff5301227e85f41ec2776b60d699f43920caefa2928d292d6ad4944296005d8"}}}}}`},
	}
	for _, tt := range tests {
		desired := new(Desired).RunOnce(tt.job, tt.inputs)
		if got, _ := CanonicalJSON(desired.Children[0]); got != tt.want {
			t.Errorf("%s: RunOnce = %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestRunOncePanicsOnWhatIsNotAJob(t *testing.T) {
	tests := []struct {
		name string
		job  map[string]any
		want string
	}{
		{"another kind", map[string]any{"kind": "Deployment"}, "RunOnce takes a Job, not an object of kind Deployment"},
		{"another API version", map[string]any{"apiVersion": "batch/v2"}, "RunOnce takes a Job, not an object of apiVersion batch/v2"},
		{"a spec that is not an object", map[string]any{"spec": []any{}}, "RunOnce needs the Job's spec to be an object"},
		{"annotations that are not an object", map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": "a"}}}},
			"RunOnce needs the Job's spec.template.metadata.annotations to be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if message, _ := recover().(string); !strings.Contains(message, tt.want) {
					t.Errorf("panic %q, want one with %q", message, tt.want)
				}
			}()
			new(Desired).RunOnce(tt.job, 1)
		})
	}
}

func TestObservedRolloutOf(t *testing.T) {
	desired := new(Desired).RunOnce(migrationJob(), map[string]any{"schema": 4})
	// Not there yet.
	none, err := NewObserved(nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := none.RolloutOf(KindJob, "migrate", desired); err != nil || r.State() != RolloutPending ||
		r.Reason() != "NotCreated" || r.Message() != `the Job "migrate" is not created yet` {
		t.Errorf("RolloutOf with nothing observed = %v %s %q, %v", r.State(), r.Reason(), r.Message(), err)
	}
	// The Job RunOnce made, as the API server holds it once it has run: its run is complete.
	done := observedAs(t, desired.Children[0], func(object map[string]any) {
		object["metadata"].(map[string]any)["generation"] = 1
		spec := object["spec"].(map[string]any)
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"batch.kubernetes.io/controller-uid": "u"}}
		spec["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["batch.kubernetes.io/controller-uid"] = "u"
		object["status"] = map[string]any{"succeeded": 1, "conditions": []any{
			map[string]any{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"},
			map[string]any{"type": "Complete", "status": "True", "reason": "CompletionsReached"},
		}}
	})
	if r, err := done.RolloutOf(KindJob, "migrate", desired); err != nil || !r.IsComplete() {
		t.Errorf("RolloutOf the completed Job = %v %s %q, %v", r.State(), r.Reason(), r.Message(), err)
	}
	// Of other inputs, it is not the run desired now.
	next := new(Desired).RunOnce(migrationJob(), map[string]any{"schema": 5})
	if r, _ := done.RolloutOf(KindJob, "migrate", next); r.Reason() != "SpecNotApplied" {
		t.Errorf("RolloutOf the Job of old inputs = %s", r.Reason())
	}
	// Another kind of the same name is not the Job.
	if r, _ := done.RolloutOf(KindDeployment, "migrate", desired); r.Reason() != "NotCreated" || r.Message() != `the Deployment "migrate" is not created yet` {
		t.Errorf("RolloutOf a Deployment = %s %q", r.Reason(), r.Message())
	}
	// One that does not decode is a Retry.
	broken := observedAs(t, desired.Children[0], func(object map[string]any) {
		object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Complete", "status": true}}}
	})
	_, err = broken.RolloutOf(KindJob, "migrate", desired)
	var retry *Retry
	if !errors.As(err, &retry) || retry.Message != `observed Job "migrate" does not decode: invalid type: boolean `+"`true`"+`, expected a borrowed string` {
		t.Errorf("RolloutOf a Job that does not decode = %v, want a Retry", err)
	}
}
