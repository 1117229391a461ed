// Tests of kubectl's rollout rules and the spec hash that says whether a workload is current, ported from the JS SDK's view.test.js (itself the Rust SDK's view.rs tests).

package operatorhost

import (
	"errors"
	"testing"
)

// deployment is a Deployment of generation 2 with spec.replicas and status.
func deployment(replicas int, status map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "generation": 2},
		"spec":     map[string]any{"replicas": replicas},
		"status":   status,
	}
}

// statefulSet is a StatefulSet of generation 5 with 3 replicas, strategy and status.
func statefulSet(strategy, status map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "s", "generation": 5},
		"spec":     map[string]any{"replicas": 3, "updateStrategy": strategy},
		"status":   status,
	}
}

func rolling(partition int) map[string]any {
	return map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"partition": partition}}
}

// revisions is a StatefulSet status, fully ready and updated, at revision current.
func revisions(current string) map[string]any {
	return map[string]any{"observedGeneration": 5, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "currentRevision": current, "updateRevision": "s-2"}
}

// daemonSet is a DaemonSet of generation 3 with status.
func daemonSet(status map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "agent", "generation": 3},
		"spec":     map[string]any{},
		"status":   status,
	}
}

// scheduled is a DaemonSet's status of generation observed with its node counts.
func scheduled(observed, wanted, updated, available int) map[string]any {
	return map[string]any{"observedGeneration": observed, "desiredNumberScheduled": wanted, "updatedNumberScheduled": updated, "numberAvailable": available}
}

// job is the observed Job migrate (no generation: a Job has none to observe) with conditions.
func job(conditions ...map[string]any) map[string]any {
	items := make([]any, len(conditions))
	for i, c := range conditions {
		items[i] = c
	}
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "migrate"},
		"spec":     map[string]any{},
		"status":   map[string]any{"conditions": items},
	}
}

func onDelete(updated int) map[string]any {
	return statefulSet(map[string]any{"type": "OnDelete"}, map[string]any{"observedGeneration": 5, "replicas": 3, "readyReplicas": 3, "updatedReplicas": updated})
}

