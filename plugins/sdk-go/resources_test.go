// Tests of quantities and container resources: the JS SDK's (the Rust SDK's, ported) and the Python SDK's vectors.

package operatorhost

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// checkResources is "" when requests and limits are accepted, else the InvalidSpec's message.
func checkResources(t *testing.T, requests, limits map[string]any) string {
	t.Helper()
	resources := map[string]any{}
	if requests != nil {
		resources["requests"] = requests
	}
	if limits != nil {
		resources["limits"] = limits
	}
	return invalidSpecMessage(t, "resources", resources)
}

func invalidSpecMessage(t *testing.T, field string, resources map[string]any) string {
	t.Helper()
	_, err := ValidateContainerResources(field, resources)
	if err == nil {
		return ""
	}
	var invalid *InvalidSpec
	if !errors.As(err, &invalid) {
		t.Fatalf("%v is not an InvalidSpec", err)
	}
	return invalid.Message
}

// rejected checks that requests and limits are refused with a message naming field (under
// spec.resources) and saying why.
func rejected(t *testing.T, requests, limits map[string]any, field, why string) {
	t.Helper()
	message := checkResources(t, requests, limits)
	if message == "" {
		t.Errorf("requests %v, limits %v: accepted", requests, limits)
		return
	}
	if !strings.HasPrefix(message, "spec.resources"+field+": ") || !strings.Contains(message, why) {
		t.Errorf("%s does not name %s with %s", message, field, why)
	}
}

func accepted(t *testing.T, requests, limits map[string]any) {
	t.Helper()
	if message := checkResources(t, requests, limits); message != "" {
		t.Errorf("requests %v, limits %v: %s", requests, limits, message)
	}
}

// merged is the entries of lists, the later winning.
func merged(lists ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, list := range lists {
		for k, v := range list {
			out[k] = v
		}
	}
	return out
}

func TestQuantitiesInEveryFormOfTheGrammarAreCanonicalized(t *testing.T) {
	for _, tc := range []struct{ quantity, canonical string }{
		{"1", "1"}, {"+1", "1"}, {"1.", "1"}, {".5", "500m"}, {"0.1", "100m"}, {"1.5", "1500m"},
		{"1000m", "1"}, {"2000", "2k"}, {"1024", "1024"}, {"0.1n", "1n"},
		{"1.0000000001", "1000000001n"}, {"100u", "100u"}, {"5M", "5M"}, {"9E", "9E"},
		{"1.5Gi", "1536Mi"}, {"2048Ki", "2Mi"}, {"1000Ki", "1000Ki"}, {"0.5Ki", "512"},
		{"1Ei", "1Ei"}, {"0Gi", "0"}, {"-0", "0"}, {"-1.5", "-1500m"}, {"1e3", "1e3"},
		{"1000E-3", "1"}, {"1500e-3", "1500e-3"}, {"1e+3", "1e3"}, {"1e0", "1"}, {"1e-0", "1"},
		{"2E00", "2"}, {"1e-1000", "1e-9"}, {"00012", "12"},
		{"0.000000000000000000000000000000000000000001", "1n"},
		{"9223372036854775807", "9223372036854775807"},
		// Beyond the JS vectors: the digits kept, binary suffixes with fractions, the limits.
		{"0.1234567890123456789012345678901234", "123456790n"},
		{"1.0000000000000000000000000000001", "1000000001n"},
		{"1.00000000000000000000000000000000001Ki", "1024000000001n"},
		{"0.000000000000000000000000000000000001Ei", "1n"},
		{"12345678901234567890123456789e-20", "123456789012345679e-9"},
		{"9007199254740993", "9007199254740993"}, {"1e-10", "1e-9"}, {"0.5Ei", "512Pi"}, {"7Ei", "7Ei"}, {"1.5Ki", "1536"}, {"1.0001Ki", "1024102400u"}, {"1023Ki", "1023Ki"},
		{"-1Mi", "-1Mi"}, {"1e18", "1e18"}, {"100e-9", "100e-9"}, {"0.0000000001", "1n"},
	} {
		got, err := CanonicalQuantity(tc.quantity)
		if err != nil || got != tc.canonical {
			t.Errorf("CanonicalQuantity(%q) = %q, %v, want %q", tc.quantity, got, err, tc.canonical)
		}
	}
}

