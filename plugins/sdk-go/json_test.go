// Tests of canonical JSON (serde_json's text) and the parser, ported from the JS SDK's json.test.js.

package operatorhost

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	type tagged struct {
		B     int            `json:"b"`
		A     []any          `json:"a"`
		C     *int           `json:"c,omitempty"` // left out, as JS leaves out undefined
		Upper map[string]any `json:"A"`
	}
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"maps are sorted by key bytes, without spaces",
			map[string]any{"b": 1, "a": []any{true, nil, "x"}, "A": map[string]any{}},
			`{"A":{},"a":[true,null,"x"],"b":1}`},
		{"structs are written as encoding/json writes them, then sorted",
			tagged{B: 1, A: []any{true, nil, "x"}, Upper: map[string]any{}},
			`{"A":{},"a":[true,null,"x"],"b":1}`},
		{"U+FFFF sorts before U+10000 (code point order, not UTF-16's)",
			map[string]any{"\U00010000": 1, "\uffff": 2},
			"{\"\uffff\":2,\"\U00010000\":1}"},
		{"nil maps and slices are null", []any{map[string]any(nil), []any(nil), []string(nil)}, `[null,null,null]`},
		{"/ and non-ASCII are not escaped", "a/b é 😀", `"a/b é 😀"`},
		{"nor is HTML, nor U+2028", "<a>&\u2028", "\"<a>&\u2028\""},
		{"quotes, backslashes and control characters are",
			"\"\\\b\f\n\r\t\u0001\u001f\u007f",
			`"\"\\\b\f\n\r\t\u0001\u001f` + "\u007f\""},
		{"bytes that are not UTF-8 are U+FFFD, as encoding/json writes them", "a\xffb", "\"a\uFFFDb\""},
		{"integers are written as they are",
			[]any{0, -5, 9007199254740991, int64(math.MinInt64), uint64(math.MaxUint64), json.Number("12")},
			`[0,-5,9007199254740991,-9223372036854775808,18446744073709551615,12]`},
		{"floats are written as serde_json writes f64s",
			[]any{json.Number("100.0"), json.Number("0.0"), 0.5, 1.5e-7, 1e21, json.Number("1e15"), json.Number("1e16")},
			`[100.0,0.0,0.5,1.5e-7,1e+21,1000000000000000.0,1e+16]`},
		{"an integral float64 is an integer, as encoding/json writes it",
			[]any{100.0, 1e16, float32(0.1)},
			`[100,10000000000000000,0.1]`},
		{"-0 is a float, as serde_json reads it", []any{json.Number("-0"), math.Copysign(0, -1)}, `[-0.0,-0.0]`},
		{"integers beyond u64 and i64 are f64s",
			[]any{json.Number("18446744073709551616"), json.Number("-9223372036854775809")},
			`[1.8446744073709552e+19,-9.223372036854776e+18]`},
		{"numbers no f64 holds are null, as serde_json writes a non-finite f64",
			[]any{json.Number("1e400"), json.Number("-1e400"), json.Number("1e-400")},
			`[null,null,0.0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON(tt.value)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("CanonicalJSON = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONRefusesWhatJSONCannotHold(t *testing.T) {
	for _, value := range []any{math.NaN(), math.Inf(1), map[string]any{"f": func() {}}, json.Number("x1")} {
		if got, err := CanonicalJSON(value); err == nil {
			t.Errorf("CanonicalJSON(%v) = %s, want an error", value, got)
		}
	}
}

func TestSerdeFloat(t *testing.T) {
	tests := []struct {
		x    float64
		want string
	}{
		{123.456, "123.456"},
		{0.00001, "0.00001"},
		{0.000001, "1e-6"},
		{1.2345678901234568e20, "1.2345678901234568e+20"},
		{1e15, "1000000000000000.0"},
		{1e16, "1e+16"},
		{-2.5, "-2.5"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
	}
	for _, tt := range tests {
		if got := serdeFloat(tt.x); got != tt.want {
			t.Errorf("serdeFloat(%v) = %s, want %s", tt.x, got, tt.want)
		}
	}
}

func TestParseJSONKeepsNumbersAsWritten(t *testing.T) {
	text := `{"a":3.0,"b":[1,2.5,1e3,9007199254740993],"c":"x\ny","__proto__":1}`
	value, err := ParseJSON(text)
	if err != nil {
		t.Fatal(err)
	}
	object := value.(map[string]any)
	if object["a"] != json.Number("3.0") {
		t.Errorf("a = %#v, want json.Number(\"3.0\")", object["a"])
	}
	if b := object["b"].([]any); b[3] != json.Number("9007199254740993") {
		t.Errorf("b[3] = %#v", b[3])
	}
	got, err := CanonicalJSON(value)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"__proto__":1,"a":3.0,"b":[1,2.5,1000.0,9007199254740993],"c":"x\ny"}`; got != want {
		t.Errorf("CanonicalJSON(ParseJSON(...)) = %s, want %s", got, want)
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct{ text, want string }{
		{`{"a":1e400}`, "number out of range"},
		{`{"a":1} x`, "trailing characters at line 1 column 9"},
		{"[1,\n2] x", "trailing characters at line 2 column 4"},
		{"not json", "at line 1 column 2"},
		{"", "EOF while parsing a value at line 1 column 0"},
		{`{"a":`, "EOF while parsing a value"},
	}
	for _, tt := range tests {
		value, err := ParseJSON(tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseJSON(%q) = %v, %v; want an error with %q", tt.text, value, err, tt.want)
		}
	}
	if _, err := ParseJSON(" [1] \n"); err != nil {
		t.Errorf("white space around a value: %v", err)
	}
}

func TestContentHashEqualsTheRustSDKs(t *testing.T) {
	// Pinned in plugins/sdk/src/view.rs: a hash that changed would roll every pod that carries it.
	const pinned = "21f76dfbfe6dfe21f762080ef484112cf2952974cef30741fd1931e1c6d92112"
	if got := ContentHash(map[string]string{"a": "1", "b": "2"}); got != pinned {
		t.Errorf("ContentHash = %s, want %s", got, pinned)
	}
	if got := ContentHash(map[string]any{"b": "2", "a": "1"}); got != pinned {
		t.Errorf("ContentHash of the keys in another order = %s, want %s", got, pinned)
	}
	if got := ContentHash(map[string]any{"a": "1", "b": "3"}); got == pinned {
		t.Error("ContentHash does not follow the content")
	}
}
