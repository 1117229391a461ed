// The plugin declared once (its parent kind, typed spec and status, child and related kinds,
// handlers) and the contract's calls made from it.

package operatorhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
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
	GenerateName      string            `json:"generateName,omitempty"`
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

// NameAny is the name, or the generateName prefix of an object created without one (at
// admission, before the API server has named it), as kube's ResourceExt::name_any.
func (m ObjectMeta) NameAny() string {
	if m.Name != "" {
		return m.Name
	}
	return m.GenerateName
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
	// Related are other objects the plugin reads (a Secret named in the spec, ConfigMaps by
	// label): the host watches them, passes them in Observed.Related, and reconciles the
	// parents that refer to one when it changes.
	Related []Related

	// The admission and conversion handlers: each one set is declared in plugin-info's
	// implements, so the host calls it; one left nil is never called.

	// Validate refuses (field errors) or warns about a parent before it is stored: created
	// (old is nil) or updated from old. A parent that does not decode as Spec is refused with
	// the field that does not before Validate is called. A nil Validation refuses nothing.
	Validate func(parent, old *Parent[Spec, Status]) *Validation
	// ValidateDelete refuses the deletion of a parent.
	ValidateDelete func(parent *Parent[Spec, Status]) *Validation
	// Default fills in defaults of a parent being created or updated, before Validate. Only
	// the fields it changes (in Metadata's labels and annotations, Spec) change in the stored
	// object; it must be idempotent.
	Default func(parent *Parent[Spec, Status])
	// Convert is the parent object (of any version the CRD serves) converted to toVersion,
	// apiVersion included. Converting to the object's own version must give it back
	// unchanged, and a round trip must too. Required when the CRD serves more than one
	// version (OtherVersions).
	Convert func(object map[string]any, toVersion string) (map[string]any, error)
	// OtherVersions are the versions the CRD serves besides Parent.Version (the one the
	// handlers decode), each with its own schema: see ServedVersionOf.
	OtherVersions []ServedVersion
	// StorageVersion is the version the API server stores; Parent.Version when empty.
	StorageVersion string
}

// ServedVersion is a version the parent's CRD serves besides the one the plugin decodes.
type ServedVersion struct {
	Name           string
	PrinterColumns []PrinterColumn
	spec, status   reflect.Type
}

// ServedVersionOf is the version name of the parent kind whose schema is made from Spec and
// Status, as the plugin's own version is from the plugin's type parameters.
func ServedVersionOf[Spec, Status any](name string, columns ...PrinterColumn) ServedVersion {
	return ServedVersion{Name: name, PrinterColumns: columns, spec: reflect.TypeFor[Spec](), status: reflect.TypeFor[Status]()}
}

// Capabilities are the calls beyond reconcile and finalize a plugin implements: the
// contract's plugin-info.implements flags.
type Capabilities uint8

// The capabilities, one bit each in the contract's order.
const (
	CanValidate Capabilities = 1 << iota
	CanValidateDelete
	CanDefault
	CanConvert
)

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
	CRD        string
	Related    []Related
	Implements Capabilities
}

// Request is the contract's reconcile-request: the parent, the observed children and the
// related objects, as JSON texts.
type Request struct {
	Parent   string
	Observed []string
	// Related holds one entry per declared Related, in that order.
	Related []RelatedObjects
}

// RelatedObjects is the objects of one Related for one parent.
type RelatedObjects struct {
	Name    string
	Objects []string
}

// Response is the contract's reconcile-response.
type Response struct {
	Children       []ResponseChild
	Status         string
	RequeueAfterMs *uint64
}

// ResponseChild is the contract's child: the object as JSON and how the host handles it.
type ResponseChild struct {
	Object  string
	Options ChildOptions
}

// Operation is what an admission request does to a parent.
type Operation uint8

// The operations, in the contract's order.
const (
	OperationCreate Operation = iota
	OperationUpdate
	OperationDelete
)