func TestRollout(t *testing.T) {
	partitioned := map[string]any{"observedGeneration": 5, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 2, "currentRevision": "s-1", "updateRevision": "s-2"}
	tests := []struct {
		name    string
		object  map[string]any
		state   RolloutState
		reason  string
		message string // checked when not empty
	}{
		{"a Deployment with every replica updated and available is complete",
			deployment(2, map[string]any{"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2}),
			RolloutComplete, "RolloutComplete", "rolled out"},
		{"a Deployment whose spec is not observed is pending",
			deployment(2, map[string]any{"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
			RolloutPending, "SpecNotObserved", "waiting for the Deployment controller to observe its spec"},
		{"a Deployment with no observed generation is pending",
			deployment(2, map[string]any{"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
			RolloutPending, "SpecNotObserved", ""},
		{"a Deployment past its progress deadline has failed",
			deployment(2, map[string]any{"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
				"conditions": []any{
					map[string]any{"type": "Available", "reason": "MinimumReplicasAvailable"},
					map[string]any{"type": "Progressing", "reason": "ProgressDeadlineExceeded"},
				}}),
			RolloutFailed, "ProgressDeadlineExceeded", `Deployment "d" exceeded its progress deadline`},
		{"a Deployment with fewer updated replicas than desired is pending",
			deployment(3, map[string]any{"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
			RolloutPending, "RolloutInProgress", "2 of 3 new replicas have been updated"},
		{"a Deployment with old replicas left is pending",
			deployment(2, map[string]any{"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 3}),
			RolloutPending, "RolloutInProgress", "1 old replicas are pending termination"},
		{"a Deployment with updated replicas not available is pending",
			deployment(2, map[string]any{"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1, "readyReplicas": 2}),
			RolloutPending, "RolloutInProgress", "1 of 2 updated replicas are available"},
		{"a StatefulSet with every pod updated and ready is complete",
			statefulSet(rolling(0), map[string]any{"observedGeneration": 5, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "currentRevision": "s-2", "updateRevision": "s-2"}),
			RolloutComplete, "RolloutComplete", ""},
		{"a StatefulSet whose spec is not observed is pending",
			statefulSet(rolling(0), map[string]any{"observedGeneration": 4, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3}),
			RolloutPending, "SpecNotObserved", ""},
		{"a StatefulSet with pods not ready is pending",
			statefulSet(rolling(0), map[string]any{"observedGeneration": 5, "replicas": 3, "readyReplicas": 2, "updatedReplicas": 3}),
			RolloutPending, "RolloutInProgress", "waiting for 1 pods to be ready"},
		{"a StatefulSet counts updated pods above its partition",
			statefulSet(rolling(0), partitioned),
			RolloutPending, "RolloutInProgress", "2 of 3 new pods have been updated"},
		{"pods below a StatefulSet's partition keep the old revision",
			statefulSet(rolling(1), partitioned),
			RolloutComplete, "RolloutComplete", ""},
		{"a missing partition is the API server's default, 0",
			statefulSet(map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{}},
				map[string]any{"observedGeneration": 5, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 2}),
			RolloutPending, "RolloutInProgress", ""},
		{"a StatefulSet without rolling update settings compares revisions",
			statefulSet(map[string]any{"type": "RollingUpdate"}, revisions("s-1")),
			RolloutPending, "RolloutInProgress", "waiting for the rolling update to revision s-2 (3 pods updated)"},
		{"a StatefulSet at the update revision is complete",
			statefulSet(map[string]any{"type": "RollingUpdate"}, revisions("s-2")),
			RolloutComplete, "RolloutComplete", ""},
		{"an OnDelete StatefulSet is pending until every pod is updated", onDelete(2), RolloutPending, "RolloutInProgress", "2 of 3 new pods have been updated"},
		{"an OnDelete StatefulSet with every pod updated is complete", onDelete(3), RolloutComplete, "RolloutComplete", ""},
		{"a DaemonSet with an available updated pod on every node is complete",
			daemonSet(scheduled(3, 2, 2, 2)), RolloutComplete, "RolloutComplete", "rolled out"},
		{"a DaemonSet with nodes not updated yet is pending",
			daemonSet(scheduled(3, 2, 1, 2)), RolloutPending, "RolloutInProgress", "1 of 2 new pods have been updated"},
		{"a DaemonSet with updated pods not available is pending",
			daemonSet(scheduled(3, 2, 2, 1)), RolloutPending, "RolloutInProgress", "1 of 2 updated pods are available"},
		{"a DaemonSet whose spec is not observed is pending",
			daemonSet(scheduled(2, 2, 2, 2)), RolloutPending, "SpecNotObserved", "waiting for the DaemonSet controller to observe its spec"},
		{"a DaemonSet scheduled on no node is complete",
			daemonSet(map[string]any{"observedGeneration": 3}), RolloutComplete, "RolloutComplete", ""},
		{"a Job without conditions is running",
			job(), RolloutPending, "JobRunning", `waiting for Job "migrate" to complete`},
		{"a Job whose Complete condition holds is complete",
			job(map[string]any{"type": "Complete", "status": "True"}), RolloutComplete, "RolloutComplete", "rolled out"},
		{"a Job whose Complete condition is False is running",
			job(map[string]any{"type": "Complete", "status": "False"}), RolloutPending, "JobRunning", ""},
		{"a condition without a status does not hold",
			job(map[string]any{"type": "Complete"}), RolloutPending, "JobRunning", ""},
		{"a Job whose Failed condition holds has failed, with its reason",
			job(map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}),
			RolloutFailed, "JobFailed", `Job "migrate" failed (BackoffLimitExceeded)`},
		{"a Job failed without a reason says so",
			job(map[string]any{"type": "Failed", "status": "True"}), RolloutFailed, "JobFailed", `Job "migrate" failed (no reason given)`},
		{"a Job whose Failed condition is False is running",
			job(map[string]any{"type": "Failed", "status": "False", "reason": "BackoffLimitExceeded"}), RolloutPending, "JobRunning", ""},
		{"a Job's completion counts before its failure",
			job(map[string]any{"type": "Failed", "status": "True"}, map[string]any{"type": "Complete", "status": "True"}),
			RolloutComplete, "RolloutComplete", ""},
		{"kinds without rollout rules are not complete",
			map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": map[string]any{"name": "x", "generation": 1}, "status": map[string]any{"observedGeneration": 1}},
			RolloutFailed, "UnsupportedKind", `no rollout rules for kind "ReplicaSet"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			view, err := DecodeWorkloadView(tt.object)
			if err != nil {
				t.Fatal(err)
			}
			got := view.Rollout()
			if got.State() != tt.state || got.Reason() != tt.reason || (tt.message != "" && got.Message() != tt.message) {
				t.Errorf("Rollout() = %v %s %q, want %v %s %q", got.State(), got.Reason(), got.Message(), tt.state, tt.reason, tt.message)
			}
			if got.IsComplete() != (tt.state == RolloutComplete) {
				t.Errorf("IsComplete() = %v for %v", got.IsComplete(), got.State())
			}
		})
	}
}

// desiredDeployment is a Desired with the Deployment d running image.
func desiredDeployment(image string) *Desired {
	return new(Desired).Child(KindDeployment, map[string]any{
		"metadata": ChildMeta("d", nil),
		"spec": map[string]any{"replicas": 2, "template": map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": image}}},
		}},
	})
}

// applied is what the API server holds after applying desired's Deployment: defaulted,
// generation 2, rolled out; edit changes it further. It comes as the host sends it, as JSON.
func applied(t *testing.T, desired *Desired, edit func(object map[string]any)) *Observed {
	t.Helper()
	return observedAs(t, desired.Children[0], func(object map[string]any) {
		spec := object["spec"].(map[string]any)
		container := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		container["imagePullPolicy"] = "IfNotPresent"
		object["metadata"].(map[string]any)["generation"] = 2
		object["status"] = map[string]any{"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}
		if edit != nil {
			edit(object)
		}
	})
}

func specHashOf(d *Desired) string {
	annotations, _ := d.Children[0]["metadata"].(map[string]any)["annotations"].(map[string]any)
	hash, _ := annotations[SpecHashAnnotation].(string)
	return hash
}

func TestWorkloadsAreStampedWithTheHashOfTheirSpec(t *testing.T) {
	a := desiredDeployment("memcached:1")
	if len(specHashOf(a)) != 64 {
		t.Errorf("spec hash %q, want 64 hex digits", specHashOf(a))
	}
	if specHashOf(a) != specHashOf(desiredDeployment("memcached:1")) {
		t.Error("equal specs, different hashes")
	}
	if specHashOf(a) == specHashOf(desiredDeployment("memcached:2")) {
		t.Error("different specs, equal hashes")
	}
	// The pod template is not annotated: stamping must never roll the pods.
	if _, ok := a.Children[0]["spec"].(map[string]any)["template"].(map[string]any)["metadata"]; ok {
		t.Error("the pod template has metadata")
	}
	service := new(Desired).Child(KindService, map[string]any{"metadata": ChildMeta("d", nil)})
	if _, ok := service.Children[0]["metadata"].(map[string]any)["annotations"]; ok {
		t.Error("a Service is stamped")
	}
	// The hash is of the spec's canonical JSON, as the Rust SDK's.
	if want := ContentHash(a.Children[0]["spec"]); specHashOf(a) != want {
		t.Errorf("spec hash %s, want ContentHash(spec) %s", specHashOf(a), want)
	}
}

func TestStampSpecHash(t *testing.T) {
	tests := []struct {
		name, child, want string
	}{
		{"a workload without metadata gets some",
			`{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{}}`,
			`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}},"spec":{}}`},
		{"other annotations are kept",
			`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"annotations":{"a":"b"}},"spec":null}`,
			`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"annotations":{"a":"b","sdk.operator-host.dev/spec-hash":"74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"}},"spec":null}`},
		{"a workload without a spec is not stamped",
			`{"apiVersion":"apps/v1","kind":"ReplicaSet"}`, `{"apiVersion":"apps/v1","kind":"ReplicaSet"}`},
		{"nor is one of another API version",
			`{"apiVersion":"apps/v2","kind":"Deployment","spec":{}}`, `{"apiVersion":"apps/v2","kind":"Deployment","spec":{}}`},
		{"a Job is stamped",
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{}}`,
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},"name":"j"},"spec":{}}`},
		{"a Job is not an apps/v1 kind",
			`{"apiVersion":"apps/v1","kind":"Job","spec":{}}`, `{"apiVersion":"apps/v1","kind":"Job","spec":{}}`},
		{"nor is a CronJob a workload",
			`{"apiVersion":"batch/v1","kind":"CronJob","spec":{}}`, `{"apiVersion":"batch/v1","kind":"CronJob","spec":{}}`},
		{"metadata that is not an object is left alone",
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":null,"spec":{}}`, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":null,"spec":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			value, err := ParseJSON(tt.child)
			if err != nil {
				t.Fatal(err)
			}
			stampSpecHash(value.(map[string]any))
			if got, _ := CanonicalJSON(value); got != tt.want {
				t.Errorf("stamped %s, want %s", got, tt.want)
			}
		})
	}
}

