// Kinds, the children and related objects the host observed, and the children (with how to
// apply each) and status a plugin desires.

package operatorhost

import (
	"encoding/json"
	"fmt"
)

// Kind is a Kubernetes kind a plugin reconciles or creates.
type Kind struct {
	// Group is the API group; empty for the core group.
	Group string
	// Version is the API version within the group.
	Version string
	// Kind is the kind's name, e.g. Deployment.
	Kind string
	// Plural is the resource's plural name, e.g. deployments.
	Plural string
	// Namespaced says whether objects of this kind live in a namespace.
	Namespaced bool
}

// APIVersion is apiVersion as objects of the kind carry it: group/version, or the version
// alone for the core group.
func (k Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// The kinds plugins create most, as k8s-openapi describes them.
var (
	KindConfigMap               = Kind{"", "v1", "ConfigMap", "configmaps", true}
	KindPersistentVolumeClaim   = Kind{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true}
	KindPod                     = Kind{"", "v1", "Pod", "pods", true}
	KindSecret                  = Kind{"", "v1", "Secret", "secrets", true}
	KindService                 = Kind{"", "v1", "Service", "services", true}
	KindServiceAccount          = Kind{"", "v1", "ServiceAccount", "serviceaccounts", true}
	KindDaemonSet               = Kind{"apps", "v1", "DaemonSet", "daemonsets", true}
	KindDeployment              = Kind{"apps", "v1", "Deployment", "deployments", true}
	KindReplicaSet              = Kind{"apps", "v1", "ReplicaSet", "replicasets", true}
	KindStatefulSet             = Kind{"apps", "v1", "StatefulSet", "statefulsets", true}
	KindHorizontalPodAutoscaler = Kind{"autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true}
	KindCronJob                 = Kind{"batch", "v1", "CronJob", "cronjobs", true}
	KindJob                     = Kind{"batch", "v1", "Job", "jobs", true}
	KindIngress                 = Kind{"networking.k8s.io", "v1", "Ingress", "ingresses", true}
	KindNetworkPolicy           = Kind{"networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true}
	KindPodDisruptionBudget     = Kind{"policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true}
	KindRole                    = Kind{"rbac.authorization.k8s.io", "v1", "Role", "roles", true}
	KindRoleBinding             = Kind{"rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true}
)

// ChildMeta is the metadata of a child: its name, and its labels when there are any. The host
// adds the namespace, the owner reference and its ownership labels; a plugin that sets them
// itself is rejected, so children stay independent of who owns them.
func ChildMeta(name string, labels map[string]string) map[string]any {
	meta := map[string]any{"name": name}
	if len(labels) > 0 {
		copied := make(map[string]any, len(labels))
		for key, value := range labels {
			copied[key] = value
		}
		meta["labels"] = copied
	}
	return meta
}

// objectIsKind reports whether object (a JSON value) is of kind: its apiVersion and kind say so.
func objectIsKind(object map[string]any, kind Kind) bool {
	apiVersion, ok := object["apiVersion"].(string)
	name, isString := object["kind"].(string)
	return ok && isString && apiVersion == kind.APIVersion() && name == kind.Kind
}

// objectName is object's metadata.name, if it is a string.
func objectName(object map[string]any) (string, bool) {
	metadata, _ := object["metadata"].(map[string]any)
	name, ok := metadata["name"].(string)
	return name, ok
}

// findObject is the object of kind named name among objects, or nil.
func findObject[T any](objects []T, kind Kind, name string) map[string]any {
	for _, item := range objects {
		object, ok := any(item).(map[string]any)
		if !ok || !objectIsKind(object, kind) {
			continue
		}
		if found, ok := objectName(object); ok && found == name {
			return object
		}
	}
	return nil
}

// Observed is the children the host observed for one parent, as read from the API server,
// and the related objects the plugin declared (Plugin.Related).
type Observed struct {
	objects []any
	related map[string][]any
}

// NewObserved is the observed children from the JSON texts of a request. A text that is not
// JSON is a *Retry: the host sent it, so it is a transient problem, not the plugin's.
func NewObserved(objects []string) (*Observed, error) {
	observed := &Observed{objects: make([]any, 0, len(objects))}
	for index, text := range objects {
		object, err := ParseJSON(text)
		if err != nil {
			return nil, &Retry{Message: fmt.Sprintf("observed child #%d is not valid JSON: %v", index, err)}
		}
		observed.objects = append(observed.objects, object)
	}
	return observed, nil
}

// WithRelated is o with objects as the related objects declared as name (for a plugin's own
// tests; the host's come with the request). The objects go through JSON as the host's would.
// It panics when an object does not encode as JSON.
func (o *Observed) WithRelated(name string, objects ...any) *Observed {
	if o.related == nil {
		o.related = map[string][]any{}
	}
	copied := make([]any, len(objects))
	for i, object := range objects {
		copied[i] = jsonCopy(object, "related object "+DebugString(name))
	}
	o.related[name] = copied
	return o
}

// addRelated adds the related objects declared as name from the JSON texts of a request; a
// text that is not JSON is a *Retry, as an observed child's is.
func (o *Observed) addRelated(name string, texts []string) error {
	if o.related == nil {
		o.related = map[string][]any{}
	}
	objects := make([]any, 0, len(texts))
	for index, text := range texts {
		object, err := ParseJSON(text)
		if err != nil {
			return &Retry{Message: fmt.Sprintf("related %s #%d is not valid JSON: %v", name, index, err)}
		}
		objects = append(objects, object)
	}
	o.related[name] = objects
	return nil
}

// Related is the related objects declared as name (Plugin.Related), as JSON, in the order the
// host sent them: empty when none matches, and for a name that was not declared.
func (o *Observed) Related(name string) []map[string]any {
	var related []map[string]any
	if o == nil {
		return related
	}
	for _, item := range o.related[name] {
		if object, ok := item.(map[string]any); ok {
			related = append(related, object)
		}
	}
	return related
}

// RelatedAs is the related objects declared as name, each decoded as T with encoding/json (a
// type with the fields the plugin reads). One that does not decode is a *Retry naming it.
func RelatedAs[T any](o *Observed, name string) ([]T, error) {
	objects := o.Related(name)
	decoded := make([]T, 0, len(objects))
	for index, object := range objects {
		var value T
		text, err := json.Marshal(object)
		if err == nil {
			err = json.Unmarshal(text, &value)
		}
		if err != nil {
			return nil, &Retry{Message: fmt.Sprintf("related %s #%d does not decode: %v", name, index, err)}
		}
		decoded = append(decoded, value)
	}
	return decoded, nil
}

// Get is the observed child of kind named name, as JSON (numbers are json.Number), or nil.
func (o *Observed) Get(kind Kind, name string) map[string]any {
	if o == nil {
		return nil
	}
	return findObject(o.objects, kind, name)
}

// All is every observed child of kind, in the order the host sent them.
func (o *Observed) All(kind Kind) []map[string]any {
	var all []map[string]any
	if o == nil {
		return all
	}
	for _, item := range o.objects {
		if object, ok := item.(map[string]any); ok && objectIsKind(object, kind) {
			all = append(all, object)
		}
	}
	return all
}

// Len is the number of observed children of any kind.
func (o *Observed) Len() int {
	if o == nil {
		return 0
	}
	return len(o.objects)
}

// Workload is the observed workload (a Deployment, StatefulSet, DaemonSet or Job) of kind named
// name, reduced to what its rollout status needs, or nil when there is none. One that is there
// but does not decode (a field of another type) is a *Retry, with serde's message as the Rust
// SDK's says it.
func (o *Observed) Workload(kind Kind, name string) (*WorkloadView, error) {
	object := o.Get(kind, name)
	if object == nil {
		return nil, nil
	}
	view, err := decodeWorkloadView(object)
	if err != nil {
		return nil, &Retry{Message: fmt.Sprintf("observed %s %s does not decode: %v", kind.Kind, DebugString(name), err)}
	}
	return view, nil
}

// RolloutOf is where the rollout (or, for a Job, the run) of the spec desired holds for the
// workload of kind named name stands: WorkloadView.RolloutOf of the observed one, or pending
// (reason NotCreated) while there is none. An observed one that does not decode is a *Retry,
// as Workload says.
func (o *Observed) RolloutOf(kind Kind, name string, desired *Desired) (Rollout, error) {
	workload, err := o.Workload(kind, name)
	if err != nil {
		return Rollout{}, err
	}
	if workload == nil {
		return pendingRollout("NotCreated", fmt.Sprintf("the %s %s is not created yet", kind.Kind, DebugString(name))), nil
	}
	return workload.RolloutOf(desired), nil
}

// Desired is what Reconcile returns: the children that should exist, the parent's status, and
// when to be called again. Its zero value is ready to use (no children; a nil Status is
// answered as an empty object).
type Desired struct {
	// Children are the desired children as JSON objects, with apiVersion and kind.
	Children []map[string]any
	// Options are how the host handles each child, by index in Children; a child without an
	// entry gets the zero ChildOptions.
	Options []ChildOptions
	// Status is the parent's status, as JSON.
	Status any
	// RequeueAfterMs asks to be called again after this many milliseconds even if nothing
	// changes; nil for never.
	RequeueAfterMs *uint64
}

// Child adds object as a child of kind, setting its apiVersion and kind when it has none, and
// returns d for chaining. The child is a copy through canonical JSON, so later changes to
// object do not change it, and numbers are json.Number as the host would read them.
//
// A workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job) gets the annotation
// SpecHashAnnotation, the hash of its spec, so that its observed copy tells whether it carries
// this spec yet (WorkloadView.RolloutOf).
//
// Child panics when object does not encode as JSON (a NaN, a channel) or its apiVersion or kind
// is not a string: those are bugs in the plugin, which the host reports as such.
func (d *Desired) Child(kind Kind, object map[string]any) *Desired {
	return d.ChildWith(kind, object, ChildOptions{})
}

// ChildWith adds object as a child of kind, as Child does, that the host applies, prunes or
// waits for as options say: an update strategy, a delete policy, a readiness barrier for the
// children added after it.
func (d *Desired) ChildWith(kind Kind, object map[string]any, options ChildOptions) *Desired {
	child := jsonCopy(object, "a "+kind.Kind+" child")
	value, ok := child.(map[string]any)
	if !ok {
		value = map[string]any{}
	}
	if value["apiVersion"] == nil {
		value["apiVersion"] = kind.APIVersion()
	}
	if value["kind"] == nil {
		value["kind"] = kind.Kind
	}
	_, apiVersionOK := value["apiVersion"].(string)
	_, kindOK := value["kind"].(string)
	if !apiVersionOK || !kindOK {
		panic(fmt.Sprintf("operatorhost: a %s child needs apiVersion and kind as strings", kind.Kind))
	}
	stampSpecHash(value)
	// Children appended to Children directly have no entry: pad with the default.
	for len(d.Options) < len(d.Children) {
		d.Options = append(d.Options, ChildOptions{})
	}
	d.Children = append(d.Children, value)
	d.Options = append(d.Options, options)
	return d
}

// RunOnce adds job (a Job's metadata and spec; its apiVersion and kind are implied) as a step
// the children added after it wait for, run once for each distinct inputs (whatever its run
// depends on: the image, the schema version, a config's data), and returns d for chaining.
// ContentHash(inputs) goes on the pod template under ContentHashAnnotation, so new inputs make
// a new template, and the host recreates the Job (its template is immutable) instead of
// reporting ImmutableField; the same inputs leave the completed Job as it is. The options are
// ChildOptions{}.Recreate().ReadyWhenCondition("Complete"): the barrier is its Complete
// condition. Observed.RolloutOf(KindJob, name, d) says whether the run of these inputs
// completed (an old Job's completion is SpecNotApplied). job itself is not changed.
//
// RunOnce panics, as Child does, when job or inputs do not encode as JSON, when job names
// another kind, or when its spec, spec.template, the template's metadata or its annotations
// is there but not an object (null counts as absent): those are bugs in the plugin.
func (d *Desired) RunOnce(job map[string]any, inputs any) *Desired {
	hash := ContentHash(inputs)
	value, ok := jsonCopy(job, "a Job child").(map[string]any)
	if !ok {
		value = map[string]any{}
	}
	for _, field := range [][2]string{{"apiVersion", KindJob.APIVersion()}, {"kind", KindJob.Kind}} {
		if have := value[field[0]]; have != nil && have != field[1] {
			panic(fmt.Sprintf("operatorhost: RunOnce takes a Job, not an object of %s %v", field[0], have))
		}
	}
	object, path := value, ""
	for _, key := range []string{"spec", "template", "metadata", "annotations"} {
		path += "." + key
		switch next := object[key].(type) {
		case map[string]any:
			object = next
		case nil:
			created := map[string]any{}
			object[key] = created
			object = created
		default:
			panic(fmt.Sprintf("operatorhost: RunOnce needs the Job's %s to be an object, not %v", path[1:], next))
		}
	}
	object[ContentHashAnnotation] = hash
	return d.ChildWith(KindJob, value, ChildOptions{}.Recreate().ReadyWhenCondition("Complete"))
}

// OptionsOf is the options of the desired child of kind named name, and whether it is desired.
func (d *Desired) OptionsOf(kind Kind, name string) (ChildOptions, bool) {
	if d == nil {
		return ChildOptions{}, false
	}
	for index, object := range d.Children {
		if !objectIsKind(object, kind) {
			continue
		}
		if found, ok := objectName(object); ok && found == name {
			return d.optionsAt(index), true
		}
	}
	return ChildOptions{}, false
}

// optionsAt is the options of the child at index, the default when it has no entry.
func (d *Desired) optionsAt(index int) ChildOptions {
	if index < len(d.Options) {
		return d.Options[index]
	}
	return ChildOptions{}
}

// SetStatus sets the parent's status (any value encoding/json accepts, normally the parent's
// status type) and returns d for chaining. It panics when status does not encode as JSON.
func (d *Desired) SetStatus(status any) *Desired {
	d.Status = jsonCopy(status, "the status")
	return d
}

// RequeueAfter asks to be called again after ms milliseconds even if nothing changes, and
// returns d for chaining.
func (d *Desired) RequeueAfter(ms uint64) *Desired {
	d.RequeueAfterMs = &ms
	return d
}

// Get is the desired child of kind named name, or nil: handy in unit tests.
func (d *Desired) Get(kind Kind, name string) map[string]any {
	if d == nil {
		return nil
	}
	return findObject(d.Children, kind, name)
}

// jsonCopy is value as JSON holds it (what the host will read), or a panic naming what.
func jsonCopy(value any, what string) any {
	text, err := CanonicalJSON(value)
	if err != nil {
		panic(fmt.Sprintf("operatorhost: %s does not encode as JSON: %v", what, err))
	}
	copied, err := ParseJSON(text)
	if err != nil {
		panic(fmt.Sprintf("operatorhost: %s does not read back as JSON: %v", what, err))
	}
	return copied
}
