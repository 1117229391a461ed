// Tests of DebugString: the JS SDK's vectors, and its table checked against Go's Unicode data.

package operatorhost

import (
	"testing"
	"unicode"
)

func TestDebugString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bad image", `"bad image"`},
		{"a\"b\\c\n\t\r\x00", `"a\"b\\c\n\t\r\0"`},
		{"\u0001\u007f\u00a0\u200b\u0301é", `"\u{1}\u{7f}\u{a0}\u{200b}\u{301}é"`},
		// Beyond the JS vectors: what Rust leaves alone, and the other escapes.
		{"", `""`},
		{"it's ~ {ok}", `"it's ~ {ok}"`},
		{"\x1b[0m", `"\u{1b}[0m"`},
		{"日本語 🙂", `"日本語 🙂"`},
		{"\u2028\u3000\ufeff\U000e0001\U0010ffff", `"\u{2028}\u{3000}\u{feff}\u{e0001}\u{10ffff}"`},
		{"a\xffb", `"a\xffb"`},
	} {
		if got := DebugString(tc.in); got != tc.want {
			t.Errorf("DebugString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// Rust's set is Grapheme_Extend and the general categories Cc Cf Cs Co Cn Zl Zp Zs but ' '.
// Go's tables are of an older Unicode (and its C includes Cn), so the table is checked where
// Go knows the character: assigned characters agree but for Unicode 16's changes, and every
// character Go leaves unassigned that the table does not escape is one assigned since.
func TestRustDebugTableIsRustsSet(t *testing.T) {
	assigned := []*unicode.RangeTable{
		unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
		unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs,
	}
	escaped := []*unicode.RangeTable{
		unicode.Mn, unicode.Me, unicode.Other_Grapheme_Extend,
		unicode.Cc, unicode.Cf, unicode.Cs, unicode.Co, unicode.Zl, unicode.Zp, unicode.Zs,
	}
	// Unicode 16 made these spacing marks grapheme extenders, and U+1171E a spacing mark.
	changed := map[rune]bool{0x1171E: false}
	for _, r := range []rune{
		0x0CC0, 0x0CC7, 0x0CC8, 0x0CCA, 0x0CCB, 0x1715, 0x1734, 0x1B3B, 0x1B3D, 0x1B43, 0x1B44,
		0x1BAA, 0x1BF2, 0x1BF3, 0xA953, 0xA9C0, 0x111C0, 0x11235, 0x1134D, 0x116B6, 0x1193D,
		0x11F41, 0x16FF0, 0x16FF1, 0x1D166, 0x1D16D,
	} {
		changed[r] = true
	}
	newer := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		got := escapedByRustDebug(r)
		if !unicode.In(r, assigned...) {
			if !got {
				newer++
			}
			continue
		}
		want, ok := changed[r]
		if !ok {
			want = r != ' ' && unicode.In(r, escaped...)
		}
		if got != want {
			t.Errorf("U+%04X: escaped %v, want %v", r, got, want)
		}
	}
	t.Logf("%d characters assigned after Go's Unicode %s", newer, unicode.Version)
}