func TestTheRolloutOfAChangedSpecIsPendingUntilTheWorkloadCarriesIt(t *testing.T) {
	old := desiredDeployment("memcached:1")
	next := desiredDeployment("memcached:2")
	view, err := applied(t, old, nil).Workload(KindDeployment, "d")
	if err != nil || view == nil {
		t.Fatalf("Workload = %v, %v", view, err)
	}
	// Fully rolled out, and defaulted by the API server: current for what was applied...
	if !view.Rollout().IsComplete() || !view.IsCurrent(old) || !view.RolloutOf(old).IsComplete() {
		t.Errorf("the applied spec: %v, current %v", view.RolloutOf(old), view.IsCurrent(old))
	}
	// ...but not for the spec the plugin is about to apply.
	if view.IsCurrent(next) {
		t.Error("current for the next spec")
	}
	if r := view.RolloutOf(next); r.Reason() != "SpecNotApplied" || r.Message() != `the Deployment "d" does not carry the desired spec yet` {
		t.Errorf("RolloutOf(next) = %s %q", r.Reason(), r.Message())
	}
	// A workload applied before the SDK stamped it is not current either.
	unstamped, _ := applied(t, old, func(object map[string]any) {
		delete(object["metadata"].(map[string]any), "annotations")
	}).Workload(KindDeployment, "d")
	if r := unstamped.RolloutOf(old); r.Reason() != "SpecNotApplied" {
		t.Errorf("RolloutOf an unstamped workload: %s", r.Reason())
	}
	// Nor is a workload the plugin does not desire (another kind of the same name).
	otherKind, _ := applied(t, old, func(object map[string]any) { object["kind"] = "StatefulSet" }).Workload(KindStatefulSet, "d")
	if otherKind.IsCurrent(old) {
		t.Error("a StatefulSet is current for a desired Deployment")
	}
}

