// Typed specs and statuses: a Go struct is both the CRD's schema and the decoder of the JSON.

package operatorhost

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Schemer is a type that gives its own OpenAPI schema (a Kubernetes type a spec embeds, as
// ResourceRequirements does). Its values are decoded as free-form JSON.
type Schemer interface {
	OpenAPISchema() map[string]any
}

// ResourceRequirements is a container's compute resources (core/v1 ResourceRequirements),
// kept as JSON: ValidateContainerResources checks it and gives it as the API server stores it.
type ResourceRequirements map[string]any

// OpenAPISchema is the schema k8s-openapi's schemars gives ResourceRequirements, without its
// descriptions.
func (ResourceRequirements) OpenAPISchema() map[string]any {
	quantity := map[string]any{"x-kubernetes-int-or-string": true}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"claims": map[string]any{
				"type": "array",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"name":    map[string]any{"type": "string"},
						"request": map[string]any{"type": "string"},
					},
					"required": []any{"name"},
				},
			},
			"limits":   map[string]any{"type": "object", "additionalProperties": quantity},
			"requests": map[string]any{"type": "object", "additionalProperties": quantity},
		},
	}
}

// Conditions is a status's conditions: in the CRD, a list map keyed by type.
type Conditions []Condition

// OpenAPISchema is the schema of metav1.Condition lists.
func (Conditions) OpenAPISchema() map[string]any {
	return map[string]any{
		"type":                       "array",
		"x-kubernetes-list-type":     "map",
		"x-kubernetes-list-map-keys": []any{"type"},
		"items": map[string]any{
			"type":     "object",
			"required": []any{"status", "type"},
			"properties": map[string]any{
				"type":               map[string]any{"type": "string"},
				"status":             map[string]any{"type": "string", "enum": []any{"True", "False", "Unknown"}},
				"reason":             map[string]any{"type": "string"},
				"message":            map[string]any{"type": "string"},
				"observedGeneration": map[string]any{"type": "integer", "format": "int64"},
				"lastTransitionTime": map[string]any{"type": "string", "format": "date-time"},
			},
		},
	}
}

var schemerType = reflect.TypeFor[Schemer]()

// field is a struct field as the schema and the decoder see it.
type field struct {
	index       int
	name        string // its JSON name
	typ         reflect.Type
	description string
	minimum     *float64
	maximum     *float64
	format      string
	enum        []any
	pattern     string
	// def is the default as JSON (`default:"..."`), nil when the field has none.
	def any
}

// required: neither a default nor a type that may be left out (pointer, slice, map).
func (f *field) required() bool {
	if f.def != nil {
		return false
	}
	switch f.typ.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return false
	}
	return true
}

// fieldsOf reads the tags of struct type t: `json:"name"` names a field (the Go name with a
// lower-case first letter otherwise), `description:"..."`, `default:"..."` (JSON, or the bare
// text of a string field) and `oh:"minimum=0,maximum=100,format=int64,pattern=...,enum=a|b"`.
func fieldsOf(t reflect.Type) ([]field, error) {
	var fields []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name[:1]) + sf.Name[1:]
		}
		f := field{index: i, name: name, typ: sf.Type, description: sf.Tag.Get("description")}
		if text, ok := sf.Tag.Lookup("default"); ok {
			var def any
			if err := json.Unmarshal([]byte(text), &def); err != nil {
				if sf.Type.Kind() != reflect.String {
					return nil, fmt.Errorf("%s.%s: default %q is not JSON", t.Name(), sf.Name, text)
				}
				def = text
			}
			f.def = def
		}
		for option := range strings.SplitSeq(sf.Tag.Get("oh"), ",") {
			key, value, _ := strings.Cut(option, "=")
			switch key {
			case "":
			case "minimum", "maximum":
				number, err := strconv.ParseFloat(value, 64)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %s %q is not a number", t.Name(), sf.Name, key, value)
				}
				if key == "minimum" {
					f.minimum = &number
				} else {
					f.maximum = &number
				}
			case "format":
				f.format = value
			case "pattern":
				f.pattern = value
			case "enum":
				for item := range strings.SplitSeq(value, "|") {
					f.enum = append(f.enum, item)
				}
			default:
				return nil, fmt.Errorf("%s.%s: unknown oh tag option %q", t.Name(), sf.Name, key)
			}
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// SchemaOf is the OpenAPI v3 schema of the Go type t, as the Rust SDK's schemars writes the
// same Rust type: int is integer/int32, int64 integer/int64, float64 number/double, pointers
// nullable, structs objects whose fields without a default are required.
func SchemaOf(t reflect.Type) (map[string]any, error) {
	return schemaOf(t, nil)
}