func TestTextOutsideTheGrammarIsNotAQuantity(t *testing.T) {
	for _, tc := range []struct {
		why        string
		quantities []string
	}{
		{"must be a quantity", []string{"", "not-a-quantity", ".", "-", "1.2.3", "1e", "1e+", "1e1.5", "1Ki3", "1i", "1 ", " 1", "--1", "1KI", "1K", "0x10", "1mi", "+", "1e-", "1ee3", "1é"}},
		{"at most 2^63-1", []string{"10E", "9223372036854775808", "8Ei", "1e19", "1e1000", "1e99999999999999999999", "123456789012345678901234567890123", "9223372036854775807999999999999"}},
	} {
		for _, quantity := range tc.quantities {
			got, err := CanonicalQuantity(quantity)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("CanonicalQuantity(%q) = %q, %v, want an error with %q", quantity, got, err, tc.why)
			}
		}
	}
}

func TestNamesAreStandardOrFullyQualified(t *testing.T) {
	for _, name := range []string{"cpu", "memory", "ephemeral-storage", "example.com/gpu", "kubernetes.io/x"} {
		accepted(t, nil, map[string]any{name: "1"})
	}
	accepted(t, nil, map[string]any{"hugepages-2Mi": "2Mi", "memory": "1Gi"})
	for _, name := range []string{"k", "pods", "requests.cpu", "gpu"} {
		rejected(t, nil, map[string]any{name: "1"}, `.limits["`+name+`"]`, "must be a standard resource for containers")
	}
	for _, name := range []string{"bad key", "-k-", "k-", "example.com/", "Example.com/gpu", "a/b/c", "/gpu"} {
		rejected(t, map[string]any{name: "1"}, nil, `.requests["`+name+`"]`, "not a resource name")
	}
	long := strings.Repeat("a.", 121) + "com/gpu"
	// From the Python tests: a qualified name, too long for the quota name requests.<name>.
	if !isQualifiedName(long) || len(long) <= 244+4 {
		t.Errorf("%s: qualified %v, %d bytes", long, isQualifiedName(long), len(long))
	}
	for _, name := range []string{"requests.example.com/gpu", long} {
		rejected(t, nil, map[string]any{name: "1"}, `.limits["`+name+`"]`, "extended resource name standard")
	}
}

func TestQuantitiesMustParseAndNotBeNegative(t *testing.T) {
	rejected(t, nil, map[string]any{"k": "not-a-quantity"}, `.limits["k"]`, "standard resource")
	rejected(t, nil, map[string]any{"cpu": "not-a-quantity"}, `.limits["cpu"]`, "must be a quantity")
	want := `spec.resources.limits["cpu"]: must be a quantity: a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E) or exponent (e3), such as 500m, 2 or 1.5Gi, got "x y"`
	if got := checkResources(t, nil, map[string]any{"cpu": "x y"}); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	rejected(t, map[string]any{"memory": "-1"}, nil, `.requests["memory"]`, "greater than or equal to 0")
	rejected(t, map[string]any{"memory": "10E"}, nil, `.requests["memory"]`, "at most 2^63-1")
}

func TestExtendedResourcesAreWholeAndNeedAnEqualLimit(t *testing.T) {
	const gpu = "example.com/gpu"
	rejected(t, nil, map[string]any{gpu: "500m"}, `.limits["example.com/gpu"]`, "whole units")
	rejected(t, map[string]any{gpu: "1"}, nil, `.limits["example.com/gpu"]`, "must be set")
	rejected(t, map[string]any{gpu: "1"}, map[string]any{gpu: "2"}, `.requests["example.com/gpu"]`, "must equal")
	accepted(t, map[string]any{gpu: "2"}, map[string]any{gpu: "2"})
	accepted(t, map[string]any{gpu: "1k"}, map[string]any{gpu: "1000"})
	// Native resources may be overcommitted, with or without a limit.
	accepted(t, map[string]any{"cpu": "1"}, map[string]any{"cpu": "2"})
	accepted(t, map[string]any{"cpu": "1", "kubernetes.io/x": "1"}, nil)
}

func TestARequestIsAtMostItsLimit(t *testing.T) {
	rejected(t, map[string]any{"cpu": "2"}, map[string]any{"cpu": "1"}, `.requests["cpu"]`, "at most the limit")
	want := `spec.resources.requests["cpu"]: must be at most the limit of cpu (1), got 1001m`
	if got := checkResources(t, map[string]any{"cpu": "1001m"}, map[string]any{"cpu": "1"}); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	accepted(t, map[string]any{"cpu": "1000m"}, map[string]any{"cpu": "1"})
	accepted(t, map[string]any{"memory": "1Gi"}, map[string]any{"memory": "1073741824"})
}

