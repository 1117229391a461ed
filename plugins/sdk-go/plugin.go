// The plugin declared once (its parent kind, typed spec and status, child kinds, handlers) and
// the contract's three calls made from it.

package operatorhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// ParentKind is the kind a plugin reconciles: its names and how `kubectl get` shows it. The
// CRD is made from it and the Spec and Status types, so it always matches the code.
type ParentKind struct {
	Group, Version, Kind string
	// Plural defaults to the kind in lower case with an "s".
	Plural string
	// Singular defaults to the kind in lower case.
	Singular       string
	ShortNames     []string
	Categories     []string
	Cluster        bool // cluster-scoped; namespaced when false
	PrinterColumns []PrinterColumn
}

// PrinterColumn is a column of `kubectl get` (additionalPrinterColumns).
type PrinterColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // integer, number, string, boolean or date
	JSONPath    string `json:"jsonPath"`
	Priority    int    `json:"priority,omitempty"`
	Description string `json:"description,omitempty"`
}

func (k ParentKind) plural() string {
	if k.Plural != "" {
		return k.Plural
	}
	return strings.ToLower(k.Kind) + "s"
}

// AsKind is the parent kind as a Kind.
func (k ParentKind) AsKind() Kind {
	return Kind{Group: k.Group, Version: k.Version, Kind: k.Kind, Plural: k.plural(), Namespaced: !k.Cluster}
}

// ObjectMeta is the parent's metadata, as far as a plugin reads it.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	Generation        *int64            `json:"generation,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	DeletionTimestamp string            `json:"deletionTimestamp,omitempty"`
}

// Parent is the parent custom resource: its metadata, its spec decoded as Spec, and its
// previous status decoded as Status (nil when it has none, or when it no longer decodes).
type Parent[Spec, Status any] struct {
	Metadata ObjectMeta
	Spec     Spec
	Status   *Status
	// Raw is the whole object as the host sent it.
	Raw map[string]any
}

// Finalized is what Finalize returns: done, or call again after RequeueAfterMs.
type Finalized struct {
	Done           bool
	RequeueAfterMs uint64
}

// Plugin is an operator declared once.
type Plugin[Spec, Status any] struct {
	// Name is a DNS-1123 label, unique among a host's plugins; Version a semantic version.
	Name, Version string
	Parent        ParentKind
	// Children are every kind Reconcile may return.
	Children []Kind
	// Reconcile gives the children that should exist and the status. An *InvalidSpec is not
	// retried until the parent changes; any other error is retried with backoff.
	Reconcile func(parent *Parent[Spec, Status], observed *Observed) (*Desired, error)
	// Finalize, when set, is called before a parent is deleted (the host then puts a
	// finalizer on every parent).
	Finalize func(parent *Parent[Spec, Status], observed *Observed) (Finalized, error)
}

// GroupVersionKind is a kind as the contract declares it.
type GroupVersionKind struct {
	Group, Version, Kind, Plural string
	Namespaced                   bool
}

// PluginInfo is the contract's plugin-info.
type PluginInfo struct {
	Name, Version string
	Parent        GroupVersionKind
	Children      []GroupVersionKind
	NeedsFinalize bool
	// CRD is the CustomResourceDefinition as JSON.
	CRD string
}

// Response is the contract's reconcile-response.
type Response struct {
	Children       []string
	Status         string
	RequeueAfterMs *uint64
}

// handler is a registered plugin with its types erased: what the contract's exports call.
type handler interface {
	info() (PluginInfo, error)
	reconcile(parent string, observed []string) (Response, error)
	finalize(parent string, observed []string) (Finalized, error)
}

var registered handler

// Register makes p the plugin this module serves; call it once, from an init function (a
// component runs its package initialisers, not main).
func Register[Spec, Status any](p *Plugin[Spec, Status]) {
	if registered != nil {
		panic("operatorhost.Register called twice: a module serves one plugin")
	}
	if p.Reconcile == nil {
		panic("operatorhost.Register: the plugin needs a Reconcile function")
	}
	registered = p
}

func gvk(k Kind) GroupVersionKind {
	return GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind, Plural: k.Plural, Namespaced: k.Namespaced}
}

