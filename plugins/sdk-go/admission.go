// What a plugin answers at admission: field errors and warnings (Validation), in the API
// server's own terms, so that `kubectl apply` shows them as it shows the API server's.

package operatorhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// FieldErrorType is why a field is refused; each prints as the API server prints it.
type FieldErrorType uint8

// The field error types, in the contract's order.
const (
	FieldRequired FieldErrorType = iota
	FieldInvalid
	FieldForbidden
	FieldNotSupported
	FieldDuplicate
	FieldTooLong
	FieldTooMany
	FieldNotFound
)

var fieldErrorDescriptions = [...]string{
	FieldRequired:     "Required value",
	FieldInvalid:      "Invalid value",
	FieldForbidden:    "Forbidden",
	FieldNotSupported: "Unsupported value",
	FieldDuplicate:    "Duplicate value",
	FieldTooLong:      "Too long",
	FieldTooMany:      "Too many",
	FieldNotFound:     "Not found",
}

func (t FieldErrorType) String() string {
	if int(t) < len(fieldErrorDescriptions) {
		return fieldErrorDescriptions[t]
	}
	return fmt.Sprintf("FieldErrorType(%d)", uint8(t))
}

// showsValue: the API server prints the refused value with these types only.
func (t FieldErrorType) showsValue() bool {
	return t == FieldInvalid || t == FieldNotSupported || t == FieldDuplicate
}

// FieldError is one refused field.
type FieldError struct {
	Reason FieldErrorType
	// Field is the field's path from the top of the object: spec.size, spec.tls.secretName.
	Field string
	// Value is the refused value as JSON; nil when there is none to show.
	Value json.RawMessage
	// Detail is what was expected.
	Detail string
}

// String is `spec.size: Invalid value: 0: must be between 1 and 10`, as the API server prints it.
func (e FieldError) String() string {
	text := e.Field + ": " + e.Reason.String()
	if e.Value != nil && e.Reason.showsValue() {
		text += ": " + string(e.Value)
	}
	if e.Detail != "" {
		text += ": " + e.Detail
	}
	return text
}

// Validation is the answer of Plugin.Validate and Plugin.ValidateDelete: the request is refused
// when it holds an error; warnings are shown either way. Its zero value (and a nil one)
// refuses nothing. The methods return v for chaining.
type Validation struct {
	errors   []FieldError
	warnings []string
}

// NewValidation is a validation with nothing refused.
func NewValidation() *Validation { return &Validation{} }

// Add adds a field error.
func (v *Validation) Add(err FieldError) *Validation {
	v.errors = append(v.errors, err)
	return v
}

// jsonValue is value as the JSON a field error shows; a value that does not encode shows none.
func jsonValue(value any) json.RawMessage {
	text, err := CanonicalJSON(value)
	if err != nil {
		return nil
	}
	return json.RawMessage(text)
}

// Invalid adds `field: Invalid value: <value>: <detail>`.
func (v *Validation) Invalid(field string, value any, detail string) *Validation {
	return v.Add(FieldError{Reason: FieldInvalid, Field: field, Value: jsonValue(value), Detail: detail})
}

// Required adds `field: Required value: <detail>`.
func (v *Validation) Required(field, detail string) *Validation {
	return v.Add(FieldError{Reason: FieldRequired, Field: field, Detail: detail})
}

// Forbidden adds `field: Forbidden: <detail>`.
func (v *Validation) Forbidden(field, detail string) *Validation {
	return v.Add(FieldError{Reason: FieldForbidden, Field: field, Detail: detail})
}

// NotSupported adds `field: Unsupported value: <value>: supported values: "a", "b"`.
func (v *Validation) NotSupported(field string, value any, supported ...string) *Validation {
	quoted := make([]string, len(supported))
	for i, s := range supported {
		quoted[i] = DebugString(s)
	}
	return v.Add(FieldError{
		Reason: FieldNotSupported,
		Field:  field,
		Value:  jsonValue(value),
		Detail: "supported values: " + strings.Join(quoted, ", "),
	})
}

// Immutable adds `field: Invalid value: <value>: field is immutable`, the API server's words
// for a field an update may not change.
func (v *Validation) Immutable(field string, value any) *Validation {
	return v.Invalid(field, value, "field is immutable")
}

// Check adds the field error an *InvalidSpec of the form `path: detail` names (what
// InvalidField and InvalidAt make), so that the checks Reconcile makes can refuse the same
// spec at admission. A nil error, and any other error (a *Retry is no fault of the spec), adds
// nothing.
func (v *Validation) Check(err error) *Validation {
	var invalid *InvalidSpec
	if !errors.As(err, &invalid) {
		return v
	}
	field, detail, found := strings.Cut(invalid.Message, ": ")
	if !found {
		field, detail = "spec", invalid.Message
	}
	return v.Add(FieldError{Reason: FieldInvalid, Field: field, Detail: detail})
}

// Warn adds a warning, shown by kubectl as `Warning: <message>`.
func (v *Validation) Warn(message string) *Validation {
	v.warnings = append(v.warnings, message)
	return v
}

// IsValid says whether nothing is refused.
func (v *Validation) IsValid() bool { return v == nil || len(v.errors) == 0 }

// Errors are the field errors, in the order they were added.
func (v *Validation) Errors() []FieldError {
	if v == nil {
		return nil
	}
	return v.errors
}

// Warnings are the warnings, in the order they were added.
func (v *Validation) Warnings() []string {
	if v == nil {
		return nil
	}
	return v.warnings
}

// Err is the errors as one *InvalidSpec (`spec.a: ..., spec.b: ...`), for a Reconcile that
// checks what Validate checks; nil when nothing is refused.
func (v *Validation) Err() error {
	if v.IsValid() {
		return nil
	}
	printed := make([]string, len(v.errors))
	for i, err := range v.errors {
		printed[i] = err.String()
	}
	return &InvalidSpec{Message: strings.Join(printed, ", ")}
}

// mergeDiff is the RFC 7386 merge patch that turns before into after (a nil value in the
// patch removes the key), and whether there is any change. Both are JSON values as ParseJSON
// reads them.
func mergeDiff(before, after any) (any, bool) {
	beforeObject, beforeIsObject := before.(map[string]any)
	afterObject, afterIsObject := after.(map[string]any)
	if !beforeIsObject || !afterIsObject {
		if reflect.DeepEqual(before, after) {
			return nil, false
		}
		return after, true
	}
	patch := map[string]any{}
	for key, value := range afterObject {
		old, present := beforeObject[key]
		if !present {
			patch[key] = value
			continue
		}
		if change, changed := mergeDiff(old, value); changed {
			patch[key] = change
		}
	}
	for key := range beforeObject {
		if _, kept := afterObject[key]; !kept {
			patch[key] = nil
		}
	}
	return patch, len(patch) > 0
}

// mergeApply is target with the RFC 7386 merge patch applied; target's maps are changed in place.
func mergeApply(target, patch any) any {
	patchObject, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	targetObject, ok := target.(map[string]any)
	if !ok {
		targetObject = map[string]any{}
	}
	for key, value := range patchObject {
		if value == nil {
			delete(targetObject, key)
			continue
		}
		targetObject[key] = mergeApply(targetObject[key], value)
	}
	return targetObject
}
