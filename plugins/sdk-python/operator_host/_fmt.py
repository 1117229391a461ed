"""Texts written the way the Rust SDK writes them: Debug strings, float texts, serde's wording."""

from __future__ import annotations

import math

# Rust's `str` Debug escapes grapheme extenders: general categories Mn and Me plus
# Other_Grapheme_Extend, listed here because `unicodedata` has no such property. Python's
# Unicode tables (14.0 in 3.11) are older than Rust's, so characters assigned or changed
# since may be escaped differently: none can occur in a valid name.
_OTHER_GRAPHEME_EXTEND = (
    (0x09BE, 0x09BE), (0x09D7, 0x09D7), (0x0B3E, 0x0B3E), (0x0B57, 0x0B57),
    (0x0BBE, 0x0BBE), (0x0BD7, 0x0BD7), (0x0CC2, 0x0CC2), (0x0CD5, 0x0CD6),
    (0x0D3E, 0x0D3E), (0x0D57, 0x0D57), (0x0DCF, 0x0DCF), (0x0DDF, 0x0DDF),
    (0x1B35, 0x1B35), (0x200C, 0x200C), (0x302E, 0x302F), (0xFF9E, 0xFF9F),
    (0x1133E, 0x1133E), (0x11357, 0x11357), (0x114B0, 0x114B0), (0x114BD, 0x114BD),
    (0x115AF, 0x115AF), (0x11930, 0x11930), (0x1D165, 0x1D165), (0x1D16E, 0x1D172),
    (0xE0020, 0xE007F),
)

_ESCAPES = {"\0": "\\0", "\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"'}


def _is_grapheme_extended(c: str) -> bool:
    # Imported here: only non-ASCII text needs the tables, and a trimmed wasm build of
    # CPython may lack them.
    import unicodedata

    if unicodedata.category(c) in ("Mn", "Me"):
        return True
    code = ord(c)
    return any(low <= code <= high for low, high in _OTHER_GRAPHEME_EXTEND)


def _debug_str(s: str) -> str:
    """Rust's `{:?}` of a `str`: double-quoted, with Rust's escapes."""
    out = ['"']
    for c in s:
        escaped = _ESCAPES.get(c)
        if escaped is not None:
            out.append(escaped)
        elif c.isascii() and c.isprintable():
            out.append(c)
        elif not c.isprintable() or _is_grapheme_extended(c):
            # Python's "printable" is Rust's: everything but categories C* and Z* (bar ' ').
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _debug_list(items: list[str]) -> str:
    """Rust's `{:?}` of a `Vec<&str>`: `["a", "b"]`."""
    return "[" + ", ".join(_debug_str(item) for item in items) + "]"


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest digits that read back as the finite, non-zero `value` (sign dropped), and
    the decimal exponent of the first: `(d1 d2 ..., e)` for d1.d2... x 10^e.

    Python's `repr` and Rust's float printers all pick the shortest round-trip digits (the
    closest when several are as short); only their layouts differ.
    """
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    number = int(whole + fraction)
    power = int(exponent or 0) - len(fraction)
    while number % 10 == 0:
        number //= 10
        power += 1
    digits = str(number)
    return digits, power + len(digits) - 1


def _special(value: float, zero: str) -> str | None:
    """How Rust writes NaN, the infinities and zero (`zero`, signed), or None for the rest."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return ("-" if math.copysign(1.0, value) < 0 else "") + zero
    return None


def _plain(digits: str, exponent: int) -> str:
    """`digits` (d1 d2 ... for d1.d2... x 10^exponent) written without an exponent."""
    if len(digits) - 1 <= exponent:
        return digits + "0" * (exponent - len(digits) + 1)
    if exponent >= 0:
        return digits[: exponent + 1] + "." + digits[exponent + 1 :]
    return "0." + "0" * (-exponent - 1) + digits


def _json_float(value: float) -> str:
    """The text serde_json writes for an `f64` (zmij's layout: `1.0`, `0.00001`, `1e+16`,
    `1.5e-7`), or `NaN`, `inf`, `-inf` as serde's error messages write those."""
    special = _special(value, "0.0")
    if special is not None:
        return special
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(value)
    if -5 <= exponent <= 15:
        whole = len(digits) - 1 <= exponent
        return sign + _plain(digits, exponent) + (".0" if whole else "")
    body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return sign + body + "e" + ("+" if exponent >= 0 else "-") + str(abs(exponent))


def _display_f64(value: float) -> str:
    """Rust's `{}` of an `f64`: the shortest digits, never an exponent (`1`, `0.5`, `1e20`
    as `100000000000000000000`)."""
    special = _special(value, "0")
    if special is not None:
        return special
    return ("-" if value < 0 else "") + _plain(*_shortest_digits(value))


def _json_number(value: int) -> int | float:
    """`value` as serde_json holds a JSON integer: exact within i64/u64, else an `f64`."""
    if -(2**63) <= value < 2**64:
        return value
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _unexpected(value: object) -> str:
    """serde_json's words for a JSON value that has the wrong type (`integer `5``, `null`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        value = _json_number(value)
        if isinstance(value, int):
            return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{_json_float(value)}`"
    if isinstance(value, str):
        return f"string {_debug_str(value)}"
    if isinstance(value, (list, tuple)):
        return "sequence"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def _invalid_type(value: object, expected: str) -> str:
    """serde's message for `value` where `expected` was wanted."""
    return f"invalid type: {_unexpected(value)}, expected {expected}"
