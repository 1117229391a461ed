// Native unit tests of the Go Memcached reconcile logic (the same cases as the Rust plugin's).
package main

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	oh "operator-host.dev/sdk"
)

func memcached(name string, spec map[string]any) map[string]any {
	full := map[string]any{"size": 2}
	maps.Copy(full, spec)
	return map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": name, "namespace": "default", "generation": 3},
		"spec":       full,
	}
}

func reconcileOK(t *testing.T, cr map[string]any, observed ...any) *oh.Desired {
	t.Helper()
	desired, err := Plugin.Run(cr, observed...)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return desired
}

// asJSON is v as the host reads it (maps of any, numbers as float64).
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	text, err := oh.CanonicalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	var object map[string]any
	if err := json.Unmarshal([]byte(text), &object); err != nil {
		t.Fatal(err)
	}
	return object
}

func child(t *testing.T, desired *oh.Desired, kind oh.Kind) map[string]any {
	t.Helper()
	for _, c := range desired.Children {
		if c["kind"] == kind.Kind {
			return asJSON(t, c)
		}
	}
	t.Fatalf("no %s among the children", kind.Kind)
	return nil
}

func at(object any, path ...any) any {
	for _, step := range path {
		switch key := step.(type) {
		case string:
			object = object.(map[string]any)[key]
		case int:
			object = object.([]any)[key]
		}
	}
	return object
}

func available(t *testing.T, desired *oh.Desired) (string, string) {
	t.Helper()
	condition := at(asJSON(t, desired.Status), "conditions", 0).(map[string]any)
	if condition["type"] != "Available" {
		t.Fatalf("the first condition is %v", condition["type"])
	}
	return condition["status"].(string), condition["reason"].(string)
}

// appliedDeployment is the Deployment the host applied for cr, once its controller observed
// it with ready pods ready, all updated and available.
func appliedDeployment(t *testing.T, cr map[string]any, ready int) map[string]any {
	t.Helper()
	deployment := child(t, reconcileOK(t, cr), oh.KindDeployment)
	deployment["metadata"].(map[string]any)["generation"] = 2
	deployment["status"] = map[string]any{
		"observedGeneration": 2, "replicas": ready, "readyReplicas": ready,
		"updatedReplicas": ready, "availableReplicas": ready,
	}
	return deployment
}

func TestDeploymentReplicasFollowSizeAndServiceTargetsThePort(t *testing.T) {
	desired := reconcileOK(t, memcached("mc", map[string]any{"size": 3, "containerPort": 1234}))
	deployment := child(t, desired, oh.KindDeployment)
	if got := at(deployment, "spec", "replicas"); got != 3.0 {
		t.Errorf("replicas = %v", got)
	}
	container := at(deployment, "spec", "template", "spec", "containers", 0)
	if got := at(container, "image"); got != defaultImage {
		t.Errorf("image = %v", got)
	}
	if got := at(container, "ports", 0, "containerPort"); got != 1234.0 {
		t.Errorf("containerPort = %v", got)
	}
	service := child(t, desired, oh.KindService)
	if got := at(service, "spec", "ports", 0, "port"); got != 1234.0 {
		t.Errorf("port = %v", got)
	}
	if got := at(service, "spec", "ports", 0, "targetPort"); got != "memcached" {
		t.Errorf("targetPort = %v", got)
	}
}

func TestSelectorsAreUniquePerCR(t *testing.T) {
	selector := func(name string) any {
		return at(child(t, reconcileOK(t, memcached(name, nil)), oh.KindDeployment), "spec", "selector", "matchLabels")
	}
	if reflect.DeepEqual(selector("a"), selector("b")) {
		t.Error("two CRs share a selector")
	}
}