// AdmissionRequest is the contract's admission-request.
type AdmissionRequest struct {
	Operation Operation
	// Object is the parent as it would be stored (JSON); nil for a delete.
	Object *string
	// OldObject is the parent as stored before: for updates and deletes.
	OldObject *string
	User      string
	DryRun    bool
}

// handler is a registered plugin with its types erased: what the contract's exports call.
type handler interface {
	info() (PluginInfo, error)
	reconcile(request Request) (Response, error)
	finalize(request Request) (Finalized, error)
	validate(request AdmissionRequest) *Validation
	defaultObject(object string) (string, error)
	convert(object, toVersion string) (string, error)
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
	if len(p.OtherVersions) > 0 && p.Convert == nil {
		panic(fmt.Sprintf("operatorhost.Register: the %s CRD serves %d versions, so the plugin needs a Convert function", p.Parent.Kind, len(p.OtherVersions)+1))
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
	info.Related = p.Related
	info.Implements = p.implements()
	return info, nil
}

// implements is the handlers the plugin set, as the contract's flags.
func (p *Plugin[Spec, Status]) implements() Capabilities {
	var implements Capabilities
	for _, handler := range []struct {
		set        bool
		capability Capabilities
	}{
		{p.Validate != nil, CanValidate},
		{p.ValidateDelete != nil, CanValidateDelete},
		{p.Default != nil, CanDefault},
		{p.Convert != nil, CanConvert},
	} {
		if handler.set {
			implements |= handler.capability
		}
	}
	return implements
}

// hasStatus: a Status type other than struct{} gives the CRD a status subresource.
func (p *Plugin[Spec, Status]) hasStatus() bool {
	return isStatusType(reflect.TypeFor[Status]())
}

func isStatusType(t reflect.Type) bool {
	return !(t.Kind() == reflect.Struct && t.NumField() == 0)
}

// crdVersion is one entry of the CRD's spec.versions, as the Rust SDK's kube derive writes it.
func (k ParentKind) crdVersion(name string, specType, statusType reflect.Type, printerColumns []PrinterColumn, storage bool) (map[string]any, error) {
	spec, err := SchemaOf(specType)
	if err != nil {
		return nil, fmt.Errorf("the spec of %s %s: %w", k.Kind, name, err)
	}
	properties := map[string]any{"spec": spec}
	subresources := map[string]any{}
	if isStatusType(statusType) {
		status, err := SchemaOf(statusType)
		if err != nil {
			return nil, fmt.Errorf("the status of %s %s: %w", k.Kind, name, err)
		}
		status["nullable"] = true
		properties["status"] = status
		subresources["status"] = map[string]any{}
	}
	columns := []any{}
	for _, column := range printerColumnsJSON(printerColumns) {
		columns = append(columns, column)
	}
	return map[string]any{
		"additionalPrinterColumns": columns,
		"name":                     name,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"description": fmt.Sprintf("Auto-generated derived type for %sSpec via `CustomResource`", k.Kind),
			"properties":  properties,
			"required":    []any{"spec"},
			"title":       k.Kind,
			"type":        "object",
		}},
		"served":       true,
		"storage":      storage,
		"subresources": subresources,
	}, nil
}

