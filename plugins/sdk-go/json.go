// JSON as the Rust SDK writes it: serde_json's text for a value, byte for byte, and a parser that keeps numbers as written.

package operatorhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CanonicalJSON is v as serde_json's to_string writes a serde_json::Value: object keys sorted
// by their UTF-8 bytes, no spaces, strings escaped as serde_json escapes them (`"`, `\`,
// \b \f \n \r \t, other control characters as \u00xx, everything else as it is). It is the
// text the Rust SDK hashes and answers, so equal values give equal hashes in every SDK.
//
// v is any value encoding/json accepts. Numbers are read as serde_json reads the text
// encoding/json writes for them: an integer that fits an i64 or u64 stays as written (so does
// an integral float64 such as 3.0, which encoding/json writes 3), any other number is an f64
// and written as serde_json writes one (`0.5`, `1e+21`, `1.5e-7`). To write an integral float
// as Rust does (`100.0`), give it as json.Number("100.0").
func CanonicalJSON(v any) (string, error) {
	var b strings.Builder
	if err := writeCanonical(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// ParseJSON parses one JSON value, as serde_json would: objects are map[string]any, arrays
// []any, numbers json.Number as written. Trailing characters other than white space, and a
// number no f64 holds (1e400), are errors; a syntax error says where as serde_json's do
// ("at line 1 column 2"), in encoding/json's words.
func ParseJSON(text string) (any, error) {
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		var syntax *json.SyntaxError
		switch {
		case errors.As(err, &syntax):
			return nil, fmt.Errorf("%s %s", syntax.Error(), jsonErrorPosition(text, int(syntax.Offset)))
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			// serde_json's words for input that stops too soon.
			return nil, fmt.Errorf("EOF while parsing a value %s", jsonErrorPosition(text, len(text)))
		}
		return nil, err
	}
	end := int(decoder.InputOffset())
	if rest := strings.TrimLeft(text[end:], " \t\n\r"); rest != "" {
		return nil, fmt.Errorf("trailing characters %s", jsonErrorPosition(text, len(text)-len(rest)+1))
	}
	if number, ok := numberOutOfRange(value); ok {
		return nil, fmt.Errorf("number out of range: %s", number)
	}
	return value, nil
}

// jsonErrorPosition is where offset (bytes from the start) is in text, as serde_json's errors say it.
func jsonErrorPosition(text string, offset int) string {
	offset = min(offset, len(text))
	lineStart := strings.LastIndexByte(text[:offset], '\n') + 1
	line := strings.Count(text[:lineStart], "\n") + 1
	return fmt.Sprintf("at line %d column %d", line, offset-lineStart)
}

// numberOutOfRange finds a number in value that overflows an f64, which serde_json refuses to read.
func numberOutOfRange(value any) (json.Number, bool) {
	switch v := value.(type) {
	case json.Number:
		if f, err := strconv.ParseFloat(string(v), 64); err != nil && math.IsInf(f, 0) {
			return v, true
		}
	case map[string]any:
		for _, item := range v {
			if n, ok := numberOutOfRange(item); ok {
				return n, true
			}
		}
	case []any:
		for _, item := range v {
			if n, ok := numberOutOfRange(item); ok {
				return n, true
			}
		}
	}
	return "", false
}

// writeCanonical writes v to b. The types ParseJSON makes are written directly; any other
// value goes through encoding/json first, so that it is written exactly as encoding/json
// would marshal it (struct tags, omitempty, Marshalers).
func writeCanonical(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		writeJSONString(b, v)
	case json.Number:
		return writeNumber(b, v)
	case map[string]any:
		if v == nil {
			b.WriteString("null")
			return nil
		}
		type member struct {
			key   string
			value any
		}
		members := make([]member, 0, len(v))
		for key, value := range v {
			members = append(members, member{coerceUTF8(key), value})
		}
		// Go compares strings by their bytes: the order of Rust's BTreeMap<String, _>.
		slices.SortFunc(members, func(x, y member) int { return strings.Compare(x.key, y.key) })
		b.WriteByte('{')
		for i, m := range members {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, m.key)
			b.WriteByte(':')
			if err := writeCanonical(b, m.value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		if v == nil {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, item); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		text, err := json.Marshal(v)
		if err != nil {
			return err
		}
		decoder := json.NewDecoder(bytes.NewReader(text))
		decoder.UseNumber()
		var decoded any
		if err := decoder.Decode(&decoded); err != nil {
			return err
		}
		return writeCanonical(b, decoded)
	}
	return nil
}

// writeNumber writes n as serde_json writes the number it reads from n's text.
func writeNumber(b *strings.Builder, n json.Number) error {
	text := string(n)
	if text == "" {
		// As encoding/json marshals an empty json.Number.
		text = "0"
	}
	if !isJSONNumber(text) {
		return fmt.Errorf("json: invalid number literal %q", text)
	}
	if !strings.ContainsAny(text, ".eE") {
		// serde_json keeps an integer that fits a u64 or an i64, but reads `-0` as the
		// float -0.0 and a wider integer as an f64.
		if _, err := strconv.ParseUint(text, 10, 64); err == nil {
			b.WriteString(text)
			return nil
		}
		if _, err := strconv.ParseInt(text, 10, 64); err == nil && text != "-0" {
			b.WriteString(text)
			return nil
		}
	}
	// An overflow is ±Inf (serde_json writes it as null), an underflow ±0 (what it reads).
	f, _ := strconv.ParseFloat(text, 64)
	b.WriteString(floatJSON(f))
	return nil
}

// isJSONNumber reports whether text is a JSON number (as encoding/json checks a json.Number).
func isJSONNumber(text string) bool {
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	return (text[0] == '-' || isDigit(text[0])) && isDigit(text[len(text)-1]) && json.Valid([]byte(text))
}

// floatJSON is x as serde_json writes an f64 value: null when it is not finite.
func floatJSON(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "null"
	}
	return serdeFloat(x)
}

