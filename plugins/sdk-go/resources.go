// Container compute resources the API server accepts, in the form it stores them (a port of the Rust SDK's resources.rs: same rules, same messages).
//
// A plugin that copies a user's `resources` into a container must check what the API server
// checks of them (ValidateContainerResourceRequirements), or the child's apply fails with a
// 422 the user only sees as ApplyFailed; and it must write them as the API server stores them
// (no empty maps or lists, quantities in canonical form), or the live child never equals what
// the plugin applies. Arithmetic is exact, in big.Int, with the Rust port's i128 limits where
// they change a result.

package operatorhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

const (
	// quantityKeptDigits is how many significant digits are kept exactly; further digits
	// only round the value up.
	quantityKeptDigits = 30
	hugePagesPrefix    = "hugepages-"
	notAQuantity       = "must be a quantity: a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E) or exponent (e3), such as 500m, 2 or 1.5Gi"
	quantityTooLarge   = "must be at most 2^63-1 (9223372036854775807)"
)

var (
	errNotAQuantity     = errors.New(notAQuantity)
	errQuantityTooLarge = errors.New(quantityTooLarge)

	bigTen = big.NewInt(10)
	// bigNano is the units of a nano (10^-9): the finest precision a quantity keeps.
	bigNano = big.NewInt(1_000_000_000)
	// bigMaxNanos is the largest magnitude accepted, in nanos: 2^63-1 units.
	bigMaxNanos = new(big.Int).Mul(big.NewInt(math.MaxInt64), bigNano)
	// bigI128Max is i128::MAX, where the Rust port's checked arithmetic gives up.
	bigI128Max = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1))
)

// ValidateContainerResources checks resources, the compute resources of one container (a
// core/v1 ResourceRequirements as JSON), the way the API server does, and returns them as the
// API server stores them: empty claims, limits and requests left out, every quantity
// canonical (1.5 is 1500m, 1.5Gi is 1536Mi). nil resources give nil; resources with nothing
// in them give an empty map.
//
// field is the path under spec (e.g. "resources"); errors are *InvalidSpec naming the entry,
// e.g. `spec.resources.requests["k"]: ...`, with the Rust SDK's messages.
//
// Quantities may be strings or numbers (json.Number, as json.Decoder.UseNumber reads them, or
// any Go integer or float), read as the Rust SDK reads them: 0.5 is "0.5", 1e3 is "1000". A
// value of another type is refused with serde's words for it (invalid type: boolean `true`,
// expected Quantity), which the Rust and JS SDKs give when the spec fails to decode.
func ValidateContainerResources(field string, resources map[string]any) (map[string]any, error) {
	if resources == nil {
		return nil, nil
	}
	claims, limitsGiven, requestsGiven, err := decodeResourceRequirements(field, resources)
	if err != nil {
		return nil, err
	}
	if len(claims) > 0 {
		names := make([]string, len(claims))
		for i, name := range claims {
			names[i] = DebugString(name)
		}
		return nil, InvalidField(field+".claims", fmt.Sprintf(
			"must be empty: a claim must name one of the pod's resourceClaims, and the pod declares none (got [%s])",
			strings.Join(names, ", ")))
	}
	limits, err := parseResourceList(field+".limits", limitsGiven)
	if err != nil {
		return nil, err
	}
	requests, err := parseResourceList(field+".requests", requestsGiven)
	if err != nil {
		return nil, err
	}
	limitOf := make(map[string]parsedQuantity, len(limits))
	for _, entry := range limits {
		limitOf[entry.name] = entry.quantity
	}
	for _, entry := range requests {
		name, request := entry.name, entry.quantity
		at := field + ".requests[" + DebugString(name) + "]"
		limit, limited := limitOf[name]
		switch {
		case limited && !overcommitAllowed(name) && request.nanos.Cmp(limit.nanos) != 0:
			return nil, InvalidField(at, fmt.Sprintf(
				"must equal the limit of %s (%s): %s cannot be overcommitted, got %s",
				name, limit.canonical(), name, request.canonical()))
		case limited && request.nanos.Cmp(limit.nanos) > 0:
			return nil, InvalidField(at, fmt.Sprintf(
				"must be at most the limit of %s (%s), got %s", name, limit.canonical(), request.canonical()))
		case !limited && !overcommitAllowed(name):
			return nil, InvalidField(field+".limits["+DebugString(name)+"]", fmt.Sprintf(
				"must be set (to the request, %s): %s cannot be overcommitted, so a request needs an equal limit",
				request.canonical(), name))
		}
	}
	all := slices.Concat(limits, requests)
	hugePages := slices.ContainsFunc(all, func(e resourceEntry) bool { return isHugePages(e.name) })
	cpuOrMemory := slices.ContainsFunc(all, func(e resourceEntry) bool { return e.name == "cpu" || e.name == "memory" })
	if hugePages && !cpuOrMemory {
		return nil, InvalidField(field, "huge pages require a cpu or memory request or limit")
	}
	stored := map[string]any{}
	if len(limits) > 0 {
		stored["limits"] = canonicalResourceList(limits)
	}
	if len(requests) > 0 {
		stored["requests"] = canonicalResourceList(requests)
	}
	return stored, nil
}