func schemaOf(t reflect.Type, f *field) (map[string]any, error) {
	var schema map[string]any
	switch {
	case t.Kind() == reflect.Pointer:
		inner, err := schemaOf(t.Elem(), f)
		if err != nil {
			return nil, err
		}
		inner["nullable"] = true
		return inner, nil
	case t.Implements(schemerType):
		schema = reflect.Zero(t).Interface().(Schemer).OpenAPISchema()
	case t.Kind() == reflect.Struct:
		fields, err := fieldsOf(t)
		if err != nil {
			return nil, err
		}
		properties := map[string]any{}
		var required []string
		for i := range fields {
			property, err := schemaOf(fields[i].typ, &fields[i])
			if err != nil {
				return nil, err
			}
			if fields[i].def != nil {
				property["default"] = fields[i].def
			}
			properties[fields[i].name] = property
			if fields[i].required() {
				required = append(required, fields[i].name)
			}
		}
		schema = map[string]any{"type": "object", "properties": properties}
		if len(required) > 0 {
			// Sorted, as schemars writes them.
			sort.Strings(required)
			list := make([]any, len(required))
			for i, name := range required {
				list[i] = name
			}
			schema["required"] = list
		}
	case t.Kind() == reflect.Bool:
		schema = map[string]any{"type": "boolean"}
	case t.Kind() == reflect.Int64 || t.Kind() == reflect.Uint32:
		schema = map[string]any{"type": "integer", "format": "int64"}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		schema = map[string]any{"type": "integer", "format": "int32"}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		schema = map[string]any{"type": "number", "format": "double"}
	case t.Kind() == reflect.String:
		schema = map[string]any{"type": "string"}
	case t.Kind() == reflect.Slice:
		items, err := schemaOf(t.Elem(), nil)
		if err != nil {
			return nil, err
		}
		schema = map[string]any{"type": "array", "items": items}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Interface:
		schema = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		values, err := schemaOf(t.Elem(), nil)
		if err != nil {
			return nil, err
		}
		schema = map[string]any{"type": "object", "additionalProperties": values}
	case t.Kind() == reflect.Interface:
		schema = map[string]any{"x-kubernetes-preserve-unknown-fields": true}
	default:
		return nil, fmt.Errorf("no schema for the Go type %s", t)
	}
	if f != nil {
		if f.format != "" && schema["type"] == "integer" {
			schema["format"] = f.format
		}
		if f.description != "" {
			schema["description"] = f.description
		}
		// Floats, as schemars writes them (`maximum: 100.0`).
		if f.minimum != nil {
			schema["minimum"] = rustFloat(*f.minimum)
		}
		if f.maximum != nil {
			schema["maximum"] = rustFloat(*f.maximum)
		}
		if f.enum != nil {
			schema["enum"] = f.enum
		}
		if f.pattern != "" {
			schema["pattern"] = f.pattern
		}
	}
	return schema, nil
}

// rustFloat is n as a JSON number that CanonicalJSON writes as serde writes an f64: a whole
// number keeps its `.0` (json.Marshal would drop it).
func rustFloat(n float64) json.Number {
	text := strconv.FormatFloat(n, 'f', -1, 64)
	if !strings.ContainsAny(text, ".eE") {
		text += ".0"
	}
	return json.Number(text)
}