func TestHugePagesAreWholePagesWithAnEqualLimitAndCPUOrMemory(t *testing.T) {
	memory := map[string]any{"memory": "1Gi"}
	rejected(t, nil, map[string]any{"hugepages-x": "1"}, `.limits["hugepages-x"]`, "page size")
	rejected(t, nil, map[string]any{"hugepages-0": "1"}, `.limits["hugepages-0"]`, "page size")
	rejected(t, nil, map[string]any{"hugepages-1.5": "3"}, `.limits["hugepages-1.5"]`, "page size")
	const field = `.limits["hugepages-2Mi"]`
	rejected(t, nil, merged(map[string]any{"hugepages-2Mi": "3Mi"}, memory), field, "multiple of the page size 2Mi")
	huge := map[string]any{"hugepages-2Mi": "4Mi"}
	rejected(t, huge, memory, field, "must be set")
	rejected(t, map[string]any{"hugepages-2Mi": "2Mi"}, merged(huge, memory), `.requests["hugepages-2Mi"]`, "must equal")
	rejected(t, huge, huge, "", "huge pages require a cpu or memory")
	accepted(t, merged(huge, map[string]any{"cpu": "1"}), huge)
	accepted(t, huge, merged(huge, memory))
}

func TestClaimsAreRefusedThePodDeclaresNone(t *testing.T) {
	claims := []any{map[string]any{"name": "gpu"}, map[string]any{"name": `a"b`}}
	want := `spec.resources.claims: must be empty: a claim must name one of the pod's resourceClaims, and the pod declares none (got ["gpu", "a\"b"])`
	if got := invalidSpecMessage(t, "resources", map[string]any{"claims": claims}); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestTheValueIsWhatTheAPIServerStores(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resources map[string]any
		want      map[string]any
	}{
		{"empty", map[string]any{"claims": []any{}, "limits": map[string]any{}, "requests": map[string]any{}}, map[string]any{}},
		{"canonical", map[string]any{
			"requests": map[string]any{"cpu": "0.5", "memory": "1.5Gi"},
			"limits":   map[string]any{"cpu": "1000m"},
		}, map[string]any{
			"limits":   map[string]any{"cpu": "1"},
			"requests": map[string]any{"cpu": "500m", "memory": "1536Mi"},
		}},
		// From the Python tests: no resources give none; null is absent.
		{"nil", nil, nil},
		{"nulls", map[string]any{"claims": nil, "limits": nil, "requests": map[string]any{"cpu": "1"}},
			map[string]any{"requests": map[string]any{"cpu": "1"}}},
		// Lists made in Go.
		{"Go lists", map[string]any{"claims": []map[string]any{}, "limits": map[string]string{"memory": "1024Mi"}},
			map[string]any{"limits": map[string]any{"memory": "1Gi"}}},
	} {
		got, err := ValidateContainerResources("resources", tc.resources)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, %v, want %#v", tc.name, got, err, tc.want)
		}
	}
	if got := invalidSpecMessage(t, "x.res", map[string]any{"requests": map[string]any{"k": "1"}}); !strings.HasPrefix(got, `spec.x.res.requests["k"]: `) {
		t.Errorf("got %s", got)
	}
	// The first problem in the order of the names' bytes, limits before requests, as the Rust port.
	if got := checkResources(t, map[string]any{"b": "x", "a": "1"}, nil); !strings.Contains(got, `requests["a"]`) {
		t.Errorf("got %s", got)
	}
	if got := checkResources(t, map[string]any{"a": "1"}, map[string]any{"z": "1"}); !strings.Contains(got, `limits["z"]`) {
		t.Errorf("got %s", got)
	}
}