// CanonicalQuantity is the canonical form of the Kubernetes quantity s (what the API server
// stores for it), or an error saying why s is not one.
//
// The grammar: an optional sign, digits with an optional decimal point (1, 1.5, .5, 1.), then
// a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal one (n u m k M G T P E), an exponent (e or E
// and a signed integer) or nothing. Values are kept to the nano, rounded up; magnitudes above
// 2^63-1 are refused.
func CanonicalQuantity(s string) (string, error) {
	q, err := parseQuantity(s)
	if err != nil {
		return "", err
	}
	return q.canonical(), nil
}

// resourceEntry is a resource's name and quantity; lists of them are in the order of the
// names' bytes, as the Rust port's BTreeMap visits them.
type resourceEntry struct {
	name     string
	quantity parsedQuantity
}

func canonicalResourceList(list []resourceEntry) map[string]any {
	out := make(map[string]any, len(list))
	for _, entry := range list {
		out[entry.name] = entry.quantity.canonical()
	}
	return out
}

// decodeResourceRequirements type-checks resources as k8s-openapi decodes a
// ResourceRequirements (fields in sorted order, as serde_json visits them; null is absent):
// the claims' names and the quantity texts of limits and requests.
func decodeResourceRequirements(field string, resources map[string]any) (claims []string, limits, requests map[string]string, err error) {
	if value := resources["claims"]; value != nil {
		if claims, err = decodeResourceClaims(field+".claims", value); err != nil {
			return nil, nil, nil, err
		}
	}
	if value := resources["limits"]; value != nil {
		if limits, err = decodeQuantities(field+".limits", value); err != nil {
			return nil, nil, nil, err
		}
	}
	if value := resources["requests"]; value != nil {
		if requests, err = decodeQuantities(field+".requests", value); err != nil {
			return nil, nil, nil, err
		}
	}
	return claims, limits, requests, nil
}

func decodeResourceClaims(path string, value any) ([]string, error) {
	var items []any
	switch v := value.(type) {
	case []any:
		items = v
	case []map[string]any:
		for _, item := range v {
			items = append(items, item)
		}
	default:
		return nil, InvalidField(path, serdeInvalidType(value, "a sequence"))
	}
	names := make([]string, 0, len(items))
	for i, item := range items {
		claim, ok := item.(map[string]any)
		if !ok {
			return nil, InvalidField(fmt.Sprintf("%s[%d]", path, i), serdeInvalidType(item, "ResourceClaim"))
		}
		// k8s-openapi reads a missing or null name as "".
		name := ""
		for _, key := range []string{"name", "request"} {
			v := claim[key]
			if v == nil {
				continue
			}
			text, ok := v.(string)
			if !ok {
				return nil, InvalidField(fmt.Sprintf("%s[%d].%s", path, i, key), serdeInvalidType(v, "a string"))
			}
			if key == "name" {
				name = text
			}
		}
		names = append(names, name)
	}
	return names, nil
}