func (p *Plugin[Spec, Status]) info() (PluginInfo, error) {
	crd, err := p.CRD()
	if err != nil {
		return PluginInfo{}, err
	}
	text, err := CanonicalJSON(crd)
	if err != nil {
		return PluginInfo{}, err
	}
	info := PluginInfo{
		Name:          p.Name,
		Version:       p.Version,
		Parent:        gvk(p.Parent.AsKind()),
		NeedsFinalize: p.Finalize != nil,
		CRD:           text,
	}
	for _, child := range p.Children {
		info.Children = append(info.Children, gvk(child))
	}
	return info, nil
}

// hasStatus: a Status type other than struct{} gives the CRD a status subresource.
func (p *Plugin[Spec, Status]) hasStatus() bool {
	t := reflect.TypeFor[Status]()
	return !(t.Kind() == reflect.Struct && t.NumField() == 0)
}

// CRD is the CustomResourceDefinition (apiextensions.k8s.io/v1) of the parent kind, as the
// Rust SDK's kube derive writes it.
func (p *Plugin[Spec, Status]) CRD() (map[string]any, error) {
	k := p.Parent
	spec, err := SchemaOf(reflect.TypeFor[Spec]())
	if err != nil {
		return nil, fmt.Errorf("the spec of %s: %w", k.Kind, err)
	}
	properties := map[string]any{"spec": spec}
	subresources := map[string]any{}
	if p.hasStatus() {
		status, err := SchemaOf(reflect.TypeFor[Status]())
		if err != nil {
			return nil, fmt.Errorf("the status of %s: %w", k.Kind, err)
		}
		status["nullable"] = true
		properties["status"] = status
		subresources["status"] = map[string]any{}
	}
	columns := []any{}
	for _, column := range p.PrinterColumnsJSON() {
		columns = append(columns, column)
	}
	singular := k.Singular
	if singular == "" {
		singular = strings.ToLower(k.Kind)
	}
	names := map[string]any{"kind": k.Kind, "plural": k.plural(), "singular": singular}
	if len(k.ShortNames) > 0 {
		names["shortNames"] = k.ShortNames
	}
	if len(k.Categories) > 0 {
		names["categories"] = k.Categories
	}
	scope := "Namespaced"
	if k.Cluster {
		scope = "Cluster"
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": k.plural() + "." + k.Group},
		"spec": map[string]any{
			"group": k.Group,
			"names": names,
			"scope": scope,
			"versions": []any{map[string]any{
				"additionalPrinterColumns": columns,
				"name":                     k.Version,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"description": fmt.Sprintf("Auto-generated derived type for %sSpec via `CustomResource`", k.Kind),
					"properties":  properties,
					"required":    []any{"spec"},
					"title":       k.Kind,
					"type":        "object",
				}},
				"served":       true,
				"storage":      true,
				"subresources": subresources,
			}},
		},
	}, nil
}

// PrinterColumnsJSON is the parent kind's printer columns as the CRD holds them.
func (p *Plugin[Spec, Status]) PrinterColumnsJSON() []map[string]any {
	var columns []map[string]any
	for _, c := range p.Parent.PrinterColumns {
		column := map[string]any{"jsonPath": c.JSONPath, "name": c.Name, "type": c.Type}
		if c.Priority != 0 {
			column["priority"] = c.Priority
		}
		if c.Description != "" {
			column["description"] = c.Description
		}
		columns = append(columns, column)
	}
	return columns
}