// From the Python tests: whole messages, byte for byte the Rust SDK's.
func TestResourceMessagesAreTheRustOnes(t *testing.T) {
	for _, tc := range []struct {
		field     string
		resources map[string]any
		want      string
	}{
		{"resources", map[string]any{"requests": map[string]any{"cpu": "1001m"}, "limits": map[string]any{"cpu": "1"}},
			`spec.resources.requests["cpu"]: must be at most the limit of cpu (1), got 1001m`},
		{"resources", map[string]any{"limits": map[string]any{"cpu": "x"}},
			`spec.resources.limits["cpu"]: must be a quantity: a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E) or exponent (e3), such as 500m, 2 or 1.5Gi, got "x"`},
		{"resources", map[string]any{"requests": map[string]any{"example.com/gpu": "1"}},
			`spec.resources.limits["example.com/gpu"]: must be set (to the request, 1): example.com/gpu cannot be overcommitted, so a request needs an equal limit`},
		{"resources", map[string]any{"limits": map[string]any{"a\"b\n": "1"}},
			`spec.resources.limits["a\"b\n"]: "a\"b\n" is not a resource name: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit`},
		{"c", map[string]any{"limits": map[string]any{"hugepages-2Mi": "2Mi"}},
			`spec.c: huge pages require a cpu or memory request or limit`},
		{"r", map[string]any{"claims": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}, map[string]any{}}},
			`spec.r.claims: must be empty: a claim must name one of the pod's resourceClaims, and the pod declares none (got ["a", "b", ""])`},
		// Beyond the Python vectors.
		{"r", map[string]any{"requests": map[string]any{"example.com/gpu": "1"}, "limits": map[string]any{"example.com/gpu": "2"}},
			`spec.r.requests["example.com/gpu"]: must equal the limit of example.com/gpu (2): example.com/gpu cannot be overcommitted, got 1`},
		{"r", map[string]any{"limits": map[string]any{"example.com/gpu": "1.5"}},
			`spec.r.limits["example.com/gpu"]: example.com/gpu is counted in whole units, got 1500m`},
		{"r", map[string]any{"limits": map[string]any{"hugepages-1m": "1", "memory": "1"}},
			`spec.r.limits["hugepages-1m"]: "hugepages-1m": the page size "1m" must be a positive whole quantity such as 2Mi`},
		{"r", map[string]any{"limits": map[string]any{"hugepages-2Mi": "3Mi", "memory": "1"}},
			`spec.r.limits["hugepages-2Mi"]: must be a whole multiple of the page size 2Mi, got 3Mi`},
		{"r", map[string]any{"requests": map[string]any{"memory": "-1.5Gi"}},
			`spec.r.requests["memory"]: must be greater than or equal to 0, got -1536Mi`},
		{"r", map[string]any{"requests": map[string]any{"memory": "1e19"}},
			`spec.r.requests["memory"]: must be at most 2^63-1 (9223372036854775807), got "1e19"`},
		{"r", map[string]any{"limits": map[string]any{"gpu": "1"}},
			`spec.r.limits["gpu"]: "gpu" must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or fully qualified (e.g. example.com/gpu)`},
		{"r", map[string]any{"limits": map[string]any{"requests.example.com/gpu": "1"}},
			`spec.r.limits["requests.example.com/gpu"]: "requests.example.com/gpu" does not follow the extended resource name standard (a domain of at most 244 characters, not starting with "requests.", '/', a name)`},
	} {
		if got := invalidSpecMessage(t, tc.field, tc.resources); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// From the Python tests (the JS SDK's decoder does the same): numbers are quantities as the
// Rust SDK reads them, and values of other types are refused with serde's words.
func TestNumbersAreQuantitiesAndOtherTypesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		value      any
		quantity   string
		canonical  string
		refusedHow string
	}{
		{"float64", 0.5, "", "500m", ""},
		{"float64 1.0", 1.0, "", "1", ""},
		{"float64 1e-7", 1e-7, "", "100n", ""},
		{"int", 1073741824, "", "1073741824", ""},
		{"int64", int64(2), "", "2", ""},
		{"uint8", uint8(3), "", "3", ""},
		{"float32", float32(0.1), "", "100m", ""},
		{"json.Number", json.Number("0.5"), "", "500m", ""},
		{"json.Number integer", json.Number("1073741824"), "", "1073741824", ""},
		{"json.Number exponent", json.Number("1e3"), "", "1k", ""},
		{"json.Number -0", json.Number("-0"), "", "0", ""},
		// Beyond u64 serde_json reads an f64, which Rust writes with its shortest digits.
		{"json.Number beyond u64", json.Number("18446744073709551616"), "", "",
			`must be at most 2^63-1 (9223372036854775807), got "18446744073709552000"`},
		{"json.Number 1e21", json.Number("1e21"), "", "", `got "1000000000000000000000"`},
		{"bool", true, "", "", "invalid type: boolean `true`, expected Quantity"},
		{"null", nil, "", "", "invalid type: null, expected Quantity"},
		{"list", []any{}, "", "", "invalid type: sequence, expected Quantity"},
		{"map", map[string]any{}, "", "", "invalid type: map, expected Quantity"},
	} {
		resources := map[string]any{"limits": map[string]any{"cpu": tc.value}}
		got, err := ValidateContainerResources("r", resources)
		if tc.refusedHow != "" {
			if err == nil || !strings.HasPrefix(err.Error(), `spec.r.limits["cpu"]: `) || !strings.Contains(err.Error(), tc.refusedHow) {
				t.Errorf("%s: got %v, %v, want an error with %s", tc.name, got, err, tc.refusedHow)
			}
			continue
		}
		want := map[string]any{"limits": map[string]any{"cpu": tc.canonical}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, %v, want %v", tc.name, got, err, want)
		}
	}
	for _, tc := range []struct {
		resources map[string]any
		want      string
	}{
		{map[string]any{"limits": []any{"cpu"}}, "spec.r.limits: invalid type: sequence, expected a map"},
		{map[string]any{"requests": json.Number("5")}, "spec.r.requests: invalid type: integer `5`, expected a map"},
		{map[string]any{"requests": json.Number("5.0")}, "spec.r.requests: invalid type: floating point `5.0`, expected a map"},
		{map[string]any{"requests": json.Number("1e16")}, "spec.r.requests: invalid type: floating point `1e+16`, expected a map"},
		// A Go number is what it is written as in JSON: 2.5 a float, 1e16 the integer 10000000000000000.
		{map[string]any{"requests": 2.5}, "spec.r.requests: invalid type: floating point `2.5`, expected a map"},
		{map[string]any{"requests": 1e16}, "spec.r.requests: invalid type: integer `10000000000000000`, expected a map"},
		{map[string]any{"requests": json.Number("1.5e-7")}, "spec.r.requests: invalid type: floating point `1.5e-7`, expected a map"},
		// serde_json reads -0 as a float, unlike the JS SDK (integer `0`).
		{map[string]any{"requests": json.Number("-0")}, "spec.r.requests: invalid type: floating point `-0.0`, expected a map"},
		{map[string]any{"requests": "1"}, `spec.r.requests: invalid type: string "1", expected a map`},
		{map[string]any{"claims": map[string]any{}}, "spec.r.claims: invalid type: map, expected a sequence"},
		{map[string]any{"claims": []any{"gpu"}}, `spec.r.claims[0]: invalid type: string "gpu", expected ResourceClaim`},
		{map[string]any{"claims": []any{map[string]any{"name": "a", "request": false}}}, "spec.r.claims[0].request: invalid type: boolean `false`, expected a string"},
		// Every field decodes before any is checked, as the spec decodes before a plugin checks it.
		{map[string]any{
			"claims":   []any{map[string]any{"name": "a"}},
			"limits":   map[string]any{"bad key": "1"},
			"requests": map[string]any{"cpu": false},
		}, "spec.r.requests[\"cpu\"]: invalid type: boolean `false`, expected Quantity"},
	} {
		if got := invalidSpecMessage(t, "r", tc.resources); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// A spec read as the SDK reads it (json.Decoder.UseNumber) gives the JSON the API server stores.
func TestResourcesReadWithUseNumber(t *testing.T) {
	text := `{"claims":[],"limits":{"cpu":1.5,"memory":"1Gi"},"requests":{"cpu":0.25,"memory":536870912,"hugepages-2Mi":"4Mi"},"extra":1}`
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.UseNumber()
	var resources map[string]any
	if err := decoder.Decode(&resources); err != nil {
		t.Fatal(err)
	}
	_, err := ValidateContainerResources("resources", resources)
	want := `spec.resources.limits["hugepages-2Mi"]: must be set (to the request, 4Mi): hugepages-2Mi cannot be overcommitted, so a request needs an equal limit`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	resources["limits"].(map[string]any)["hugepages-2Mi"] = json.Number("4194304")
	stored, err := ValidateContainerResources("resources", resources)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(stored)
	if want := `{"limits":{"cpu":"1500m","hugepages-2Mi":"4194304","memory":"1Gi"},"requests":{"cpu":"250m","hugepages-2Mi":"4Mi","memory":"536870912"}}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