func TestStatusWithoutAnObservedDeploymentIsNotAvailable(t *testing.T) {
	status := asJSON(t, reconcileOK(t, memcached("mc", nil)).Status)
	condition := at(status, "conditions", 0).(map[string]any)
	if status["readyReplicas"] != 0.0 {
		t.Errorf("readyReplicas = %v", status["readyReplicas"])
	}
	if condition["status"] != "False" || condition["reason"] != "DeploymentNotFound" {
		t.Errorf("condition = %v", condition)
	}
	if condition["observedGeneration"] != 3.0 {
		t.Errorf("observedGeneration = %v", condition["observedGeneration"])
	}
	if _, stamped := condition["lastTransitionTime"]; stamped {
		t.Error("the plugin stamped lastTransitionTime: the host does")
	}
}

func TestStatusIsAvailableOnceEveryPodIsReady(t *testing.T) {
	cr := memcached("mc", nil)
	if status, reason := available(t, reconcileOK(t, cr, appliedDeployment(t, cr, 1))); status != "False" || reason != "RolloutInProgress" {
		t.Errorf("one of two ready: %s %s", status, reason)
	}
	ready := reconcileOK(t, cr, appliedDeployment(t, cr, 2))
	if status, reason := available(t, ready); status != "True" || reason != "MinimumReplicasReady" {
		t.Errorf("all ready: %s %s", status, reason)
	}
	if got := asJSON(t, ready.Status)["selector"]; got != "app.kubernetes.io/instance=mc,app.kubernetes.io/name=memcached" {
		t.Errorf("selector = %v", got)
	}
}

func TestStatusReportsScalingWhileTheDeploymentHasTheOldSize(t *testing.T) {
	observed := appliedDeployment(t, memcached("mc", nil), 2)
	if _, reason := available(t, reconcileOK(t, memcached("mc", map[string]any{"size": 5}), observed)); reason != "Scaling" {
		t.Errorf("reason = %s", reason)
	}
}

func TestStatusIsNotAvailableWhileTheObservedDeploymentHasTheOldImage(t *testing.T) {
	old := memcached("mc", nil)
	updated := memcached("mc", map[string]any{"image": "memcached:1.6.40"})
	updated["metadata"].(map[string]any)["generation"] = 4
	desired := reconcileOK(t, updated, appliedDeployment(t, old, 2))
	if status, reason := available(t, desired); status != "False" || reason != "SpecNotApplied" {
		t.Errorf("old image observed: %s %s", status, reason)
	}
	if got := at(asJSON(t, desired.Status), "conditions", 0, "observedGeneration"); got != 4.0 {
		t.Errorf("observedGeneration = %v", got)
	}
	if status, reason := available(t, reconcileOK(t, updated, appliedDeployment(t, updated, 2))); status != "True" || reason != "MinimumReplicasReady" {
		t.Errorf("new image observed: %s %s", status, reason)
	}
}

func TestStatusIsNotAvailableUntilTheNewPodsReplaceTheOldOnes(t *testing.T) {
	cr := memcached("mc", nil)
	rolling := appliedDeployment(t, cr, 2)
	rolling["metadata"].(map[string]any)["generation"] = 3
	if status, reason := available(t, reconcileOK(t, cr, rolling)); status != "False" || reason != "SpecNotObserved" {
		t.Errorf("spec not observed: %s %s", status, reason)
	}
	status := rolling["status"].(map[string]any)
	status["observedGeneration"], status["replicas"], status["readyReplicas"] = 3, 3, 3
	desired := reconcileOK(t, cr, rolling)
	if status, reason := available(t, desired); status != "False" || reason != "RolloutInProgress" {
		t.Errorf("old pods left: %s %s", status, reason)
	}
	if message := at(asJSON(t, desired.Status), "conditions", 0, "message").(string); !strings.Contains(message, "1 old replicas") {
		t.Errorf("message = %q", message)
	}
	status["replicas"] = 2
	if status, reason := available(t, reconcileOK(t, cr, rolling)); status != "True" || reason != "MinimumReplicasReady" {
		t.Errorf("rolled out: %s %s", status, reason)
	}
}