// decodeQuantities is the quantity texts of a limits or requests map; numbers become texts
// as k8s-openapi's Quantity reads them.
func decodeQuantities(path string, value any) (map[string]string, error) {
	switch list := value.(type) {
	case map[string]string:
		return list, nil
	case map[string]any:
		texts := make(map[string]string, len(list))
		for _, name := range slices.Sorted(maps.Keys(list)) {
			text, ok := quantityText(list[name])
			if !ok {
				return nil, InvalidField(path+"["+DebugString(name)+"]", serdeInvalidType(list[name], "Quantity"))
			}
			texts[name] = text
		}
		return texts, nil
	}
	return nil, InvalidField(path, serdeInvalidType(value, "a map"))
}

// quantityText is value, a quantity, as k8s-openapi reads it: a string as it is, an integer
// in decimal, a float as Rust's Display writes an f64 (never an exponent).
func quantityText(value any) (string, bool) {
	if text, ok := value.(string); ok {
		return text, true
	}
	number, ok := jsonNumberOf(value)
	if !ok {
		return "", false
	}
	if integer, ok := serdeInteger(number); ok {
		return integer, true
	}
	f, err := strconv.ParseFloat(string(number), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		// Not a number at all (a json.Number made by hand): its text, which does not parse.
		return string(number), true
	}
	return rustDisplayFloat(f), true
}

// jsonNumberOf is value, a number, as the JSON text encoding/json writes for it.
func jsonNumberOf(value any) (json.Number, bool) {
	switch v := value.(type) {
	case json.Number:
		return v, true
	case float64, float32:
		text, err := json.Marshal(v)
		if err != nil {
			// NaN or an infinity, which JSON cannot hold: as Rust writes them.
			f := reflect.ValueOf(v).Float()
			return json.Number(rustDisplayFloat(f)), true
		}
		return json.Number(text), true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return json.Number(fmt.Sprint(v)), true
	}
	return "", false
}

// serdeInteger is number in decimal when serde_json reads it as an integer: written without
// a fraction or exponent, within i64 or u64, and not -0. Other numbers it reads as an f64.
func serdeInteger(number json.Number) (string, bool) {
	text := string(number)
	if strings.ContainsAny(text, ".eE") {
		return "", false
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		if i == 0 && strings.HasPrefix(text, "-") {
			return "", false
		}
		return strconv.FormatInt(i, 10), true
	}
	if u, err := strconv.ParseUint(text, 10, 64); err == nil {
		return strconv.FormatUint(u, 10), true
	}
	return "", false
}

// serdeInvalidType is serde's message for value where expected was wanted.
func serdeInvalidType(value any, expected string) string {
	return "invalid type: " + serdeUnexpected(value) + ", expected " + expected
}

// serdeUnexpected is serde's description of a JSON value of the wrong type: `null`,
// "boolean `true`", `string "x"`, "integer `5`", "floating point `1.5`", `sequence`, `map`.
func serdeUnexpected(value any) string {
	switch v := value.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean `%t`", v)
	case string:
		return "string " + DebugString(v)
	}
	if number, ok := jsonNumberOf(value); ok {
		if integer, ok := serdeInteger(number); ok {
			return "integer `" + integer + "`"
		}
		f, _ := strconv.ParseFloat(string(number), 64)
		return "floating point `" + serdeFloat(f) + "`"
	}
	switch reflect.ValueOf(value).Kind() {
	case reflect.Slice, reflect.Array:
		return "sequence"
	}
	return "map"
}