// serdeFloat is x as serde_json writes an f64 (with zmij, its float formatter): `100.0`,
// `0.00001`, `1e-6`, `1e+16`, `1.5e-7`; `NaN`, `inf` and `-inf` as its error messages name
// the others.
func serdeFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	case x == 0:
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if x < 0 {
		sign = "-"
	}
	digits, point := shortestDigits(x)
	// Fixed notation for decimal exponents -5..=15, scientific beyond.
	exponent := point - 1
	if exponent >= -5 && exponent <= 15 {
		switch {
		case len(digits) <= point:
			return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
		case point > 0:
			return sign + digits[:point] + "." + digits[point:]
		default:
			return sign + "0." + strings.Repeat("0", -point) + digits
		}
	}
	mantissa := digits[:1]
	if len(digits) > 1 {
		mantissa += "." + digits[1:]
	}
	expSign := "+"
	if exponent < 0 {
		expSign = "-"
	}
	return sign + mantissa + "e" + expSign + strconv.Itoa(max(exponent, -exponent))
}

// shortestDigits is the finite non-zero x as x = ±0.d1d2... × 10^point, with the shortest
// digits that read back as x: what strconv, ryu and zmij all print.
func shortestDigits(x float64) (digits string, point int) {
	text := strconv.FormatFloat(math.Abs(x), 'e', -1, 64) // "1.2345e+20"
	mantissa, exponent, _ := strings.Cut(text, "e")
	e, _ := strconv.Atoi(exponent)
	return strings.Replace(mantissa, ".", "", 1), e + 1
}

// writeJSONString writes s as serde_json writes a string.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	s = coerceUTF8(s)
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// coerceUTF8 is s with each byte that is not UTF-8 replaced by U+FFFD, as encoding/json
// marshals it (a Rust string is always UTF-8).
func coerceUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