func TestOutOfRangeValuesAreRejectedWithTheField(t *testing.T) {
	for _, c := range []struct {
		spec    map[string]any
		message string
	}{
		{map[string]any{"size": maxSize + 1}, "spec.size: must be between 0 and 100, got 101"},
		{map[string]any{"size": 1, "containerPort": 70000}, "spec.containerPort: must be between 1 and 65535, got 70000"},
		{map[string]any{"size": 1, "image": "bad image"}, `spec.image: must be a container image reference, got "bad image"`},
	} {
		_, err := Plugin.Run(memcached("mc", c.spec))
		var invalid *oh.InvalidSpec
		if !errors.As(err, &invalid) || invalid.Message != c.message {
			t.Errorf("%v: got %v, want InvalidSpec %q", c.spec, err, c.message)
		}
	}
}

func TestResourcesTheAPIServerRefusesAreRejectedWithTheEntry(t *testing.T) {
	for _, c := range []struct {
		resources map[string]any
		prefix    string
	}{
		{map[string]any{"requests": map[string]any{"k": 1}}, `spec.resources.requests["k"]: `},
		{map[string]any{"requests": map[string]any{"bad key": 1}}, `spec.resources.requests["bad key"]: `},
		{map[string]any{"limits": map[string]any{"cpu": "not-a-quantity"}}, `spec.resources.limits["cpu"]: `},
		{map[string]any{"requests": map[string]any{"cpu": "2"}, "limits": map[string]any{"cpu": "1"}}, `spec.resources.requests["cpu"]: `},
		{map[string]any{"requests": map[string]any{"example.com/gpu": 1}}, `spec.resources.limits["example.com/gpu"]: `},
	} {
		_, err := Plugin.Run(memcached("mc", map[string]any{"resources": c.resources}))
		var invalid *oh.InvalidSpec
		if !errors.As(err, &invalid) || !strings.HasPrefix(invalid.Message, c.prefix) {
			t.Errorf("%v: got %v, want an InvalidSpec starting %q", c.resources, err, c.prefix)
		}
	}
}

func TestTheContainerGetsResourcesAsTheAPIServerStoresThem(t *testing.T) {
	resources := map[string]any{"requests": map[string]any{"cpu": "0.5"}, "limits": map[string]any{}, "claims": []any{}}
	desired := reconcileOK(t, memcached("mc", map[string]any{"resources": resources}))
	container := at(child(t, desired, oh.KindDeployment), "spec", "template", "spec", "containers", 0).(map[string]any)
	if want := map[string]any{"requests": map[string]any{"cpu": "500m"}}; !reflect.DeepEqual(container["resources"], want) {
		t.Errorf("resources = %v, want %v", container["resources"], want)
	}
	plain := at(child(t, reconcileOK(t, memcached("mc", nil)), oh.KindDeployment), "spec", "template", "spec", "containers", 0).(map[string]any)
	if _, set := plain["resources"]; set {
		t.Error("a container without resources in the spec got some")
	}
}

func TestTheDeploymentCarriesTheHashOfItsSpecAndItsPodsDoNot(t *testing.T) {
	desired := reconcileOK(t, memcached("mc", nil))
	deployment := child(t, desired, oh.KindDeployment)
	if _, ok := at(deployment, "metadata", "annotations").(map[string]any)[oh.SpecHashAnnotation]; !ok {
		t.Error("no spec hash on the Deployment")
	}
	if _, ok := at(deployment, "spec", "template", "metadata").(map[string]any)["annotations"]; ok {
		t.Error("the pod template is annotated: changing it would roll the pods")
	}
	if _, ok := at(child(t, desired, oh.KindService), "metadata").(map[string]any)["annotations"]; ok {
		t.Error("the Service is annotated")
	}
}