// rustDisplayFloat is f as Rust's Display writes an f64: the shortest digits that read back,
// never an exponent (1e21 is 1000000000000000000000), 1 for 1.0.
func rustDisplayFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// parseResourceList parses and checks the quantities of a limits or requests map, field its
// path, giving them in the order of their names' bytes.
func parseResourceList(field string, list map[string]string) ([]resourceEntry, error) {
	parsed := make([]resourceEntry, 0, len(list))
	for _, name := range slices.Sorted(maps.Keys(list)) {
		text := list[name]
		at := field + "[" + DebugString(name) + "]"
		if why := checkResourceName(name); why != "" {
			return nil, InvalidField(at, why)
		}
		value, err := parseQuantity(text)
		if err != nil {
			return nil, InvalidField(at, err.Error()+", got "+DebugString(text))
		}
		if why := checkQuantityValue(name, value); why != "" {
			return nil, InvalidField(at, why)
		}
		parsed = append(parsed, resourceEntry{name, value})
	}
	return parsed, nil
}

func isHugePages(name string) bool {
	return strings.HasPrefix(name, hugePagesPrefix)
}

// isNativeResource reports a resource in the kubernetes.io namespace: unqualified, or with
// kubernetes.io/ in it.
func isNativeResource(name string) bool {
	return !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/")
}

// overcommitAllowed reports whether a request may be below its limit: for native resources
// except huge pages.
func overcommitAllowed(name string) bool {
	return isNativeResource(name) && !isHugePages(name)
}

// isExtendedResource reports a qualified name outside kubernetes.io (example.com/gpu), which
// the API server checks again as the quota name requests.<name>.
func isExtendedResource(name string) bool {
	return !isNativeResource(name) && !strings.HasPrefix(name, "requests.") && isQualifiedName("requests."+name)
}

// checkResourceName is why name is not a container's resource name, or "".
func checkResourceName(name string) string {
	if !isQualifiedName(name) {
		return DebugString(name) + " is not a resource name: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
	}
	if !strings.Contains(name, "/") {
		if !slices.Contains([]string{"cpu", "memory", "ephemeral-storage"}, name) && !isHugePages(name) {
			return DebugString(name) + " must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or fully qualified (e.g. example.com/gpu)"
		}
	} else if !isNativeResource(name) && !isExtendedResource(name) {
		return DebugString(name) + ` does not follow the extended resource name standard (a domain of at most 244 characters, not starting with "requests.", '/', a name)`
	}
	return ""
}

// checkQuantityValue is why value is not a quantity of the resource name, or "".
func checkQuantityValue(name string, value parsedQuantity) string {
	if value.nanos.Sign() < 0 {
		return "must be greater than or equal to 0, got " + value.canonical()
	}
	if isExtendedResource(name) && !value.whole() {
		return name + " is counted in whole units, got " + value.canonical()
	}
	if size, ok := strings.CutPrefix(name, hugePagesPrefix); ok {
		page, err := parseQuantity(size)
		if err != nil || page.nanos.Sign() <= 0 || !page.whole() {
			return DebugString(name) + ": the page size " + DebugString(size) + " must be a positive whole quantity such as 2Mi"
		}
		// The API server compares whole units, the quantity's rounded up.
		units := new(big.Int).Add(value.nanos, bigNano)
		units.Sub(units, big.NewInt(1)).Quo(units, bigNano)
		pageUnits := new(big.Int).Quo(page.nanos, bigNano)
		if units.Rem(units, pageUnits).Sign() != 0 {
			return "must be a whole multiple of the page size " + page.canonical() + ", got " + value.canonical()
		}
	}
	return ""
}

