// How the host applies, prunes and waits for a child (ChildOptions), and the other objects a
// plugin reads (Related): contract 0.2.0's additions on the author's side.

package operatorhost

import "fmt"

// UpdateStrategy is how the host brings an existing child to what the plugin returned.
type UpdateStrategy uint8

// The update strategies, in the contract's order.
const (
	// UpdateInPlace is server-side apply in place (the default). A change the API server
	// refuses as immutable is reported on the parent and not retried until the child changes.
	UpdateInPlace UpdateStrategy = iota
	// UpdateRecreate is in place, but the child is deleted and created again when the API
	// server refuses the change as immutable (a Job's template, say).
	UpdateRecreate
	// UpdateCreateOnly creates the child when absent and never updates it afterwards.
	UpdateCreateOnly
)

// DeletePolicy is what the host does with a child the plugin no longer returns.
type DeletePolicy uint8

// The delete policies, in the contract's order.
const (
	// PruneDelete deletes it (the default).
	PruneDelete DeletePolicy = iota
	// PruneOrphan keeps it, without the host's owner reference and labels.
	PruneOrphan
)

// Readiness is when a child counts as ready, for a barrier: its condition Condition is True
// when Condition is set, otherwise the field at Path equals Value (JSON text). Made by
// ChildOptions.ReadyWhenCondition and ChildOptions.ReadyWhenField.
type Readiness struct {
	Condition string
	Path      string
	Value     string
}

// ChildOptions is how the host handles one child (Desired.ChildWith). The zero value is the
// default: apply in place, delete on prune, no barrier.
type ChildOptions struct {
	Update  UpdateStrategy
	OnPrune DeletePolicy
	// ReadyWhen, when set, is a barrier: the children added after this one are applied only
	// once the host has seen it ready.
	ReadyWhen *Readiness
}

// Recreate is o with the child deleted and created again when the API server refuses an
// update as immutable.
func (o ChildOptions) Recreate() ChildOptions {
	o.Update = UpdateRecreate
	return o
}

// CreateOnly is o with the child created when absent and never updated.
func (o ChildOptions) CreateOnly() ChildOptions {
	o.Update = UpdateCreateOnly
	return o
}

// OrphanOnPrune is o with the child kept (without the host's owner reference and labels)
// once the plugin no longer returns it.
func (o ChildOptions) OrphanOnPrune() ChildOptions {
	o.OnPrune = PruneOrphan
	return o
}

// ReadyWhenCondition is o with a barrier: the children after this one wait until its
// status.conditions has conditionType with status True (a Job's Complete).
func (o ChildOptions) ReadyWhenCondition(conditionType string) ChildOptions {
	o.ReadyWhen = &Readiness{Condition: conditionType}
	return o
}

// ReadyWhenField is o with a barrier: the children after this one wait until the field at
// path (dotted, e.g. status.readyReplicas) equals value. It panics when value does not encode
// as JSON, as Desired.Child does: that is a bug in the plugin.
func (o ChildOptions) ReadyWhenField(path string, value any) ChildOptions {
	text, err := CanonicalJSON(value)
	if err != nil {
		panic(fmt.Sprintf("operatorhost: the readiness value of %s does not encode as JSON: %v", path, err))
	}
	o.ReadyWhen = &Readiness{Path: path, Value: text}
	return o
}

// SelectorType is how the objects of a related kind are chosen for a parent.
type SelectorType uint8

// The selector types, in the contract's order.
const (
	// SelectNameFromPath chooses the object named by the string at a dotted path of the parent.
	SelectNameFromPath SelectorType = iota
	// SelectByLabels chooses every object matching a label selector.
	SelectByLabels
)

// RelatedSelector chooses a related kind's objects for a parent, in the parent's namespace:
// Value is the dotted path (SelectNameFromPath) or the label selector (SelectByLabels).
type RelatedSelector struct {
	Type  SelectorType
	Value string
}

// SecretView is what of a related Secret's data the plugin sees.
type SecretView uint8

const (
	// SecretDataHash replaces each value of data by the hex SHA-256 of its bytes (the
	// default): enough to see a key exists or to roll pods when it changes.
	SecretDataHash SecretView = iota
	// SecretFull is the Secret as stored; the host's policy must allow it.
	SecretFull
)

// Related is another kind of object a plugin reads (Plugin.Related), read with
// Observed.Related: the host watches these objects and reconciles the parents that refer to
// one when it changes.
type Related struct {
	// Name is the key the objects come under (a DNS-1123 label, unique within the plugin).
	Name       string
	Kind       Kind
	Selector   RelatedSelector
	SecretView SecretView
}

// RelatedByNameAt is the object of kind named by the string at path in the parent
// (spec.configMapName), under name.
func RelatedByNameAt(name string, kind Kind, path string) Related {
	return Related{Name: name, Kind: kind, Selector: RelatedSelector{Type: SelectNameFromPath, Value: path}}
}

// RelatedByLabels is every object of kind matching the label selector, under name.
func RelatedByLabels(name string, kind Kind, selector string) Related {
	return Related{Name: name, Kind: kind, Selector: RelatedSelector{Type: SelectByLabels, Value: selector}}
}

// WithSecretData is r seeing a Secret's data in clear (the host's policy must allow it; the
// default is a hash of each value).
func (r Related) WithSecretData() Related {
	r.SecretView = SecretFull
	return r
}
