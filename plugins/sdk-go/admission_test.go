// Tests of contract 0.3.0's calls as the host makes them: validate, default, convert, the
// implements flags, and the Validation builder's field errors.

package operatorhost

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type gadgetSpec struct {
	Size  int    `json:"size" oh:"minimum=0,maximum=10"`
	Image string `json:"image" default:"gadget"`
}

type gadgetStatus struct {
	Phase string `json:"phase" default:"\"\""`
}

type gadgetSpecV2 struct {
	Replicas int    `json:"replicas"`
	Image    string `json:"image" default:"gadget"`
}

func gadgetPlugin() *Plugin[gadgetSpec, gadgetStatus] {
	return &Plugin[gadgetSpec, gadgetStatus]{
		Name: "gadget", Version: "0.3.0",
		Parent:   ParentKind{Group: "t.dev", Version: "v1", Kind: "Gadget"},
		Children: []Kind{KindConfigMap},
		Reconcile: func(parent *Parent[gadgetSpec, gadgetStatus], _ *Observed) (*Desired, error) {
			return &Desired{}, checkGadget(parent.Spec)
		},
	}
}

// checkGadget is a check a Reconcile makes, which Validation.Check turns into a field error.
func checkGadget(spec gadgetSpec) error {
	if spec.Size > 5 {
		return InvalidField("size", fmt.Sprintf("must be at most 5, got %d", spec.Size))
	}
	return nil
}

func gadget(spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "t.dev/v1", "kind": "Gadget", "metadata": map[string]any{"name": "g"}, "spec": spec}
}

func printed(validation *Validation) []string {
	var all []string
	for _, err := range validation.Errors() {
		all = append(all, err.String())
	}
	return all
}

func TestFieldErrorsPrintAsTheAPIServerPrintsThem(t *testing.T) {
	validation := NewValidation().
		Invalid("spec.size", 0, "must be between 1 and 10").
		Required("spec.image", "a container image").
		Immutable("spec.storage", "2Gi").
		NotSupported("spec.mode", "x", "a", "b").
		Forbidden("spec.hostNetwork", "not for caches").
		Add(FieldError{Reason: FieldDuplicate, Field: "spec.ports[1]", Value: []byte("80")}).
		Add(FieldError{Reason: FieldNotFound, Field: "spec.secretName", Value: []byte(`"gone"`), Detail: "no such Secret"})
	want := []string{
		"spec.size: Invalid value: 0: must be between 1 and 10",
		"spec.image: Required value: a container image",
		`spec.storage: Invalid value: "2Gi": field is immutable`,
		`spec.mode: Unsupported value: "x": supported values: "a", "b"`,
		"spec.hostNetwork: Forbidden: not for caches",
		"spec.ports[1]: Duplicate value: 80",
		"spec.secretName: Not found: no such Secret",
	}
	if got := printed(validation); !reflect.DeepEqual(got, want) {
		t.Errorf("field errors:\n%q\nwant\n%q", got, want)
	}
	if validation.IsValid() {
		t.Error("a validation with errors is valid")
	}
	if err := validation.Err(); err == nil || !strings.HasPrefix(err.Error(), "spec.size: Invalid value: 0: must be between 1 and 10, spec.image: Required value") {
		t.Errorf("Err() = %v", err)
	}
	if !NewValidation().Warn("only a warning").IsValid() || NewValidation().Err() != nil {
		t.Error("a validation with warnings only refuses")
	}
}

func TestCheckTurnsAnInvalidSpecIntoAFieldError(t *testing.T) {
	validation := NewValidation().
		Check(InvalidField("size", "must be at most 100")).
		Check(InvalidAt("metadata.name", "too long")).
		Check(&InvalidSpec{Message: "no field named"}).
		Check(&Retry{Message: "not a spec problem"}).
		Check(fmt.Errorf("wrapped: %w", InvalidField("image", "empty"))).
		Check(errors.New("plain")).
		Check(nil)
	want := []FieldError{
		{Reason: FieldInvalid, Field: "spec.size", Detail: "must be at most 100"},
		{Reason: FieldInvalid, Field: "metadata.name", Detail: "too long"},
		{Reason: FieldInvalid, Field: "spec", Detail: "no field named"},
		{Reason: FieldInvalid, Field: "spec.image", Detail: "empty"},
	}
	if got := validation.Errors(); !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %#v, want %#v", got, want)
	}
}