func TestViewsDecodeOnlyTheFieldsAskedFor(t *testing.T) {
	observed, err := NewObserved([]string{
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"status":{"readyReplicas":7}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","generation":4},
		  "spec":{"replicas":3,"template":{"spec":{"volumes":[{"name":"v","emptyDir":{}}]}}},
		  "status":{"readyReplicas":2,"observedGeneration":4}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b"},"status":{"readyReplicas":"two"}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	view, err := observed.Workload(KindDeployment, "a")
	if err != nil {
		t.Fatal(err)
	}
	if *view.Metadata.Generation != 4 || *view.Spec.Replicas != 3 || *view.Status.ReadyReplicas != 2 || view.Status.UpdatedReplicas != nil {
		t.Errorf("view = %+v", view)
	}
	for _, name := range []string{"c"} {
		if view, err := observed.Workload(KindDeployment, name); view != nil || err != nil {
			t.Errorf("Workload(Deployment, %s) = %v, %v; want nil, nil", name, view, err)
		}
	}
	if view, err := observed.Workload(KindService, "b"); view != nil || err != nil {
		t.Errorf("Workload(Service, b) = %v, %v; want nil, nil", view, err)
	}
	_, err = observed.Workload(KindDeployment, "b")
	var retry *Retry
	if !errors.As(err, &retry) || retry.Message != `observed Deployment "b" does not decode: invalid type: string "two", expected i32` {
		t.Errorf("Workload(Deployment, b) = %v, want a Retry", err)
	}
}

func TestWorkloadViewDecodesAsSerdeDoes(t *testing.T) {
	tests := []struct{ object, want string }{
		// Every message is serde_json's for the Rust SDK's WorkloadView.
		{`{"kind":5}`, "invalid type: integer `5`, expected a borrowed string"},
		{`{"metadata":{"name":null}}`, "invalid type: null, expected a borrowed string"},
		{`{"metadata":{"generation":1.0}}`, "invalid type: floating point `1.0`, expected i64"},
		{`{"metadata":{"generation":9223372036854775808}}`, "invalid value: integer `9223372036854775808`, expected i64"},
		{`{"metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":true}}}`, "invalid type: boolean `true`, expected a borrowed string"},
		{`{"metadata":"m"}`, `invalid type: string "m", expected struct MetadataView`},
		{`{"spec":{"replicas":3000000000}}`, "invalid value: integer `3000000000`, expected i32"},
		{`{"spec":{"replicas":-3000000000}}`, "invalid value: integer `-3000000000`, expected i32"},
		{`{"spec":{"replicas":1e3}}`, "invalid type: floating point `1000.0`, expected i32"},
		{`{"spec":{"updateStrategy":{"rollingUpdate":[]}}}`, ""},
		{`{"spec":{"updateStrategy":{"rollingUpdate":7}}}`, "invalid type: integer `7`, expected struct RollingUpdateView"},
		{`{"spec":{"updateStrategy":null}}`, "invalid type: null, expected struct UpdateStrategyView"},
		{`{"status":{"conditions":null}}`, "invalid type: null, expected a sequence"},
		{`{"status":{"conditions":{}}}`, "invalid type: map, expected a sequence"},
		{`{"status":{"conditions":[["Progressing","ProgressDeadlineExceeded"]]}}`, ""},
		{`{"status":{"conditions":[["Progressing","True","ProgressDeadlineExceeded"]]}}`, ""},
		{`{"status":{"conditions":[["Progressing","x","y","z"]]}}`, "invalid length 4, expected fewer elements in array"},
		{`{"status":{"conditions":[{"type":"Complete","status":null}]}}`, "invalid type: null, expected a borrowed string"},
		{`{"status":{"conditions":[{"type":"Complete","status":true}]}}`, "invalid type: boolean `true`, expected a borrowed string"},
		{`{"status":{"numberAvailable":"x","desiredNumberScheduled":2.5}}`, "invalid type: floating point `2.5`, expected i32"},
		{`{"status":{"updatedNumberScheduled":3000000000}}`, "invalid value: integer `3000000000`, expected i32"},
		{`{"status":[1,2,3,4,5,"c","u",6,7,8,[]]}`, ""},
		{`{"status":[1,2,3,4,5,"c","u",6,7,"8"]}`, `invalid type: string "8", expected i32`},
		{`{"status":[1,2,3,4,5,"c","u",6,7,8,[],9]}`, "invalid length 12, expected fewer elements in array"},
		{`{"status":{"conditions":[[1]]}}`, "invalid type: integer `1`, expected a borrowed string"},
		{`{"status":{"replicas":null,"currentRevision":null}}`, ""},
		// serde_json's maps are sorted: the first bad field in key order is reported.
		{`{"status":{"updatedReplicas":"u","readyReplicas":"r"}}`, `invalid type: string "r", expected i32`},
		{`{"status":[1,2,[]]}`, "invalid type: sequence, expected i32"},
		{`{"status":[1,2,3,4,5,6]}`, "invalid type: integer `6`, expected a borrowed string"},
	}
	for _, tt := range tests {
		value, err := ParseJSON(tt.object)
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeWorkloadView(value)
		if got := ""; err != nil {
			got = err.Error()
			if got != tt.want {
				t.Errorf("decode %s: %q, want %q", tt.object, got, tt.want)
			}
		} else if tt.want != "" {
			t.Errorf("decode %s: no error, want %q", tt.object, tt.want)
		}
	}
	view, err := DecodeWorkloadView(map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": []any{"s", 5, map[string]any{SpecHashAnnotation: "h"}},
		"spec":     map[string]any{"updateStrategy": map[string]any{"type": "OnDelete", "rollingUpdate": nil}},
		"status": map[string]any{
			"desiredNumberScheduled": 4, "updatedNumberScheduled": 3, "numberAvailable": nil,
			"conditions": []any{map[string]any{"reason": "R"}, []any{"Complete", "True"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if hash, ok := view.SpecHash(); view.Metadata.Name != "s" || *view.Metadata.Generation != 5 || !ok || hash != "h" {
		t.Errorf("metadata = %+v", view.Metadata)
	}
	if *view.Spec.UpdateStrategy.Type != "OnDelete" || view.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("spec = %+v", view.Spec)
	}
	if c := view.Status.Conditions; len(c) != 2 || c[0].Type != "" || c[0].Status != "" || *c[0].Reason != "R" ||
		c[1].Type != "Complete" || c[1].Status != "True" || c[1].Reason != nil {
		t.Errorf("conditions = %+v", c)
	}
	if s := view.Status; *s.DesiredNumberScheduled != 4 || *s.UpdatedNumberScheduled != 3 || s.NumberAvailable != nil {
		t.Errorf("DaemonSet counts = %v %v %v", *s.DesiredNumberScheduled, *s.UpdatedNumberScheduled, s.NumberAvailable)
	}
}

func TestSpecHashesEqualTheOtherSDKs(t *testing.T) {
	// The Rust memcached plugin's Deployment, from host/tests/golden/memcached.yaml.
	golden, err := ParseJSON(`{"replicas":3,"selector":{"matchLabels":{"app.kubernetes.io/instance":"memcached-sample","app.kubernetes.io/name":"memcached"}},"template":{"metadata":{"labels":{"app.kubernetes.io/component":"cache","app.kubernetes.io/instance":"memcached-sample","app.kubernetes.io/name":"memcached"}},"spec":{"containers":[{"args":["-m=64","-o","modern","-p=11211"],"image":"memcached:1.6.39-alpine","livenessProbe":{"periodSeconds":10,"tcpSocket":{"port":"memcached"}},"name":"memcached","ports":[{"containerPort":11211,"name":"memcached","protocol":"TCP"}],"readinessProbe":{"periodSeconds":10,"tcpSocket":{"port":"memcached"}},"resources":{"limits":{"memory":"128Mi"},"requests":{"cpu":"50m","memory":"64Mi"}},"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}],"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		desired *Desired
		want    string
	}{
		{"the Rust SDK's golden memcached Deployment",
			new(Desired).Child(KindDeployment, map[string]any{"metadata": ChildMeta("memcached-sample", nil), "spec": golden}),
			"0d099da808223ccae40f7cf9121f03dcf3efe22204b7be8d61ed1db7bba1db3b"},
		// The JS SDK's hashes of the same children (node, plugins/sdk-js).
		{"the JS SDK's Deployment of view.test.js", desiredDeployment("memcached:1"),
			"fabd5663721e49b0c080881d5ffb5cd6567148ca2c3c6e254faba91e5beaf07b"},
		{"the JS SDK's StatefulSet with a float, non-ASCII and U+2028",
			new(Desired).Child(KindStatefulSet, map[string]any{
				"metadata": ChildMeta("s", map[string]string{"app": "x"}),
				"spec": map[string]any{
					"replicas": 3,
					"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
					"template": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{"app": "x", "é": "ü"}},
						"spec": map[string]any{"containers": []any{map[string]any{
							"name": "c", "image": "memcached:1", "args": []string{"-m", "64", "\u2028<&>"},
							"resources": map[string]any{"limits": map[string]any{"cpu": 0.5}},
						}}},
					},
				},
			}),
			"543e3a289024df85a823f728a384dbff515ef01fcd66ccd63930c50c7be20602"},
		// The Rust SDK's hashes of these children (Desired::child of the k8s-openapi types
		// decoded from the same JSON, by the operator-host-sdk of this commit).
		{"the Rust SDK's DaemonSet with an int-or-string, non-ASCII and U+2028",
			new(Desired).Child(KindDaemonSet, map[string]any{
				"metadata": ChildMeta("agent", map[string]string{"app": "agent"}),
				"spec": map[string]any{
					"selector":       map[string]any{"matchLabels": map[string]any{"app": "agent"}},
					"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 1}},
					"template": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{"app": "agent"}},
						"spec": map[string]any{
							"containers": []any{map[string]any{
								"name": "agent", "image": "agent:1.2", "args": []string{"--node=$(NODE_NAME)", "caf\u00e9 \u2028<&>"},
								"resources": map[string]any{"limits": map[string]any{"cpu": "100m", "memory": "64Mi"}},
							}},
							"tolerations": []any{map[string]any{"operator": "Exists"}},
						},
					},
				},
			}),
			"10357ff3552c49a7b5767c74628f80259860b1e0ef4419bfc8aa5261e12097de"},
		{"the Rust SDK's ReplicaSet", new(Desired).Child(KindReplicaSet, map[string]any{
			"metadata": ChildMeta("r", nil),
			"spec": map[string]any{
				"replicas": 2, "minReadySeconds": 5,
				"selector": map[string]any{"matchLabels": map[string]any{"app": "r"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "r"}},
					"spec": map[string]any{"containers": []any{map[string]any{
						"name": "c", "image": "memcached:1", "ports": []any{map[string]any{"containerPort": 11211, "name": "memcached"}},
					}}},
				},
			},
		}),
			"60839cf21bf8c02e7f70f8ea463cd1a5e6b646f36e77511955d6363519ab7d25"},
		{"the Rust SDK's Job", new(Desired).Child(KindJob, migrationJob()),
			"51758f7d4bcaa880a5c524427988271a705748968abd5a403f6efb2ff4acaec7"},
		// The Rust etcd plugin's membership Job, from host/tests/golden/etcd-scale-up.yaml.
		{"the Rust SDK's golden etcd Job",
			new(Desired).Child(KindJob, map[string]any{"metadata": ChildMeta("example-add-3", nil), "spec": mustParseJSON(t, goldenEtcdJobSpec)}),
			"151200e617e0f031bca543bb46ad61c5d1c505c5321918244ac11d6a9038e670"},
	}
	for _, tt := range tests {
		if got := specHashOf(tt.desired); got != tt.want {
			t.Errorf("%s: spec hash %s, want %s", tt.name, got, tt.want)
		}
	}
}

// goldenEtcdJobSpec is the spec of the Job in host/tests/golden/etcd-scale-up.yaml, as JSON.
const goldenEtcdJobSpec = `{"activeDeadlineSeconds":600,"backoffLimit":4,"template":{"metadata":{"labels":{"app.kubernetes.io/component":"membership","app.kubernetes.io/instance":"example","app.kubernetes.io/name":"etcd"}},"spec":{"containers":[{"command":["/bin/sh","-ec","if etcdctl member list | awk -F', ' -v url=\"$PEER_URL\" '$4 == url { found = 1 } END { exit !found }'; then\n  echo \"$MEMBER ($PEER_URL) is already a member\"\nelse\n  etcdctl member add \"$MEMBER\" --peer-urls=\"$PEER_URL\"\nfi"],"env":[{"name":"ETCDCTL_API","value":"3"},{"name":"ETCDCTL_ENDPOINTS","value":"http://example-client.default.svc:2379"},{"name":"MEMBER","value":"example-3"},{"name":"PEER_URL","value":"http://example-3.example-peer.default.svc:2380"}],"image":"docker.io/bitnami/etcd:3.5.17","name":"etcdctl","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}],"restartPolicy":"Never","securityContext":{"fsGroup":1001,"runAsGroup":1001,"runAsNonRoot":true,"runAsUser":1001,"seccompProfile":{"type":"RuntimeDefault"}}}}}`

func mustParseJSON(t *testing.T, text string) any {
	t.Helper()
	value, err := ParseJSON(text)
	if err != nil {
		t.Fatal(err)
	}
	return value
}

// migrationJob is the Job migrate, as the cross-SDK tests build it.
func migrationJob() map[string]any {
	return map[string]any{
		"metadata": ChildMeta("migrate", nil),
		"spec": map[string]any{
			"backoffLimit": 3, "ttlSecondsAfterFinished": 600,
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"job": "migrate"}},
				"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{
					"name": "migrate", "image": "app:2", "command": []string{"migrate", "--to=4"},
					"env": []any{map[string]any{"name": "DSN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "dsn"}}}},
				}}},
			},
		},
	}
}

// observedAs is object (a desired child) as the host would send it back: with edit applied.
func observedAs(t *testing.T, object map[string]any, edit func(object map[string]any)) *Observed {
	t.Helper()
	copied := jsonCopy(object, "the child").(map[string]any)
	edit(copied)
	text, err := CanonicalJSON(copied)
	if err != nil {
		t.Fatal(err)
	}
	observed, err := NewObserved([]string{text})
	if err != nil {
		t.Fatal(err)
	}
	return observed
}

func TestAnOldJobsCompletionIsNotTheDesiredJobs(t *testing.T) {
	jobRunning := func(command string) *Desired {
		return new(Desired).Child(KindJob, map[string]any{
			"metadata": ChildMeta("migrate", nil),
			"spec": map[string]any{"template": map[string]any{
				"metadata": ChildMeta("migrate", map[string]string{"run": command}),
			}},
		})
	}
	old := jobRunning("v1")
	observed := observedAs(t, old.Children[0], func(object map[string]any) {
		object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}
	})
	view, err := observed.Workload(KindJob, "migrate")
	if err != nil || view == nil {
		t.Fatalf("Workload = %v, %v", view, err)
	}
	if r := view.RolloutOf(old); !r.IsComplete() {
		t.Errorf("RolloutOf(old) = %v %s", r.State(), r.Reason())
	}
	// The plugin now wants the Job of new inputs: the old one's completion says nothing.
	if r := view.RolloutOf(jobRunning("v2")); r.State() != RolloutPending || r.Reason() != "SpecNotApplied" ||
		r.Message() != `the Job "migrate" does not carry the desired spec yet` {
		t.Errorf("RolloutOf(new) = %v %s %q", r.State(), r.Reason(), r.Message())
	}
}

func TestARolloutIsACondition(t *testing.T) {
	// The Rust SDK's Rollout::condition of the same rollouts, as JSON.
	generation := int64(7)
	tests := []struct {
		rollout    Rollout
		generation *int64
		want       string
	}{
		{completeRollout(), &generation,
			`{"message":"rolled out","observedGeneration":7,"reason":"RolloutComplete","status":"True","type":"MigrationComplete"}`},
		{pendingRollout("JobRunning", "waiting"), nil,
			`{"message":"waiting","reason":"JobRunning","status":"False","type":"MigrationComplete"}`},
		{failedRollout("JobFailed", `Job "migrate" failed (no reason given)`), &generation,
			`{"message":"Job \"migrate\" failed (no reason given)","observedGeneration":7,"reason":"JobFailed","status":"False","type":"MigrationComplete"}`},
	}
	for _, tt := range tests {
		condition := tt.rollout.Condition("MigrationComplete", tt.generation)
		if got, _ := CanonicalJSON(condition); got != tt.want {
			t.Errorf("Condition of %s = %s, want %s", tt.rollout.Reason(), got, tt.want)
		}
	}
	// The condition keeps its own copy of the generation.
	condition := completeRollout().Condition("Available", &generation)
	generation = 8
	if *condition.ObservedGeneration != 7 {
		t.Errorf("observedGeneration followed the caller's variable: %d", *condition.ObservedGeneration)
	}
}