// CRD is the CustomResourceDefinition (apiextensions.k8s.io/v1) of the parent kind, as the
// Rust SDK's kube derive and merge_crds write it: the storage version first, then the others.
func (p *Plugin[Spec, Status]) CRD() (map[string]any, error) {
	k := p.Parent
	storageVersion := p.StorageVersion
	if storageVersion == "" {
		storageVersion = k.Version
	}
	own, err := k.crdVersion(k.Version, reflect.TypeFor[Spec](), reflect.TypeFor[Status](), k.PrinterColumns, storageVersion == k.Version)
	if err != nil {
		return nil, err
	}
	served := []any{own}
	storageFound := storageVersion == k.Version
	for _, other := range p.OtherVersions {
		if other.spec == nil || other.status == nil {
			return nil, fmt.Errorf("the %s version %s has no schema: make it with ServedVersionOf", k.Kind, DebugString(other.Name))
		}
		version, err := k.crdVersion(other.Name, other.spec, other.status, other.PrinterColumns, storageVersion == other.Name)
		if err != nil {
			return nil, err
		}
		storageFound = storageFound || storageVersion == other.Name
		served = append(served, version)
	}
	if !storageFound {
		return nil, fmt.Errorf("the %s storage version %s is not one the CRD serves (%s or one of OtherVersions)", k.Kind, DebugString(storageVersion), DebugString(k.Version))
	}
	// In the order of kube's merge_crds (Parent.Version, then OtherVersions, merged into the
	// storage version), so the CRD equals the Rust SDK's: the storage version first, then the
	// others from the last.
	versions := make([]any, 0, len(served))
	for _, version := range served {
		if version.(map[string]any)["storage"] == true {
			versions = append(versions, version)
		}
	}
	for i := len(served) - 1; i >= 0; i-- {
		if served[i].(map[string]any)["storage"] != true {
			versions = append(versions, served[i])
		}
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
			"group":    k.Group,
			"names":    names,
			"scope":    scope,
			"versions": versions,
		},
	}, nil
}

// PrinterColumnsJSON is the parent kind's printer columns as the CRD holds them.
func (p *Plugin[Spec, Status]) PrinterColumnsJSON() []map[string]any {
	return printerColumnsJSON(p.Parent.PrinterColumns)
}

