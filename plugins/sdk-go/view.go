// Spec and content hashes, and views of observed workloads with `kubectl rollout status`'s rules (a port of the Rust SDK's view.rs).
//
// A plugin sees its children as they were before the host applies its answer, so after a spec
// change it observes the old workload, fully rolled out. The SDK therefore stamps every
// workload a plugin returns (a Deployment, StatefulSet, DaemonSet, ReplicaSet or Job) with
// SpecHashAnnotation, a SHA-256 of its spec as the plugin wrote it (canonical JSON, the same
// text as the Rust SDK's): an observed workload whose annotation equals the hash desired now
// carries the desired spec, and WorkloadView.RolloutOf then applies kubectl's rules to it (for
// a Job: whether it has run to completion). Hashing the desired side only is immune to the API
// server's defaulting and covers every field; the annotation is on the workload, not its pod
// template, so it never rolls the pods.

package operatorhost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// SpecHashAnnotation is the annotation the SDK puts on every workload a plugin returns: the
// SHA-256 (hex) of its spec.
const SpecHashAnnotation = "sdk.operator-host.dev/spec-hash"

// ContentHashAnnotation is the annotation for a pod template that must change, and so roll the
// pods, when content they read but do not embed changes (a ConfigMap's data): set it to
// ContentHash of that content.
const ContentHashAnnotation = "sdk.operator-host.dev/content-hash"