// decodeInto sets target (addressable, of the struct's or a field's type) from value (JSON
// read with UseNumber); the InvalidSpec names the path of the first value that does not fit
// (`spec.size: expected an integer, got "three"`).
func decodeInto(target reflect.Value, value any, path string, f *field) error {
	t := target.Type()
	// Free-form JSON (ResourceRequirements, any) is kept as it came.
	freeForm := t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface
	if t.Kind() == reflect.Interface || freeForm {
		if value == nil {
			return nil
		}
		converted := reflect.ValueOf(value)
		if !converted.Type().AssignableTo(t) {
			if !converted.Type().ConvertibleTo(t) {
				return invalidValue(path, "an object", value)
			}
			converted = converted.Convert(t)
		}
		target.Set(converted)
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if value == nil {
			return nil
		}
		inner := reflect.New(t.Elem())
		if err := decodeInto(inner.Elem(), value, path, f); err != nil {
			return err
		}
		target.Set(inner)
		return nil
	case reflect.Struct:
		object, ok := value.(map[string]any)
		if !ok {
			return invalidValue(path, "an object", value)
		}
		fields, err := fieldsOf(t)
		if err != nil {
			return err
		}
		for i := range fields {
			fi := &fields[i]
			item, present := object[fi.name]
			if !present || (item == nil && fi.def != nil) {
				switch {
				case fi.def != nil:
					item = fi.def
				case fi.required():
					return &InvalidSpec{Message: fmt.Sprintf("%s: missing field `%s`", path, fi.name)}
				default:
					continue
				}
			}
			if err := decodeInto(target.Field(fi.index), item, path+"."+fi.name, fi); err != nil {
				return err
			}
		}
		return nil
	case reflect.Bool:
		b, ok := value.(bool)
		if !ok {
			return invalidValue(path, "a boolean", value)
		}
		target.SetBool(b)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return decodeInteger(target, value, path, f)
	case reflect.Float32, reflect.Float64:
		n, ok := asNumber(value)
		if !ok {
			return invalidValue(path, "a number", value)
		}
		number, err := n.Float64()
		if err != nil {
			return invalidValue(path, "a number", value)
		}
		target.SetFloat(number)
		return nil
	case reflect.String:
		s, ok := value.(string)
		if !ok {
			return invalidValue(path, "a string", value)
		}
		target.SetString(s)
		return nil
	case reflect.Slice:
		list, ok := value.([]any)
		if !ok {
			return invalidValue(path, "a list", value)
		}
		slice := reflect.MakeSlice(t, len(list), len(list))
		for i, item := range list {
			if err := decodeInto(slice.Index(i), item, fmt.Sprintf("%s[%d]", path, i), nil); err != nil {
				return err
			}
		}
		target.Set(slice)
		return nil
	case reflect.Map:
		object, ok := value.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return invalidValue(path, "an object", value)
		}
		result := reflect.MakeMapWithSize(t, len(object))
		for key, item := range object {
			element := reflect.New(t.Elem()).Elem()
			quoted, _ := json.Marshal(key)
			if err := decodeInto(element, item, fmt.Sprintf("%s[%s]", path, quoted), nil); err != nil {
				return err
			}
			result.SetMapIndex(reflect.ValueOf(key).Convert(t.Key()), element)
		}
		target.Set(result)
		return nil
	}
	return fmt.Errorf("cannot decode the Go type %s", t)
}

func decodeInteger(target reflect.Value, value any, path string, f *field) error {
	n, ok := asNumber(value)
	if !ok {
		return invalidValue(path, "an integer", value)
	}
	integer, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return invalidValue(path, "an integer", value)
	}
	format := "int32"
	if schema, err := schemaOf(target.Type(), f); err == nil {
		if named, ok := schema["format"].(string); ok {
			format = named
		}
	}
	low, high := int64(math.MinInt32), int64(math.MaxInt32)
	if format == "int64" {
		low, high = math.MinInt64, math.MaxInt64
	}
	if integer < low || integer > high || target.CanInt() && target.OverflowInt(integer) {
		return &InvalidSpec{Message: fmt.Sprintf("%s: expected a %s integer, got %d", path, format, integer)}
	}
	if target.CanInt() {
		target.SetInt(integer)
	} else {
		if integer < 0 || target.OverflowUint(uint64(integer)) {
			return &InvalidSpec{Message: fmt.Sprintf("%s: expected a non-negative %s integer, got %d", path, format, integer)}
		}
		target.SetUint(uint64(integer))
	}
	return nil
}

// asNumber is value as a JSON number, whether read (json.Number) or made in Go.
func asNumber(value any) (json.Number, bool) {
	switch n := value.(type) {
	case json.Number:
		return n, true
	case float64:
		return json.Number(strconv.FormatFloat(n, 'f', -1, 64)), true
	case int:
		return json.Number(strconv.Itoa(n)), true
	case int64:
		return json.Number(strconv.FormatInt(n, 10)), true
	}
	return "", false
}

func invalidValue(path, expected string, value any) *InvalidSpec {
	text, err := CanonicalJSON(value)
	if err != nil {
		text = fmt.Sprint(value)
	}
	if len(text) > 80 {
		text = text[:80]
	}
	return &InvalidSpec{Message: fmt.Sprintf("%s: expected %s, got %s", path, expected, text)}
}