func TestValidateDecodesTheParentAndOldAndCallsTheAuthor(t *testing.T) {
	plugin := gadgetPlugin()
	var sawOld *Parent[gadgetSpec, gadgetStatus]
	plugin.Validate = func(parent, old *Parent[gadgetSpec, gadgetStatus]) *Validation {
		sawOld = old
		validation := NewValidation().Check(checkGadget(parent.Spec))
		if old != nil && old.Spec.Image != parent.Spec.Image {
			validation.Immutable("spec.image", parent.Spec.Image)
		}
		return validation.Warn("image " + parent.Spec.Image)
	}
	created, err := plugin.RunValidate(gadget(map[string]any{"size": 7}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := printed(created), []string{"spec.size: Invalid value: must be at most 5, got 7"}; !reflect.DeepEqual(got, want) {
		t.Errorf("create: %q, want %q", got, want)
	}
	// The spec's defaults are filled in before the author sees it.
	if got := created.Warnings(); !reflect.DeepEqual(got, []string{"image gadget"}) {
		t.Errorf("warnings = %q", got)
	}
	if sawOld != nil {
		t.Error("a create has an old object")
	}
	updated, _ := plugin.RunValidate(gadget(map[string]any{"size": 1, "image": "new"}), gadget(map[string]any{"size": 1}))
	if got, want := printed(updated), []string{`spec.image: Invalid value: "new": field is immutable`}; !reflect.DeepEqual(got, want) {
		t.Errorf("update: %q, want %q", got, want)
	}
	// An old object that no longer decodes is no reason to refuse: validated as a create.
	asCreate, _ := plugin.RunValidate(gadget(map[string]any{"size": 1}), gadget(map[string]any{"size": "one"}))
	if !asCreate.IsValid() || sawOld != nil {
		t.Errorf("an undecodable old object: %q, old %v", printed(asCreate), sawOld)
	}
}

func TestAParentThatDoesNotDecodeIsRefusedWithItsField(t *testing.T) {
	plugin := gadgetPlugin()
	called := false
	plugin.Validate = func(_, _ *Parent[gadgetSpec, gadgetStatus]) *Validation {
		called = true
		return nil
	}
	tests := []struct {
		object any
		want   []string
	}{
		{gadget(map[string]any{"size": "big"}), []string{`spec.size: Invalid value: expected an integer, got "big"`}},
		{gadget(map[string]any{}), []string{"spec: Invalid value: missing field `size`"}},
		{map[string]any{"apiVersion": "t.dev/v1", "kind": "Gadget", "metadata": map[string]any{}}, []string{"spec: Required value: a Gadget needs a spec"}},
		{map[string]any{"metadata": map[string]any{"name": 3}, "spec": map[string]any{"size": 1}}, []string{"metadata: Invalid value: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"}},
		{[]any{1}, []string{": Invalid value: [1]: a Gadget must be a JSON object"}},
	}
	for _, tt := range tests {
		validation, err := plugin.RunValidate(tt.object, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := printed(validation); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("validate(%v) = %q, want %q", tt.object, got, tt.want)
		}
	}
	if called {
		t.Error("Validate was called with a parent that does not decode")
	}
	brokenText := "{"
	notJSON := plugin.validate(AdmissionRequest{Operation: OperationCreate, Object: &brokenText})
	if got := printed(notJSON); len(got) != 1 || !strings.HasPrefix(got[0], ": Invalid value: null: not JSON: ") {
		t.Errorf("validate of text that is not JSON = %q", got)
	}
}

func TestValidateDeleteSeesTheOldObjectOnly(t *testing.T) {
	plugin := gadgetPlugin()
	plugin.ValidateDelete = func(parent *Parent[gadgetSpec, gadgetStatus]) *Validation {
		return NewValidation().Forbidden("metadata.name", parent.Metadata.Name+" is kept")
	}
	validation, err := plugin.RunValidateDelete(gadget(map[string]any{"size": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := printed(validation), []string{"metadata.name: Forbidden: g is kept"}; !reflect.DeepEqual(got, want) {
		t.Errorf("delete: %q, want %q", got, want)
	}
	// Without a Validate, creates pass: the host never calls it, but the export answers.
	if created, _ := plugin.RunValidate(gadget(map[string]any{"size": "big"}), nil); !created.IsValid() {
		t.Errorf("a create without Validate: %q", printed(created))
	}
}

func TestDefaultPatchesOnlyTheFieldsTheAuthorChanged(t *testing.T) {
	plugin := gadgetPlugin()
	plugin.Default = func(parent *Parent[gadgetSpec, gadgetStatus]) {
		if parent.Spec.Size == 0 {
			parent.Spec.Size = 1
		}
		if parent.Metadata.Labels == nil {
			parent.Metadata.Labels = map[string]string{}
		}
		parent.Metadata.Labels["tier"] = "cache"
	}
	// The image's default, the field the spec does not model, the metadata the author did
	// not touch and the status stay as the user wrote them.
	object := map[string]any{
		"apiVersion": "t.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g", "annotations": map[string]any{"a": "b"}, "managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec":     map[string]any{"size": 0, "unmodelled": map[string]any{"x": 1.5}},
		"status":   map[string]any{"phase": "Old", "extra": true},
	}
	defaulted, err := plugin.RunDefault(object)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := CanonicalJSON(defaulted)
	want := `{"apiVersion":"t.dev/v1","kind":"Gadget","metadata":{"annotations":{"a":"b"},"labels":{"tier":"cache"},"managedFields":[{"manager":"kubectl"}],"name":"g"},"spec":{"size":1,"unmodelled":{"x":1.5}},"status":{"extra":true,"phase":"Old"}}`
	if got != want {
		t.Errorf("defaulted:\n%s\nwant\n%s", got, want)
	}
	// Idempotent: the defaulted object comes back as it is, text and all.
	text, _ := CanonicalJSON(defaulted)
	if again, err := plugin.defaultObject(text); err != nil || again != text {
		t.Errorf("defaulting again = %s, %v", again, err)
	}
	// An object that does not decode is returned as it is, for validate to refuse.
	undecodable := `{"spec":{"size":"big"}}`
	if got, err := plugin.defaultObject(undecodable); err != nil || got != undecodable {
		t.Errorf("default of an undecodable object = %s, %v", got, err)
	}
	if _, err := plugin.defaultObject("[1]"); err == nil || err.Error() != "the Gadget to default is not a JSON object" {
		t.Errorf("default of a list: %v", err)
	}
	if _, err := plugin.defaultObject("{"); err == nil || !strings.HasPrefix(err.Error(), "the Gadget to default is not JSON: ") {
		t.Errorf("default of text that is not JSON: %v", err)
	}
}

func TestWithoutDefaultTheObjectIsReturnedUnchanged(t *testing.T) {
	text := `{"spec": {"size": 0}}`
	if got, err := gadgetPlugin().defaultObject(text); err != nil || got != text {
		t.Errorf("default without Default = %s, %v", got, err)
	}
}

func convertGadget(object map[string]any, toVersion string) (map[string]any, error) {
	from := strings.TrimPrefix(object["apiVersion"].(string), "t.dev/")
	spec := object["spec"].(map[string]any)
	switch {
	case from == toVersion:
	case from == "v1" && toVersion == "v2":
		spec["replicas"], spec["size"] = spec["size"], nil
		delete(spec, "size")
	case from == "v2" && toVersion == "v1":
		spec["size"] = spec["replicas"]
		delete(spec, "replicas")
	default:
		return nil, fmt.Errorf("cannot convert a Gadget from %s to %s: the versions are v1 and v2", from, toVersion)
	}
	object["apiVersion"] = "t.dev/" + toVersion
	return object, nil
}

func TestConvertBetweenTheVersionsTheCRDServes(t *testing.T) {
	plugin := gadgetPlugin()
	plugin.Convert = convertGadget
	plugin.OtherVersions = []ServedVersion{ServedVersionOf[gadgetSpecV2, gadgetStatus]("v2")}
	plugin.StorageVersion = "v2"
	two, err := plugin.RunConvert(gadget(map[string]any{"size": 3}), "v2")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := CanonicalJSON(two); got != `{"apiVersion":"t.dev/v2","kind":"Gadget","metadata":{"name":"g"},"spec":{"replicas":3}}` {
		t.Errorf("converted = %s", got)
	}
	if _, err := plugin.RunConvert(gadget(map[string]any{"size": 3}), "v9"); err == nil || err.Error() != "cannot convert a Gadget from v1 to v9: the versions are v1 and v2" {
		t.Errorf("convert to an unknown version: %v", err)
	}
	if _, err := plugin.convert("[]", "v2"); err == nil || err.Error() != "the Gadget to convert to v2 is not a JSON object" {
		t.Errorf("convert of a list: %v", err)
	}
	crd, err := plugin.CRD()
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, version := range crd["spec"].(map[string]any)["versions"].([]any) {
		entry := version.(map[string]any)
		properties := entry["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)
		spec := properties["spec"].(map[string]any)["properties"].(map[string]any)
		var fields []string
		for field := range spec {
			fields = append(fields, field)
		}
		versions = append(versions, fmt.Sprintf("%s storage=%v fields=%v", entry["name"], entry["storage"], slices.Sorted(slices.Values(fields))))
	}
	// kube's merge_crds order, as the Rust SDK's: the storage version first.
	want := []string{"v2 storage=true fields=[image replicas]", "v1 storage=false fields=[image size]"}
	if !reflect.DeepEqual(versions, want) {
		t.Errorf("versions = %q, want %q", versions, want)
	}
	plugin.StorageVersion = "v3"
	if _, err := plugin.CRD(); err == nil || err.Error() != `the Gadget storage version "v3" is not one the CRD serves ("v1" or one of OtherVersions)` {
		t.Errorf("an unknown storage version: %v", err)
	}
}

func TestConvertWithoutAConverterSaysSo(t *testing.T) {
	_, err := gadgetPlugin().convert(`{"apiVersion":"t.dev/v1"}`, "v2")
	if err == nil || err.Error() != `the gadget plugin does not convert between versions (asked for "v2")` {
		t.Errorf("convert without Convert: %v", err)
	}
}

func TestSeveralVersionsNeedAConverter(t *testing.T) {
	defer func() {
		recovered := recover()
		want := "operatorhost.Register: the Gadget CRD serves 2 versions, so the plugin needs a Convert function"
		if recovered != want {
			t.Errorf("Register panicked with %v, want %q", recovered, want)
		}
		registered = nil
	}()
	plugin := gadgetPlugin()
	plugin.OtherVersions = []ServedVersion{ServedVersionOf[gadgetSpecV2, gadgetStatus]("v2")}
	Register(plugin)
}

func TestImplementsIsTheHandlersSet(t *testing.T) {
	plugin := gadgetPlugin()
	info := func() Capabilities {
		declared, err := plugin.info()
		if err != nil {
			t.Fatal(err)
		}
		return declared.Implements
	}
	if got := info(); got != 0 {
		t.Errorf("no handlers: implements %04b", got)
	}
	plugin.Validate = func(_, _ *Parent[gadgetSpec, gadgetStatus]) *Validation { return nil }
	plugin.Default = func(*Parent[gadgetSpec, gadgetStatus]) {}
	if got := info(); got != 0b0101 {
		t.Errorf("validate and default: implements %04b, want 0101", got)
	}
	plugin.ValidateDelete = func(*Parent[gadgetSpec, gadgetStatus]) *Validation { return nil }
	plugin.Convert = convertGadget
	if got := info(); got != CanValidate|CanValidateDelete|CanDefault|CanConvert {
		t.Errorf("every handler: implements %04b, want 1111", got)
	}
}