// isQualifiedName is IsQualifiedName: [prefix/]name, the prefix a DNS-1123 subdomain, the
// name at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends.
func isQualifiedName(value string) bool {
	prefix, name, qualified := strings.Cut(value, "/")
	if !qualified {
		name = value
	}
	if name == "" || len(name) > 63 || !isASCIIAlphanumeric(rune(name[0])) || !isASCIIAlphanumeric(rune(name[len(name)-1])) {
		return false
	}
	for _, c := range []byte(name) {
		if !isASCIIAlphanumeric(rune(c)) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return !qualified || isDNSSubdomain(prefix)
}

func isDNSSubdomain(value string) bool {
	if value == "" || len(value) > 253 {
		return false
	}
	for _, label := range strings.Split(value, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// quantityFormat is how a quantity is written, which its canonical form keeps.
type quantityFormat uint8

const (
	quantityDecimalSI       quantityFormat = iota // n ... E, or no suffix
	quantityBinarySI                              // Ki ... Ei
	quantityDecimalExponent                       // e<n> or E<n>
)

// parsedQuantity is a quantity's value in nanos (exact, rounded up to the nano) and format.
type parsedQuantity struct {
	nanos  *big.Int
	format quantityFormat
}

// whole reports a quantity of whole units.
func (q parsedQuantity) whole() bool {
	return new(big.Int).Rem(q.nanos, bigNano).Sign() == 0
}

type quantitySuffix struct {
	format   quantityFormat
	binary   uint  // the value is multiplied by 2^binary
	exponent int64 // and by 10^exponent
}

var quantitySuffixes = map[string]quantitySuffix{
	"Ki": {quantityBinarySI, 10, 0},
	"Mi": {quantityBinarySI, 20, 0},
	"Gi": {quantityBinarySI, 30, 0},
	"Ti": {quantityBinarySI, 40, 0},
	"Pi": {quantityBinarySI, 50, 0},
	"Ei": {quantityBinarySI, 60, 0},
	"n":  {quantityDecimalSI, 0, -9},
	"u":  {quantityDecimalSI, 0, -6},
	"m":  {quantityDecimalSI, 0, -3},
	"":   {quantityDecimalSI, 0, 0},
	"k":  {quantityDecimalSI, 0, 3},
	"M":  {quantityDecimalSI, 0, 6},
	"G":  {quantityDecimalSI, 0, 9},
	"T":  {quantityDecimalSI, 0, 12},
	"P":  {quantityDecimalSI, 0, 15},
	"E":  {quantityDecimalSI, 0, 18},
}

// pow10 is 10^n when it fits an i128 (n <= 38), as the Rust port's checked_pow.
func pow10(n int64) (*big.Int, bool) {
	if n < 0 || n > 38 {
		return nil, false
	}
	return new(big.Int).Exp(bigTen, big.NewInt(n), nil), true
}

func parseQuantity(text string) (parsedQuantity, error) {
	i := 0
	negative := false
	if text != "" && (text[0] == '-' || text[0] == '+') {
		negative = text[0] == '-'
		i++
	}
	// The number: digits, an optional point and digits, at least one digit in all.
	mantissa := new(big.Int)
	significant, digits := 0, 0
	var scale int64 // value = mantissa * 10^scale
	sticky := false // a non-zero digit beyond quantityKeptDigits was dropped
	point := false
scan:
	for ; i < len(text); i++ {
		switch c := text[i]; {
		case '0' <= c && c <= '9':
			digits++
			d := int64(c - '0')
			if significant < quantityKeptDigits {
				mantissa.Mul(mantissa, bigTen).Add(mantissa, big.NewInt(d))
				if mantissa.Sign() != 0 {
					significant++
				}
				if point {
					scale--
				}
			} else {
				sticky = sticky || d != 0
				if !point {
					scale++
				}
			}
		case c == '.' && !point:
			point = true
		default:
			break scan
		}
	}
	if digits == 0 {
		return parsedQuantity{}, errNotAQuantity
	}
	suffix, known := quantitySuffixes[text[i:]]
	if !known {
		exponent, ok := parseQuantityExponent(text[i:])
		if !ok {
			return parsedQuantity{}, errNotAQuantity
		}
		suffix = quantitySuffix{quantityDecimalExponent, 0, exponent}
	}
	// nanos = mantissa * 2^binary * 10^(scale + exponent + 9), rounded up.
	shift := scale + suffix.exponent + 9
	value := mantissa
	if suffix.binary > 0 {
		// Make room by dropping digits that the division below would drop anyway.
		product := new(big.Int)
		remainder := new(big.Int)
		for product.Lsh(value, suffix.binary).Cmp(bigI128Max) > 0 && shift < 0 {
			value.QuoRem(value, bigTen, remainder)
			sticky = sticky || remainder.Sign() != 0
			shift++
		}
		value.Lsh(value, suffix.binary)
		if value.Cmp(bigI128Max) > 0 {
			return parsedQuantity{}, errQuantityTooLarge
		}
	}
	if shift >= 0 {
		if value.Sign() != 0 {
			factor, ok := pow10(shift)
			if !ok {
				return parsedQuantity{}, errQuantityTooLarge
			}
			if value.Mul(value, factor).Cmp(bigI128Max) > 0 {
				return parsedQuantity{}, errQuantityTooLarge
			}
		}
	} else if divisor, ok := pow10(-shift); ok {
		remainder := new(big.Int)
		value.QuoRem(value, divisor, remainder)
		sticky = sticky || remainder.Sign() != 0
	} else {
		sticky = sticky || value.Sign() != 0
		value.SetInt64(0)
	}
	if sticky {
		value.Add(value, big.NewInt(1))
	}
	if value.Cmp(bigMaxNanos) > 0 {
		return parsedQuantity{}, errQuantityTooLarge
	}
	if negative {
		value.Neg(value)
	}
	return parsedQuantity{value, suffix.format}, nil
}

// parseQuantityExponent is the exponent of a suffix e<n> or E<n> (n a signed integer), capped
// at ±1000 as the Rust port does: beyond that, a quantity is out of range either way.
func parseQuantityExponent(suffix string) (int64, bool) {
	if suffix == "" || suffix[0] != 'e' && suffix[0] != 'E' {
		return 0, false
	}
	number := suffix[1:]
	sign := int64(1)
	if number != "" && (number[0] == '-' || number[0] == '+') {
		if number[0] == '-' {
			sign = -1
		}
		number = number[1:]
	}
	if number == "" || strings.ContainsFunc(number, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, false
	}
	var magnitude int64
	if trimmed := strings.TrimLeft(number, "0"); len(trimmed) > 4 {
		magnitude = 1000
	} else if trimmed != "" {
		magnitude, _ = strconv.ParseInt(trimmed, 10, 64)
		magnitude = min(magnitude, 1000)
	}
	return sign * magnitude, true
}

// canonical is the API server's canonical form: no precision lost, no fractional digits, the
// largest suffix of the quantity's format that allows that (a binary quantity below 1024 or
// with a fraction is written decimal).
func (q parsedQuantity) canonical() string {
	if q.nanos.Sign() == 0 {
		return "0"
	}
	sign := ""
	if q.nanos.Sign() < 0 {
		sign = "-"
	}
	magnitude := new(big.Int).Abs(q.nanos)
	if q.format == quantityBinarySI && q.whole() {
		// At most 2^63-1 units: a uint64.
		units := new(big.Int).Quo(magnitude, bigNano).Uint64()
		if units >= 1024 {
			power := 0
			for units%1024 == 0 && power < 6 {
				units /= 1024
				power++
			}
			return sign + strconv.FormatUint(units, 10) + []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}[power]
		}
	}
	// Decimal: strip the factors of 10, then lower the exponent to a multiple of 3.
	mantissa := magnitude.String()
	exponent := -9
	for strings.HasSuffix(mantissa, "0") {
		mantissa = mantissa[:len(mantissa)-1]
		exponent++
	}
	for (exponent%3+3)%3 != 0 {
		mantissa += "0"
		exponent--
	}
	var suffix string
	if q.format == quantityDecimalExponent {
		if exponent != 0 {
			suffix = "e" + strconv.Itoa(exponent)
		}
	} else {
		// At most 2^63-1 units and at least a nano: -9 <= exponent <= 18.
		suffix = []string{"n", "u", "m", "", "k", "M", "G", "T", "P", "E"}[(exponent+9)/3]
	}
	return sign + mantissa + suffix
}