func printerColumnsJSON(printerColumns []PrinterColumn) []map[string]any {
	var columns []map[string]any
	for _, c := range printerColumns {
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
	metadata, err := decodeMetadata(object)
	if err != nil {
		return nil, &InvalidSpec{Message: fmt.Sprintf("the %s's metadata does not decode: %v", p.Parent.Kind, err)}
	}
	parent.Metadata = metadata
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

// decodeMetadata is the object's metadata, as far as ObjectMeta reads it.
func decodeMetadata(object map[string]any) (ObjectMeta, error) {
	var decoded ObjectMeta
	metadata, ok := object["metadata"]
	if !ok {
		return decoded, nil
	}
	text, err := json.Marshal(metadata)
	if err == nil {
		err = json.Unmarshal(text, &decoded)
	}
	return decoded, err
}

// Run is one reconcile of parent with observed children, as the host makes it, for a plugin's
// own tests: the objects go through JSON as they would from the host.
func (p *Plugin[Spec, Status]) Run(parent any, observed ...any) (*Desired, error) {
	return p.RunWithRelated(parent, nil, observed...)
}

// RunWithRelated is Run with related objects, by the name they are declared under.
func (p *Plugin[Spec, Status]) RunWithRelated(parent any, related map[string][]any, observed ...any) (*Desired, error) {
	request, err := testRequest(p.Related, parent, related, observed)
	if err != nil {
		return nil, err
	}
	decoded, children, err := p.decodeRequest(request)
	if err != nil {
		return nil, err
	}
	return p.Reconcile(decoded, children)
}

// testRequest is the request the host would send: the related objects in the order of the
// declarations, and an entry for each declaration.
func testRequest(declared []Related, parent any, related map[string][]any, observed []any) (Request, error) {
	texts := func(objects []any) ([]string, error) {
		var all []string
		for _, object := range objects {
			text, err := CanonicalJSON(object)
			if err != nil {
				return nil, err
			}
			all = append(all, text)
		}
		return all, nil
	}
	var request Request
	var err error
	if request.Parent, err = CanonicalJSON(parent); err != nil {
		return request, err
	}
	if request.Observed, err = texts(observed); err != nil {
		return request, err
	}
	for _, declaration := range declared {
		objects, err := texts(related[declaration.Name])
		if err != nil {
			return request, err
		}
		request.Related = append(request.Related, RelatedObjects{Name: declaration.Name, Objects: objects})
	}
	for name := range related {
		if !slices.ContainsFunc(declared, func(r Related) bool { return r.Name == name }) {
			return request, fmt.Errorf("related objects given as %s, which the plugin does not declare", DebugString(name))
		}
	}
	return request, nil
}

func (p *Plugin[Spec, Status]) decodeRequest(request Request) (*Parent[Spec, Status], *Observed, error) {
	value, err := ParseJSON(request.Parent)
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
	observed, err := NewObserved(request.Observed)
	if err != nil {
		return nil, nil, err
	}
	for _, related := range request.Related {
		if err := observed.addRelated(related.Name, related.Objects); err != nil {
			return nil, nil, err
		}
	}
	return parent, observed, nil
}

func (p *Plugin[Spec, Status]) reconcile(request Request) (Response, error) {
	parent, observed, err := p.decodeRequest(request)
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
	for index, child := range desired.Children {
		text, err := CanonicalJSON(child)
		if err != nil {
			return Response{}, fmt.Errorf("a child does not encode as JSON: %w", err)
		}
		response.Children = append(response.Children, ResponseChild{Object: text, Options: desired.optionsAt(index)})
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

func (p *Plugin[Spec, Status]) finalize(request Request) (Finalized, error) {
	parent, observed, err := p.decodeRequest(request)
	if err != nil {
		return Finalized{}, err
	}
	if p.Finalize == nil {
		return Finalized{Done: true}, nil
	}
	return p.Finalize(parent, observed)
}

// decodeForAdmission is the parent of an admission request, or nil with the field error of
// what does not decode added to validation.
func (p *Plugin[Spec, Status]) decodeForAdmission(text string, validation *Validation) *Parent[Spec, Status] {
	value, err := ParseJSON(text)
	if err != nil {
		validation.Invalid("", nil, "not JSON: "+err.Error())
		return nil
	}
	object, ok := value.(map[string]any)
	if !ok {
		validation.Invalid("", value, fmt.Sprintf("a %s must be a JSON object", p.Parent.Kind))
		return nil
	}
	if _, err := decodeMetadata(object); err != nil {
		validation.Add(FieldError{Reason: FieldInvalid, Field: "metadata", Detail: err.Error()})
		return nil
	}
	if _, present := object["spec"]; !present {
		validation.Required("spec", fmt.Sprintf("a %s needs a spec", p.Parent.Kind))
		return nil
	}
	// What remains are the spec's own errors, each `path: detail`.
	parent, err := p.Decode(object)
	if err != nil {
		validation.Check(err)
		return nil
	}
	return parent
}

func (p *Plugin[Spec, Status]) validate(request AdmissionRequest) *Validation {
	validation := NewValidation()
	switch request.Operation {
	case OperationCreate, OperationUpdate:
		if p.Validate == nil || request.Object == nil {
			return validation
		}
		object := p.decodeForAdmission(*request.Object, validation)
		// An old object that no longer decodes (a schema that changed since) is no reason to
		// refuse the new one: it is validated as a create.
		var old *Parent[Spec, Status]
		if request.OldObject != nil {
			old = p.decodeForAdmission(*request.OldObject, NewValidation())
		}
		if object != nil {
			validation = p.Validate(object, old)
		}
	case OperationDelete:
		if p.ValidateDelete == nil || request.OldObject == nil {
			return validation
		}
		if old := p.decodeForAdmission(*request.OldObject, NewValidation()); old != nil {
			validation = p.ValidateDelete(old)
		}
	}
	if validation == nil {
		validation = NewValidation()
	}
	return validation
}

// typedJSON is what the plugin's types hold of parent, as JSON values: what Default can change.
func typedJSON[Spec, Status any](parent *Parent[Spec, Status]) (any, error) {
	text, err := CanonicalJSON(map[string]any{"metadata": parent.Metadata, "spec": parent.Spec, "status": parent.Status})
	if err != nil {
		return nil, err
	}
	return ParseJSON(text)
}

// defaultObject is the object with only the fields Default changed changed, so that what Spec
// does not model (or models with other defaults) stays as the user wrote it. An object that
// does not decode is returned as it is, for validate to refuse.
func (p *Plugin[Spec, Status]) defaultObject(text string) (string, error) {
	if p.Default == nil {
		return text, nil
	}
	value, err := ParseJSON(text)
	if err != nil {
		return "", fmt.Errorf("the %s to default is not JSON: %v", p.Parent.Kind, err)
	}
	object, ok := value.(map[string]any)
	if !ok {
		return "", fmt.Errorf("the %s to default is not a JSON object", p.Parent.Kind)
	}
	parent, err := p.Decode(object)
	if err != nil {
		return text, nil
	}
	before, err := typedJSON(parent)
	if err != nil {
		return "", fmt.Errorf("the %s to default does not encode: %v", p.Parent.Kind, err)
	}
	p.Default(parent)
	after, err := typedJSON(parent)
	if err != nil {
		return "", fmt.Errorf("the %s defaulted does not encode: %v", p.Parent.Kind, err)
	}
	patch, changed := mergeDiff(before, after)
	if !changed {
		return text, nil
	}
	return CanonicalJSON(mergeApply(object, patch))
}

func (p *Plugin[Spec, Status]) convert(text, toVersion string) (string, error) {
	if p.Convert == nil {
		return "", fmt.Errorf("the %s plugin does not convert between versions (asked for %s)", p.Name, DebugString(toVersion))
	}
	value, err := ParseJSON(text)
	if err != nil {
		return "", fmt.Errorf("the %s to convert to %s is not JSON: %v", p.Parent.Kind, toVersion, err)
	}
	object, ok := value.(map[string]any)
	if !ok {
		return "", fmt.Errorf("the %s to convert to %s is not a JSON object", p.Parent.Kind, toVersion)
	}
	converted, err := p.Convert(object, toVersion)
	if err != nil {
		return "", err
	}
	if converted == nil {
		return "", fmt.Errorf("Convert returned no %s for version %s", p.Parent.Kind, toVersion)
	}
	text, err = CanonicalJSON(converted)
	if err != nil {
		return "", fmt.Errorf("the %s converted to %s does not encode as JSON: %v", p.Parent.Kind, toVersion, err)
	}
	return text, nil
}

// RunValidate is the validation of object, created (old nil) or updated from old, as the host
// asks for it, for a plugin's own tests: the objects go through JSON.
func (p *Plugin[Spec, Status]) RunValidate(object, old any) (*Validation, error) {
	request := AdmissionRequest{Operation: OperationCreate}
	var err error
	if request.Object, err = jsonText(object); err != nil {
		return nil, err
	}
	if old != nil {
		request.Operation = OperationUpdate
		if request.OldObject, err = jsonText(old); err != nil {
			return nil, err
		}
	}
	return p.validate(request), nil
}

// RunValidateDelete is the validation of the deletion of old, as the host asks for it.
func (p *Plugin[Spec, Status]) RunValidateDelete(old any) (*Validation, error) {
	text, err := jsonText(old)
	if err != nil {
		return nil, err
	}
	return p.validate(AdmissionRequest{Operation: OperationDelete, OldObject: text}), nil
}

// RunDefault is object defaulted as the host asks for it, as JSON.
func (p *Plugin[Spec, Status]) RunDefault(object any) (map[string]any, error) {
	text, err := CanonicalJSON(object)
	if err != nil {
		return nil, err
	}
	if text, err = p.defaultObject(text); err != nil {
		return nil, err
	}
	return jsonObject(text)
}

// RunConvert is object converted to toVersion as the host asks for it, as JSON.
func (p *Plugin[Spec, Status]) RunConvert(object any, toVersion string) (map[string]any, error) {
	text, err := CanonicalJSON(object)
	if err != nil {
		return nil, err
	}
	if text, err = p.convert(text, toVersion); err != nil {
		return nil, err
	}
	return jsonObject(text)
}

func jsonText(value any) (*string, error) {
	text, err := CanonicalJSON(value)
	if err != nil {
		return nil, err
	}
	return &text, nil
}

func jsonObject(text string) (map[string]any, error) {
	value, err := ParseJSON(text)
	if err != nil {
		return nil, err
	}
	object, ok := value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object: %s", text)
	}
	return object, nil
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