func TestChildrenCarryNoNamespaceOrOwner(t *testing.T) {
	for _, c := range reconcileOK(t, memcached("mc", nil)).Children {
		metadata := asJSON(t, c)["metadata"].(map[string]any)
		if _, ok := metadata["namespace"]; ok {
			t.Errorf("%v has a namespace", c["kind"])
		}
		if _, ok := metadata["ownerReferences"]; ok {
			t.Errorf("%v has an owner", c["kind"])
		}
	}
}

func TestCRDDeclaresDefaultsRangeAndPrinterColumns(t *testing.T) {
	crd, err := Plugin.CRD()
	if err != nil {
		t.Fatal(err)
	}
	version := at(asJSON(t, crd), "spec", "versions", 0)
	spec := at(version, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	if got := at(spec, "size", "maximum"); got != 100.0 {
		t.Errorf("size maximum = %v", got)
	}
	if got := at(spec, "image", "default"); got != defaultImage {
		t.Errorf("image default = %v", got)
	}
	if got := at(spec, "containerPort", "default"); got != float64(defaultPort) {
		t.Errorf("containerPort default = %v", got)
	}
	var names []string
	for _, column := range at(version, "additionalPrinterColumns").([]any) {
		names = append(names, column.(map[string]any)["name"].(string))
	}
	if want := []string{"Size", "Ready", "Available", "Image", "Age"}; !reflect.DeepEqual(names, want) {
		t.Errorf("printer columns = %v", names)
	}
}

func TestADecodeErrorNamesTheField(t *testing.T) {
	_, err := Plugin.Run(memcached("mc", map[string]any{"size": "three"}))
	var invalid *oh.InvalidSpec
	if !errors.As(err, &invalid) || invalid.Message != `spec.size: expected an integer, got "three"` {
		t.Errorf("got %v", err)
	}
}

func TestAdmissionRefusesWhatReconcileWouldAndWarnsAtSizeZero(t *testing.T) {
	validation, err := Plugin.RunValidate(memcached("mc", map[string]any{"size": 101}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, fieldError := range validation.Errors() {
		refused = append(refused, fieldError.String())
	}
	if want := []string{"spec.size: Invalid value: must be between 0 and 100, got 101"}; !reflect.DeepEqual(refused, want) {
		t.Errorf("errors = %q, want %q", refused, want)
	}
	validation, _ = Plugin.RunValidate(memcached("mc", map[string]any{"size": 0}), nil)
	want := []string{"Memcached mc: spec.size is 0, so no Memcached pod runs"}
	if !validation.IsValid() || !reflect.DeepEqual(validation.Warnings(), want) {
		t.Errorf("size 0: errors %v, warnings %q; want none and %q", validation.Errors(), validation.Warnings(), want)
	}
}

func TestDefaultingPinsAnUntaggedMemcachedImageAndNothingElse(t *testing.T) {
	for _, tt := range []struct{ image, defaulted string }{
		{"memcached", "memcached:1.6.39-alpine"},
		{"mirror.example.com/library/memcached", "mirror.example.com/library/memcached:1.6.39-alpine"},
		{"memcached:1.6.30", "memcached:1.6.30"},
		{"memcached@sha256:abc", "memcached@sha256:abc"},
		{"example.com/other", "example.com/other"},
	} {
		defaulted, err := Plugin.RunDefault(memcached("mc", map[string]any{"image": tt.image}))
		if err != nil {
			t.Fatal(err)
		}
		if got := defaulted["spec"].(map[string]any)["image"]; got != tt.defaulted {
			t.Errorf("default of image %s = %v, want %s", tt.image, got, tt.defaulted)
		}
		again, _ := Plugin.RunDefault(defaulted)
		if !reflect.DeepEqual(again, defaulted) {
			t.Errorf("defaulting %s again changed it: %v", tt.image, again)
		}
	}
	// A spec without an image keeps it unset: the CRD's default is the API server's to fill.
	defaulted, _ := Plugin.RunDefault(memcached("mc", nil))
	if _, set := defaulted["spec"].(map[string]any)["image"]; set {
		t.Errorf("defaulting set an image the user left out: %v", defaulted)
	}
}