// Decode reads the parent object: defaults filled in, types and ranges checked (an
// *InvalidSpec naming the field). A previous status that does not decode (a phase renamed in
// a new version) is dropped with a warning, so the parent gets a new status instead of failing
// forever.
func (p *Plugin[Spec, Status]) Decode(object map[string]any) (*Parent[Spec, Status], error) {
	parent := &Parent[Spec, Status]{Raw: object}
	if metadata, ok := object["metadata"]; ok {
		text, err := json.Marshal(metadata)
		if err == nil {
			err = json.Unmarshal(text, &parent.Metadata)
		}
		if err != nil {
			return nil, &InvalidSpec{Message: fmt.Sprintf("the %s's metadata does not decode: %v", p.Parent.Kind, err)}
		}
	}
	spec, present := object["spec"]
	if !present {
		return nil, &InvalidSpec{Message: fmt.Sprintf("the %s does not match its schema: missing field `spec`", p.Parent.Kind)}
	}
	if err := decodeInto(reflect.ValueOf(&parent.Spec).Elem(), spec, "spec", nil); err != nil {
		return nil, err
	}
	if status, ok := object["status"]; ok && status != nil && p.hasStatus() {
		// The plugin's own earlier output: read as encoding/json reads it (a field left out is
		// its zero value), refused only when a field has another type now.
		decoded := new(Status)
		text, err := json.Marshal(status)
		if err == nil {
			err = json.Unmarshal(text, decoded)
		}
		if err != nil {
			Warn(fmt.Sprintf("the %s's previous status does not decode (%v); reconciling it as if it had none", p.Parent.Kind, err))
		} else {
			parent.Status = decoded
		}
	}
	return parent, nil
}

// Run is one reconcile of parent with observed children, as the host makes it, for a plugin's
// own tests: the objects go through JSON as they would from the host.
func (p *Plugin[Spec, Status]) Run(parent any, observed ...any) (*Desired, error) {
	text, err := CanonicalJSON(parent)
	if err != nil {
		return nil, err
	}
	var observedText []string
	for _, child := range observed {
		childText, err := CanonicalJSON(child)
		if err != nil {
			return nil, err
		}
		observedText = append(observedText, childText)
	}
	decoded, children, err := p.decodeRequest(text, observedText)
	if err != nil {
		return nil, err
	}
	return p.Reconcile(decoded, children)
}

func (p *Plugin[Spec, Status]) decodeRequest(parentText string, observedText []string) (*Parent[Spec, Status], *Observed, error) {
	value, err := ParseJSON(parentText)
	if err != nil {
		return nil, nil, &Retry{Message: fmt.Sprintf("the parent is not valid JSON: %v", err)}
	}
	object, ok := value.(map[string]any)
	if !ok {
		return nil, nil, &Retry{Message: "the parent is not a JSON object"}
	}
	parent, err := p.Decode(object)
	if err != nil {
		return nil, nil, err
	}
	observed, err := NewObserved(observedText)
	if err != nil {
		return nil, nil, err
	}
	return parent, observed, nil
}

func (p *Plugin[Spec, Status]) reconcile(parentText string, observedText []string) (Response, error) {
	parent, observed, err := p.decodeRequest(parentText, observedText)
	if err != nil {
		return Response{}, err
	}
	desired, err := p.Reconcile(parent, observed)
	if err != nil {
		return Response{}, err
	}
	if desired == nil {
		return Response{}, errors.New("Reconcile returned no Desired")
	}
	var response Response
	for _, child := range desired.Children {
		text, err := CanonicalJSON(child)
		if err != nil {
			return Response{}, fmt.Errorf("a child does not encode as JSON: %w", err)
		}
		response.Children = append(response.Children, text)
	}
	status := desired.Status
	if status == nil {
		status = map[string]any{}
	}
	if response.Status, err = CanonicalJSON(status); err != nil {
		return Response{}, fmt.Errorf("the status does not encode as JSON: %w", err)
	}
	response.RequeueAfterMs = desired.RequeueAfterMs
	return response, nil
}

func (p *Plugin[Spec, Status]) finalize(parentText string, observedText []string) (Finalized, error) {
	parent, observed, err := p.decodeRequest(parentText, observedText)
	if err != nil {
		return Finalized{}, err
	}
	if p.Finalize == nil {
		return Finalized{Done: true}, nil
	}
	return p.Finalize(parent, observed)
}

// contractError is err as the contract's reconcile-error: invalid-spec for an *InvalidSpec,
// retry for anything else (a Go error is a value the plugin chose to return, not a bug).
func contractError(err error) (invalidSpec bool, message string) {
	var invalid *InvalidSpec
	if errors.As(err, &invalid) {
		return true, invalid.Message
	}
	return false, err.Error()
}