// ContentHash is a stable hash of content: the SHA-256 (hex) of its CanonicalJSON, equal to
// the Rust SDK's content_hash of the same value. It panics when content does not encode as
// JSON (a NaN, a channel): a bug in the plugin.
func ContentHash(content any) string {
	text, err := CanonicalJSON(content)
	if err != nil {
		panic(fmt.Sprintf("operatorhost: the hashed content does not encode as JSON: %v", err))
	}
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// workloadKinds are the kinds whose children get SpecHashAnnotation: those that roll pods out,
// and the Job, whose run is of one spec.
var workloadKinds = []Kind{KindDeployment, KindStatefulSet, KindDaemonSet, KindReplicaSet, KindJob}

// stampSpecHash marks child with the hash of its spec when it is a workload (workloadKinds)
// with a spec, as the Rust SDK's stamp_spec_hash does.
func stampSpecHash(child map[string]any) {
	isWorkload := slices.ContainsFunc(workloadKinds, func(kind Kind) bool { return objectIsKind(child, kind) })
	spec, hasSpec := child["spec"]
	if !isWorkload || !hasSpec {
		return
	}
	hash := ContentHash(spec)
	if _, ok := child["metadata"]; !ok {
		child["metadata"] = map[string]any{}
	}
	metadata, ok := child["metadata"].(map[string]any)
	if !ok {
		return
	}
	if _, ok := metadata["annotations"]; !ok {
		metadata["annotations"] = map[string]any{}
	}
	if annotations, ok := metadata["annotations"].(map[string]any); ok {
		annotations[SpecHashAnnotation] = hash
	}
}

// WorkloadView is an observed Deployment, StatefulSet, DaemonSet or Job reduced to what a
// status needs: its replica counts, and whether the spec the plugin desires is rolled out (or,
// for a Job, has run to completion). Get one with Observed.Workload, or the rollout directly
// with Observed.RolloutOf. A field that is absent (or null, for the pointers) is its zero value.
type WorkloadView struct {
	// APIVersion is apiVersion, e.g. apps/v1.
	APIVersion string
	// Kind decides which rollout rules apply: Deployment, StatefulSet, DaemonSet or Job.
	Kind string
	// Metadata is the name, the generation and the SDK's spec hash.
	Metadata MetadataView
	// Spec is the replica count and the update strategy.
	Spec WorkloadSpecView
	// Status is the counters, revisions and conditions, and the generation they describe.
	Status WorkloadStatusView
}

// MetadataView is the metadata of an observed workload: what identifies it and the spec it carries.
type MetadataView struct {
	// Name is metadata.name.
	Name string
	// Generation is incremented by the API server on every change of the spec.
	Generation *int64
	// Annotations holds the one annotation the SDK reads.
	Annotations SpecHashView
}

// SpecHashView is the one annotation of MetadataView the SDK reads.
type SpecHashView struct {
	// SpecHash is SpecHashAnnotation.
	SpecHash *string
}

// WorkloadSpecView is the spec of an observed workload.
type WorkloadSpecView struct {
	// Replicas is the desired number of pods.
	Replicas *int32
	// UpdateStrategy is a StatefulSet's (Deployments call theirs strategy: not needed).
	UpdateStrategy UpdateStrategyView
}

// UpdateStrategyView is a StatefulSet's spec.updateStrategy.
type UpdateStrategyView struct {
	// Type is RollingUpdate (the default) or OnDelete.
	Type *string
	// RollingUpdate is there for RollingUpdate (the API server defaults it to {partition: 0}).
	RollingUpdate *RollingUpdateView
}

// RollingUpdateView is a StatefulSet's spec.updateStrategy.rollingUpdate.
type RollingUpdateView struct {
	// Partition: pods with an ordinal below it keep the old revision.
	Partition *int32
}

// WorkloadStatusView is the status of an observed workload (the fields of each kind it has).
type WorkloadStatusView struct {
	// Replicas is the number of pods the controller created.
	Replicas *int32
	// ReadyReplicas is the number of pods that are ready.
	ReadyReplicas *int32
	// UpdatedReplicas is the number of pods of the current revision.
	UpdatedReplicas *int32
	// AvailableReplicas is the number of pods ready for at least minReadySeconds.
	AvailableReplicas *int32
	// ObservedGeneration is the generation the controller has acted on.
	ObservedGeneration *int64
	// CurrentRevision is a StatefulSet's revision of the pods it has not updated yet.
	CurrentRevision *string
	// UpdateRevision is a StatefulSet's revision of its current spec.
	UpdateRevision *string
	// DesiredNumberScheduled is a DaemonSet's number of nodes that should run its pod.
	DesiredNumberScheduled *int32
	// UpdatedNumberScheduled is a DaemonSet's number of nodes running its current pod template.
	UpdatedNumberScheduled *int32
	// NumberAvailable is a DaemonSet's number of nodes whose pod is available.
	NumberAvailable *int32
	// Conditions are a Deployment's (Progressing says when its progress deadline passed), a
	// Job's (Complete, Failed).
	Conditions []WorkloadConditionView
}

// WorkloadConditionView is one of a workload's status.conditions: type, status and reason.
type WorkloadConditionView struct {
	// Type is e.g. Progressing, Available or Complete.
	Type string
	// Status is True, False or Unknown.
	Status string
	// Reason is e.g. ProgressDeadlineExceeded.
	Reason *string
}

// DecodeWorkloadView decodes object (a workload, as any value encoding/json accepts) as the
// Rust SDK's WorkloadView decodes it: missing fields are zero, other fields ignored, and a
// field of another type is an error with serde's message ("invalid type: string \"two\",
// expected i32").
func DecodeWorkloadView(object any) (*WorkloadView, error) {
	// Through JSON text, so that numbers are json.Number as the host's would be.
	text, err := CanonicalJSON(object)
	if err != nil {
		return nil, err
	}
	value, err := ParseJSON(text)
	if err != nil {
		return nil, err
	}
	return decodeWorkloadView(value)
}

// decodeWorkloadView decodes value, as ParseJSON makes it.
func decodeWorkloadView(value any) (*WorkloadView, error) {
	var view WorkloadView
	if err := view.decode(value); err != nil {
		return nil, err
	}
	return &view, nil
}

// SpecHash is the spec hash the SDK stamped on this workload when the plugin returned it.
func (w *WorkloadView) SpecHash() (string, bool) {
	if w.Metadata.Annotations.SpecHash == nil {
		return "", false
	}
	return *w.Metadata.Annotations.SpecHash, true
}

// IsCurrent reports whether this observed workload carries the spec desired holds for it (the
// child of the same kind and name): false when the plugin just changed it, until the host has
// applied it.
func (w *WorkloadView) IsCurrent(desired *Desired) bool {
	if desired == nil {
		return false
	}
	for _, child := range desired.Children {
		metadata, _ := child["metadata"].(map[string]any)
		if child["apiVersion"] != w.APIVersion || child["kind"] != w.Kind || metadata["name"] != w.Metadata.Name {
			continue
		}
		annotations, _ := metadata["annotations"].(map[string]any)
		wanted, ok := annotations[SpecHashAnnotation].(string)
		have, stamped := w.SpecHash()
		return ok && stamped && wanted == have
	}
	return false
}

// RolloutOf is the rollout of the spec desired holds for this workload: pending with reason
// SpecNotApplied while the observed workload carries another spec (see IsCurrent), else
// Rollout. A status that says "ready" only when this is complete tells the truth about the
// parent's generation.
func (w *WorkloadView) RolloutOf(desired *Desired) Rollout {
	if w.IsCurrent(desired) {
		return w.Rollout()
	}
	return pendingRollout("SpecNotApplied", fmt.Sprintf("the %s does not carry the desired spec yet", w.kindName()))
}

// Rollout is the rollout of this workload's own current spec, by kubectl rollout status's rules
// for its kind (Deployment, StatefulSet, DaemonSet), or for a Job its run: complete once its
// Complete condition holds, failed once its Failed one does. Any other kind (a ReplicaSet) has
// failed with reason UnsupportedKind. It knows nothing of what the plugin desires: see
// RolloutOf.
func (w *WorkloadView) Rollout() Rollout {
	switch w.Kind {
	case "Deployment":
		return w.deploymentRollout()
	case "StatefulSet":
		return w.statefulSetRollout()
	case "DaemonSet":
		return w.daemonSetRollout()
	case "Job":
		return w.jobRun()
	}
	return failedRollout("UnsupportedKind", "no rollout rules for kind "+DebugString(w.Kind))
}

func (w *WorkloadView) kindName() string {
	return w.Kind + " " + DebugString(w.Metadata.Name)
}

// specObserved reports whether the controller has acted on the current spec.
func (w *WorkloadView) specObserved() bool {
	observed := derefOr(w.Status.ObservedGeneration, 0)
	return observed > 0 && w.Metadata.Generation != nil && *w.Metadata.Generation <= observed
}

func (w *WorkloadView) notObserved() Rollout {
	return pendingRollout("SpecNotObserved", fmt.Sprintf("waiting for the %s controller to observe its spec", w.Kind))
}

// deploymentRollout is kubectl's DeploymentStatusViewer. The counters are int32 and wrap as
// the Rust SDK's do (plugins are built without overflow checks).
func (w *WorkloadView) deploymentRollout() Rollout {
	if !w.specObserved() {
		return w.notObserved()
	}
	status := &w.Status
	for _, condition := range status.Conditions {
		if condition.Type != "Progressing" {
			continue
		}
		if condition.Reason != nil && *condition.Reason == "ProgressDeadlineExceeded" {
			return failedRollout("ProgressDeadlineExceeded", w.kindName()+" exceeded its progress deadline")
		}
		break
	}
	updated := derefOr(status.UpdatedReplicas, 0)
	total := derefOr(status.Replicas, 0)
	available := derefOr(status.AvailableReplicas, 0)
	if wanted := w.Spec.Replicas; wanted != nil && updated < *wanted {
		return pendingRollout("RolloutInProgress", fmt.Sprintf("%d of %d new replicas have been updated", updated, *wanted))
	}
	if total > updated {
		return pendingRollout("RolloutInProgress", fmt.Sprintf("%d old replicas are pending termination", total-updated))
	}
	if available < updated {
		return pendingRollout("RolloutInProgress", fmt.Sprintf("%d of %d updated replicas are available", available, updated))
	}
	return completeRollout()
}

// daemonSetRollout is kubectl's DaemonSetStatusViewer.
func (w *WorkloadView) daemonSetRollout() Rollout {
	if !w.specObserved() {
		return w.notObserved()
	}
	status := &w.Status
	wanted := derefOr(status.DesiredNumberScheduled, 0)
	updated := derefOr(status.UpdatedNumberScheduled, 0)
	available := derefOr(status.NumberAvailable, 0)
	if updated < wanted {
		return pendingRollout("RolloutInProgress", fmt.Sprintf("%d of %d new pods have been updated", updated, wanted))
	}
	if available < wanted {
		return pendingRollout("RolloutInProgress", fmt.Sprintf("%d of %d updated pods are available", available, wanted))
	}
	return completeRollout()
}

// jobRun is a Job's run (a Job has no observed generation: its spec cannot change once
// created): complete once its Complete condition is True, failed once its Failed one is.
func (w *WorkloadView) jobRun() Rollout {
	holds := func(conditionType string) *WorkloadConditionView {
		for i := range w.Status.Conditions {
			if c := &w.Status.Conditions[i]; c.Type == conditionType && c.Status == "True" {
				return c
			}
		}
		return nil
	}
	if holds("Complete") != nil {
		return completeRollout()
	}
	if failed := holds("Failed"); failed != nil {
		return failedRollout("JobFailed", fmt.Sprintf("%s failed (%s)", w.kindName(), derefOr(failed.Reason, "no reason given")))
	}
	return pendingRollout("JobRunning", fmt.Sprintf("waiting for %s to complete", w.kindName()))
}

// statefulSetRollout is kubectl's StatefulSetStatusViewer, with a missing partition read as 0
// (the API server's default) and OnDelete (where kubectl has no rule) as an unpartitioned
// rolling update: every pod updated and ready.
func (w *WorkloadView) statefulSetRollout() Rollout {
	if !w.specObserved() {
		return w.notObserved()
	}
	status := &w.Status
	ready := derefOr(status.ReadyReplicas, 0)
	updated := derefOr(status.UpdatedReplicas, 0)
	wanted := w.Spec.Replicas
	if wanted != nil && ready < *wanted {
		return pendingRollout("RolloutInProgress", fmt.Sprintf("waiting for %d pods to be ready", *wanted-ready))
	}
	strategy := &w.Spec.UpdateStrategy
	var partition *int32
	switch {
	case strategy.Type != nil && *strategy.Type == "OnDelete":
		partition = new(int32)
	case strategy.RollingUpdate != nil:
		partition = new(derefOr(strategy.RollingUpdate.Partition, 0))
	}
	if partition != nil {
		if wanted != nil && updated < *wanted-*partition {
			return pendingRollout("RolloutInProgress", fmt.Sprintf("%d of %d new pods have been updated", updated, *wanted-*partition))
		}
		return completeRollout()
	}
	if !sameOption(status.UpdateRevision, status.CurrentRevision) {
		return pendingRollout("RolloutInProgress", fmt.Sprintf(
			"waiting for the rolling update to revision %s (%d pods updated)", derefOr(status.UpdateRevision, ""), updated))
	}
	return completeRollout()
}

// derefOr is *p, or otherwise when p is nil.
func derefOr[T any](p *T, otherwise T) T {
	if p == nil {
		return otherwise
	}
	return *p
}

// sameOption reports whether a and b are both nil or point to equal values, as Rust
// compares two Options.
func sameOption[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// RolloutState is where a rollout stands.
type RolloutState int

const (
	// RolloutPending: not yet; the reason and message say what is awaited.
	RolloutPending RolloutState = iota
	// RolloutComplete: every pod runs the workload's current spec and is ready (available,
	// for Deployments), or the Job has completed.
	RolloutComplete
	// RolloutFailed: it will not complete by itself (the Deployment's progress deadline
	// passed, the Job failed, or the kind has no rollout rules).
	RolloutFailed
)

// String is the state's name: Pending, Complete or Failed.
func (s RolloutState) String() string {
	switch s {
	case RolloutPending:
		return "Pending"
	case RolloutComplete:
		return "Complete"
	case RolloutFailed:
		return "Failed"
	}
	return "RolloutState(" + strconv.Itoa(int(s)) + ")"
}

// Rollout is where the rollout of a workload (or the run of a Job) stands, by kubectl rollout
// status's rules.
type Rollout struct {
	state   RolloutState
	reason  string
	message string
}

func completeRollout() Rollout {
	return Rollout{RolloutComplete, "RolloutComplete", "rolled out"}
}

func pendingRollout(reason, message string) Rollout {
	return Rollout{RolloutPending, reason, message}
}

func failedRollout(reason, message string) Rollout {
	return Rollout{RolloutFailed, reason, message}
}

// State is whether the rollout is complete, pending or failed.
func (r Rollout) State() RolloutState { return r.state }

// IsComplete reports whether every pod runs the workload's current spec and is ready
// (available, for Deployments), or the Job has completed.
func (r Rollout) IsComplete() bool { return r.state == RolloutComplete }

// Reason is CamelCase, for a condition: RolloutComplete, or why it is pending (NotCreated,
// SpecNotApplied, SpecNotObserved, RolloutInProgress, JobRunning) or failed
// (ProgressDeadlineExceeded, JobFailed, UnsupportedKind).
func (r Rollout) Reason() string { return r.reason }

// Message is what is awaited, or why it failed; "rolled out" when complete.
func (r Rollout) Message() string { return r.message }

// Condition is the condition conditionType (Available, MigrationComplete, ...) of this
// rollout, of the parent's observedGeneration (nil to leave it out): True when complete, with
// the rollout's reason and message.
func (r Rollout) Condition(conditionType string, observedGeneration *int64) Condition {
	return NewCondition(conditionType, r.IsComplete(), r.reason, r.message, observedGeneration)
}

// Decoding: what serde's derived Deserialize does with the Rust SDK's views, over the values
// ParseJSON makes. Every view struct is #[serde(default)]: missing fields keep their zero
// value, unknown ones are ignored, and a value of the wrong type is an error with serde_json's
// message for it (without a path: serde's has none for a whole value).

// viewMember is one field of a view struct: its JSON key and how it decodes into the view.
type viewMember struct {
	key    string
	decode func(value any) error
}

// decodeViewStruct decodes value into a view struct named name, whose fields are members in their
// Rust order: from an object (serde_json's maps are sorted, so the first bad field in key order
// is reported) or, as serde allows, from an array of the fields' values in that order.
func decodeViewStruct(value any, name string, members []viewMember) error {
	switch v := value.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for key := range v {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			i := slices.IndexFunc(members, func(m viewMember) bool { return m.key == key })
			if i < 0 {
				continue
			}
			if err := members[i].decode(v[key]); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for i, item := range v[:min(len(v), len(members))] {
			if err := members[i].decode(item); err != nil {
				return err
			}
		}
		if len(v) > len(members) {
			return fmt.Errorf("invalid length %d, expected fewer elements in array", len(v))
		}
		return nil
	}
	return viewTypeError(value, "struct "+name)
}

// viewTypeError is serde's error for value where expecting was wanted.
func viewTypeError(value any, expecting string) error {
	return errors.New(serdeInvalidType(value, expecting))
}

// decodeViewString decodes a &str: a string and nothing else.
func decodeViewString(value any) (string, error) {
	s, ok := value.(string)
	if !ok {
		return "", viewTypeError(value, "a borrowed string")
	}
	return s, nil
}

// decodeViewInteger decodes an integer of bits bits (32 or 64), named expecting (i32, i64).
func decodeViewInteger(value any, bits int, expecting string) (int64, error) {
	n, ok := value.(json.Number)
	integer, isInteger := serdeInteger(n)
	if !ok || !isInteger {
		return 0, viewTypeError(value, expecting)
	}
	i, err := strconv.ParseInt(integer, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("invalid value: integer `%s`, expected %s", integer, expecting)
	}
	return i, nil
}

// viewStringInto decodes a &str into target.
func viewStringInto(target *string) func(any) error {
	return func(value any) (err error) {
		*target, err = decodeViewString(value)
		return err
	}
}

// viewOptionalStringInto decodes an Option<&str> into target: nil for null.
func viewOptionalStringInto(target **string) func(any) error {
	return func(value any) error {
		if value == nil {
			*target = nil
			return nil
		}
		s, err := decodeViewString(value)
		*target = &s
		return err
	}
}

// viewOptionalI32Into decodes an Option<i32> into target: nil for null.
func viewOptionalI32Into(target **int32) func(any) error {
	return func(value any) error {
		if value == nil {
			*target = nil
			return nil
		}
		i, err := decodeViewInteger(value, 32, "i32")
		*target = new(int32(i))
		return err
	}
}

// viewOptionalI64Into decodes an Option<i64> into target: nil for null.
func viewOptionalI64Into(target **int64) func(any) error {
	return func(value any) error {
		if value == nil {
			*target = nil
			return nil
		}
		i, err := decodeViewInteger(value, 64, "i64")
		*target = &i
		return err
	}
}

func (w *WorkloadView) decode(value any) error {
	return decodeViewStruct(value, "WorkloadView", []viewMember{
		{"apiVersion", viewStringInto(&w.APIVersion)},
		{"kind", viewStringInto(&w.Kind)},
		{"metadata", w.Metadata.decode},
		{"spec", w.Spec.decode},
		{"status", w.Status.decode},
	})
}

func (m *MetadataView) decode(value any) error {
	return decodeViewStruct(value, "MetadataView", []viewMember{
		{"name", viewStringInto(&m.Name)},
		{"generation", viewOptionalI64Into(&m.Generation)},
		{"annotations", m.Annotations.decode},
	})
}

func (s *SpecHashView) decode(value any) error {
	return decodeViewStruct(value, "SpecHashView", []viewMember{
		{SpecHashAnnotation, viewOptionalStringInto(&s.SpecHash)},
	})
}

func (s *WorkloadSpecView) decode(value any) error {
	return decodeViewStruct(value, "WorkloadSpecView", []viewMember{
		{"replicas", viewOptionalI32Into(&s.Replicas)},
		{"updateStrategy", s.UpdateStrategy.decode},
	})
}

func (u *UpdateStrategyView) decode(value any) error {
	return decodeViewStruct(value, "UpdateStrategyView", []viewMember{
		{"type", viewOptionalStringInto(&u.Type)},
		{"rollingUpdate", func(value any) error {
			if value == nil {
				u.RollingUpdate = nil
				return nil
			}
			u.RollingUpdate = &RollingUpdateView{}
			return u.RollingUpdate.decode(value)
		}},
	})
}

func (r *RollingUpdateView) decode(value any) error {
	return decodeViewStruct(value, "RollingUpdateView", []viewMember{
		{"partition", viewOptionalI32Into(&r.Partition)},
	})
}

func (s *WorkloadStatusView) decode(value any) error {
	return decodeViewStruct(value, "WorkloadStatusView", []viewMember{
		{"replicas", viewOptionalI32Into(&s.Replicas)},
		{"readyReplicas", viewOptionalI32Into(&s.ReadyReplicas)},
		{"updatedReplicas", viewOptionalI32Into(&s.UpdatedReplicas)},
		{"availableReplicas", viewOptionalI32Into(&s.AvailableReplicas)},
		{"observedGeneration", viewOptionalI64Into(&s.ObservedGeneration)},
		{"currentRevision", viewOptionalStringInto(&s.CurrentRevision)},
		{"updateRevision", viewOptionalStringInto(&s.UpdateRevision)},
		{"desiredNumberScheduled", viewOptionalI32Into(&s.DesiredNumberScheduled)},
		{"updatedNumberScheduled", viewOptionalI32Into(&s.UpdatedNumberScheduled)},
		{"numberAvailable", viewOptionalI32Into(&s.NumberAvailable)},
		{"conditions", func(value any) error {
			items, ok := value.([]any)
			if !ok {
				return viewTypeError(value, "a sequence")
			}
			s.Conditions = make([]WorkloadConditionView, len(items))
			for i, item := range items {
				if err := s.Conditions[i].decode(item); err != nil {
					return err
				}
			}
			return nil
		}},
	})
}

func (c *WorkloadConditionView) decode(value any) error {
	return decodeViewStruct(value, "WorkloadConditionView", []viewMember{
		{"type", viewStringInto(&c.Type)},
		{"status", viewStringInto(&c.Status)},
		{"reason", viewOptionalStringInto(&c.Reason)},
	})
}
