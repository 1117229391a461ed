"""Container resources (core/v1 ResourceRequirements) checked and written as the API server does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Optional

from ._fmt import _debug_list, _debug_str, _display_f64, _invalid_type, _json_number
from .errors import InvalidSpec, invalid_field

# Units of a nano (10^-9): the finest precision a Kubernetes quantity keeps.
_NANO = 1_000_000_000
# The largest magnitude accepted, in nanos: 2^63-1 units, what a Kubernetes quantity can hold.
_I64_MAX = 2**63 - 1
_MAX_NANOS = _I64_MAX * _NANO
# Significant digits of a number kept exactly; further digits only round the value up. The
# arithmetic below mirrors the Rust code's i128 (overflow checks included), so even absurd
# quantities give the Rust results.
_KEPT_DIGITS = 30
_I128_MIN = -(2**127)
_I128_MAX = 2**127 - 1
_U32_MAX = 2**32 - 1

# How a quantity is written, which its canonical form keeps.
_BINARY_SI = "BinarySI"  # Ki ... Ei
_DECIMAL_SI = "DecimalSI"  # n ... E, or no suffix
_DECIMAL_EXPONENT = "DecimalExponent"  # e<n> / E<n>

_SUFFIXES: dict[str, tuple[str, int, int]] = {
    "Ki": (_BINARY_SI, 10, 0),
    "Mi": (_BINARY_SI, 20, 0),
    "Gi": (_BINARY_SI, 30, 0),
    "Ti": (_BINARY_SI, 40, 0),
    "Pi": (_BINARY_SI, 50, 0),
    "Ei": (_BINARY_SI, 60, 0),
    "n": (_DECIMAL_SI, 0, -9),
    "u": (_DECIMAL_SI, 0, -6),
    "m": (_DECIMAL_SI, 0, -3),
    "": (_DECIMAL_SI, 0, 0),
    "k": (_DECIMAL_SI, 0, 3),
    "M": (_DECIMAL_SI, 0, 6),
    "G": (_DECIMAL_SI, 0, 9),
    "T": (_DECIMAL_SI, 0, 12),
    "P": (_DECIMAL_SI, 0, 15),
    "E": (_DECIMAL_SI, 0, 18),
}

_NOT_A_QUANTITY = (
    "must be a quantity: a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m,"
    " k, M, G, T, P, E) or exponent (e3), such as 500m, 2 or 1.5Gi"
)
_TOO_LARGE = "must be at most 2^63-1 (9223372036854775807)"

_STANDARD = ("cpu", "memory", "ephemeral-storage")
_HUGE_PAGES_PREFIX = "hugepages-"
_DIGITS = frozenset("0123456789")
_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NAME_BYTES = _ALNUM | frozenset("-_.")
_LABEL_BYTES = frozenset("0123456789abcdefghijklmnopqrstuvwxyz-")


class _Parsed(NamedTuple):
    """A parsed quantity: its value in nanos (exact, rounded up to the nano) and its format."""

    nanos: int
    format: str

    def canonical(self) -> str:
        """The API server's canonical form: no precision lost, no fractional digits, the
        largest suffix of the quantity's format that allows that (a binary quantity below
        1024 or with a fraction is written decimal)."""
        if self.nanos == 0:
            return "0"
        sign = "-" if self.nanos < 0 else ""
        magnitude = abs(self.nanos)
        if self.format == _BINARY_SI and magnitude >= 1024 * _NANO and magnitude % _NANO == 0:
            units = magnitude // _NANO
            power = 0
            while units % 1024 == 0 and power < 6:
                units //= 1024
                power += 1
            suffix = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")[power]
            return f"{sign}{units}{suffix}"
        # Decimal: strip the factors of 10, then lower the exponent to a multiple of 3.
        mantissa = magnitude
        exponent = -9
        while mantissa % 10 == 0:
            mantissa //= 10
            exponent += 1
        while exponent % 3 != 0:
            mantissa *= 10
            exponent -= 1
        if self.format == _DECIMAL_EXPONENT:
            suffix = "" if exponent == 0 else f"e{exponent}"
        else:
            # At most 2^63-1 units and at least a nano: -9 <= exponent <= 18.
            suffix = ("n", "u", "m", "", "k", "M", "G", "T", "P", "E")[(exponent + 9) // 3]
        return f"{sign}{mantissa}{suffix}"


def validate_container_resources(field: str, resources: Optional[Mapping]) -> Optional[dict]:
    """Checks `resources`, the compute resources of one container (the JSON form of a
    ResourceRequirements), the way the API server does
    (`ValidateContainerResourceRequirements`), and returns them as the API server stores
    them: empty `claims`, `limits` and `requests` left out, every quantity in canonical form
    (`1.5` is `1500m`, `1.5Gi` is `1536Mi`). `None` (no resources given) gives `None`;
    resources with nothing in them give `{}`.

    `field` is the path of the value under `spec` (e.g. `"resources"`); errors are
    `InvalidSpec` naming the entry, e.g. `spec.resources.requests["k"]: ...`.

    The rules (those of a container in a pod that declares no resource claims):
    - a name is `cpu`, `memory`, `ephemeral-storage`, `hugepages-<page size>`, or fully
      qualified (`example.com/gpu`: a DNS subdomain, `/`, a name of at most 63 letters,
      digits, `-`, `_`, `.`); names in a `kubernetes.io/` domain are native (no further
      rules), any other qualified name is an extended resource;
    - a quantity parses as a Kubernetes quantity, is not negative and at most 2^63-1; an
      extended resource's is a whole number; a huge page quantity is a multiple of the page
      size (itself a positive whole number);
    - a request is at most its limit; for resources that cannot be overcommitted (huge pages
      and extended resources) a limit must be set and the request must equal it;
    - huge pages need a `cpu` or `memory` request or limit;
    - `claims` is empty: they must name the pod's `resourceClaims`, which the plugin's pods
      do not declare.

    Why both: a plugin that copies a user's `resources` into a container unchecked gets a 422
    on the child's apply, which the user only sees as `ApplyFailed`; one that writes them
    otherwise than the API server stores them never sees the live child equal what it applies.
    (A port of the Rust SDK's `resources.rs`: same rules, messages and canonical forms.)

    A value of the wrong JSON type is refused with serde's words for it (`invalid type:
    ...`), where the Rust SDK would have failed to decode the spec.
    """
    if resources is None:
        return None
    claims, limits_given, requests_given = _decode_requirements(field, resources)
    if claims:
        raise _invalid_field(
            f"{field}.claims",
            "must be empty: a claim must name one of the pod's resourceClaims, and the pod"
            f" declares none (got {_debug_list(claims)})",
        )
    limits = _parse_list(f"{field}.limits", limits_given)
    requests = _parse_list(f"{field}.requests", requests_given)
    for name, request in requests.items():
        at = f"{field}.requests[{_debug_str(name)}]"
        limit = limits.get(name)
        if limit is not None:
            if not _overcommit_allowed(name) and request.nanos != limit.nanos:
                raise _invalid_field(
                    at,
                    f"must equal the limit of {name} ({limit.canonical()}): {name} cannot be"
                    f" overcommitted, got {request.canonical()}",
                )
            if request.nanos > limit.nanos:
                raise _invalid_field(
                    at,
                    f"must be at most the limit of {name} ({limit.canonical()}),"
                    f" got {request.canonical()}",
                )
        elif not _overcommit_allowed(name):
            raise _invalid_field(
                f"{field}.limits[{_debug_str(name)}]",
                f"must be set (to the request, {request.canonical()}): {name} cannot be"
                " overcommitted, so a request needs an equal limit",
            )
    names = [*limits, *requests]
    if any(_is_huge_pages(n) for n in names) and not any(n in ("cpu", "memory") for n in names):
        raise _invalid_field(field, "huge pages require a cpu or memory request or limit")
    # The Rust struct serializes without its `None` fields: no key for an empty list.
    stored: dict = {}
    if limits:
        stored["limits"] = {name: q.canonical() for name, q in limits.items()}
    if requests:
        stored["requests"] = {name: q.canonical() for name, q in requests.items()}
    return stored


def canonical_quantity(quantity: str) -> str:
    """The canonical form of the quantity `quantity` (what the API server stores for it);
    raises `ValueError` saying why it is not a Kubernetes quantity.

    The grammar: an optional sign, digits with an optional decimal point (`1`, `1.5`, `.5`,
    `1.`), then a binary suffix (`Ki` `Mi` `Gi` `Ti` `Pi` `Ei`), a decimal one (`n` `u` `m`
    `k` `M` `G` `T` `P` `E`), an exponent (`e` or `E` and a signed integer) or nothing.
    Values are kept to the nano, rounded up; magnitudes above 2^63-1 are refused.
    """
    return _parse_quantity(quantity).canonical()


def _invalid_field(path: str, expected: str) -> InvalidSpec:
    # Rust's `Error::invalid_field`, with the field apart for `Validation.check`.
    return invalid_field(path, expected)


def _decode_requirements(
    field: str, resources: object
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The claim names, limits and requests of `resources`, type-checked the way k8s-openapi
    decodes a ResourceRequirements (keys in the sorted order serde_json visits them)."""
    if not isinstance(resources, Mapping):
        raise _invalid_field(field, _invalid_type(resources, "ResourceRequirements"))
    claims: list[str] = []
    lists: dict[str, dict[str, str]] = {"limits": {}, "requests": {}}
    for key in sorted(k for k in resources if isinstance(k, str)):
        value = resources[key]
        if value is None or key not in ("claims", "limits", "requests"):
            continue
        if key == "claims":
            claims = _decode_claims(f"{field}.claims", value)
        else:
            lists[key] = _decode_quantities(f"{field}.{key}", value)
    return claims, lists["limits"], lists["requests"]


def _decode_claims(path: str, claims: object) -> list[str]:
    if not isinstance(claims, (list, tuple)):
        raise _invalid_field(path, _invalid_type(claims, "a sequence"))
    names = []
    for index, claim in enumerate(claims):
        if not isinstance(claim, Mapping):
            raise _invalid_field(f"{path}[{index}]", _invalid_type(claim, "ResourceClaim"))
        name = ""
        for key in sorted(k for k in claim if k in ("name", "request")):
            value = claim[key]
            if value is not None and not isinstance(value, str):
                raise _invalid_field(f"{path}[{index}].{key}", _invalid_type(value, "a string"))
            if key == "name" and value is not None:
                name = value
        names.append(name)
    return names


def _decode_quantities(path: str, entries: object) -> dict[str, str]:
    """The quantity texts of a `limits` or `requests` map, sorted by name; numbers become
    texts the way k8s-openapi's Quantity reads them (an `f64` with Rust's `{}`)."""
    if not isinstance(entries, Mapping):
        raise _invalid_field(path, _invalid_type(entries, "a map"))
    for name in entries:
        if not isinstance(name, str):
            raise _invalid_field(path, _invalid_type(name, "a string"))
    texts: dict[str, str] = {}
    for name in sorted(entries):
        value = entries[name]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise _invalid_field(f"{path}[{_debug_str(name)}]", _invalid_type(value, "Quantity"))
        if isinstance(value, int):
            value = _json_number(value)
        if isinstance(value, str):
            texts[name] = value
        elif isinstance(value, int):
            texts[name] = str(value)
        else:
            texts[name] = _display_f64(value)
    return texts


def _parse_list(field: str, entries: dict[str, str]) -> dict[str, _Parsed]:
    parsed: dict[str, _Parsed] = {}
    for name, quantity in entries.items():
        at = f"{field}[{_debug_str(name)}]"
        why = _check_name(name)
        if why is not None:
            raise _invalid_field(at, why)
        try:
            value = _parse_quantity(quantity)
        except ValueError as e:
            raise _invalid_field(at, f"{e}, got {_debug_str(quantity)}") from None
        why = _check_value(name, value)
        if why is not None:
            raise _invalid_field(at, why)
        parsed[name] = value
    return parsed


def _is_huge_pages(name: str) -> bool:
    return name.startswith(_HUGE_PAGES_PREFIX)


def _is_native(name: str) -> bool:
    """A resource in the `kubernetes.io` namespace: unqualified, or with `kubernetes.io/` in it."""
    return "/" not in name or "kubernetes.io/" in name


def _overcommit_allowed(name: str) -> bool:
    """A request may be below its limit: native resources except huge pages."""
    return _is_native(name) and not _is_huge_pages(name)


def _is_extended(name: str) -> bool:
    """A qualified name outside `kubernetes.io` (e.g. `example.com/gpu`), which the API
    server checks again as the quota name `requests.<name>`."""
    return (
        not _is_native(name)
        and not name.startswith("requests.")
        and _is_qualified_name(f"requests.{name}")
    )


def _check_name(name: str) -> Optional[str]:
    """Why `name` is not a container resource name, or None."""
    if not _is_qualified_name(name):
        return (
            f"{_debug_str(name)} is not a resource name: an optional DNS subdomain and '/', then"
            " at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter"
            " or digit"
        )
    if "/" not in name:
        if not (name in _STANDARD or _is_huge_pages(name)):
            return (
                f"{_debug_str(name)} must be a standard resource for containers (cpu, memory,"
                " ephemeral-storage, hugepages-<size>) or fully qualified (e.g. example.com/gpu)"
            )
    elif not _is_native(name) and not _is_extended(name):
        return (
            f"{_debug_str(name)} does not follow the extended resource name standard (a domain"
            ' of at most 244 characters, not starting with "requests.", \'/\', a name)'
        )
    return None


def _check_value(name: str, value: _Parsed) -> Optional[str]:
    """Why `value` is not a valid quantity of the resource `name`, or None."""
    if value.nanos < 0:
        return f"must be greater than or equal to 0, got {value.canonical()}"
    if _is_extended(name) and value.nanos % _NANO != 0:
        return f"{name} is counted in whole units, got {value.canonical()}"
    if _is_huge_pages(name):
        size = name[len(_HUGE_PAGES_PREFIX) :]
        try:
            page: Optional[_Parsed] = _parse_quantity(size)
        except ValueError:
            page = None
        if page is None or not (page.nanos > 0 and page.nanos % _NANO == 0):
            return (
                f"{_debug_str(name)}: the page size {_debug_str(size)} must be a positive whole"
                " quantity such as 2Mi"
            )
        # The API server compares whole units, the quantity's rounded up.
        if (value.nanos + _NANO - 1) // _NANO % (page.nanos // _NANO) != 0:
            return (
                f"must be a whole multiple of the page size {page.canonical()},"
                f" got {value.canonical()}"
            )
    return None


def _is_qualified_name(value: str) -> bool:
    """`IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name at most
    63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends."""
    prefix: Optional[str]
    if "/" in value:
        prefix, name = value.split("/", 1)
    else:
        prefix, name = None, value
    # Rust counts bytes, but any non-ASCII character fails the character test anyway.
    name_ok = (
        0 < len(name) <= 63
        and name[0] in _ALNUM
        and name[-1] in _ALNUM
        and all(c in _NAME_BYTES for c in name)
    )
    return name_ok and (prefix is None or _is_dns_subdomain(prefix))


def _is_dns_subdomain(value: str) -> bool:
    def label_ok(label: str) -> bool:
        return (
            label != ""
            and all(c in _LABEL_BYTES for c in label)
            and not label.startswith("-")
            and not label.endswith("-")
        )

    return value != "" and len(value) <= 253 and all(label_ok(l) for l in value.split("."))


def _checked_mul(a: int, b: int) -> Optional[int]:
    # Rust's `i128::checked_mul`.
    product = a * b
    return product if _I128_MIN <= product <= _I128_MAX else None


def _checked_pow10(exponent: int) -> Optional[int]:
    # `u32::try_from(exponent).ok().and_then(|s| 10i128.checked_pow(s))`.
    if not 0 <= exponent <= _U32_MAX or exponent > 38:
        return None
    return 10**exponent


def _parse_quantity(text: str) -> _Parsed:
    """`text` parsed as a quantity; raises `ValueError` with the Rust message if it is not one."""
    i = 0
    negative = False
    if text[:1] == "-":
        i, negative = 1, True
    elif text[:1] == "+":
        i = 1
    # The number: digits, an optional point and digits, at least one digit in all.
    mantissa = 0
    significant = 0
    scale = 0  # value = mantissa * 10^scale
    sticky = False  # a non-zero digit beyond _KEPT_DIGITS was dropped
    digits = 0
    point = False
    while i < len(text):
        c = text[i]
        if c in _DIGITS:
            digits += 1
            d = ord(c) - ord("0")
            if significant < _KEPT_DIGITS:
                mantissa = mantissa * 10 + d
                if mantissa != 0:
                    significant += 1
                if point:
                    scale -= 1
            else:
                sticky |= d != 0
                if not point:
                    scale += 1
        elif c == "." and not point:
            point = True
        else:
            break
        i += 1
    if digits == 0:
        raise ValueError(_NOT_A_QUANTITY)
    suffix = text[i:]
    known = _SUFFIXES.get(suffix)
    if known is not None:
        format_, binary, exponent = known
    else:
        if suffix[:1] not in ("e", "E"):
            raise ValueError(_NOT_A_QUANTITY)
        rest = suffix[1:]
        sign = -1 if rest[:1] == "-" else 1
        number = rest[1:] if rest[:1] in ("-", "+") else rest
        if number == "" or not all(c in _DIGITS for c in number):
            raise ValueError(_NOT_A_QUANTITY)
        # Any exponent beyond ±1000 is out of range either way; only zeros (`1e0`) is 0.
        trimmed = number.lstrip("0")
        magnitude = 0 if not trimmed else min(int(trimmed), _I64_MAX)
        format_, binary, exponent = _DECIMAL_EXPONENT, 0, sign * max(min(magnitude, 1000), 0)
    # nanos = mantissa * 2^binary * 10^(scale + exponent + 9), rounded up.
    shift = scale + exponent + 9
    value = mantissa
    if binary > 0:
        factor = 1 << binary
        # Make room by dropping digits that the division below would drop anyway.
        while _checked_mul(value, factor) is None and shift < 0:
            sticky |= value % 10 != 0
            value //= 10
            shift += 1
        multiplied = _checked_mul(value, factor)
        if multiplied is None:
            raise ValueError(_TOO_LARGE)
        value = multiplied
    if shift >= 0:
        if value != 0:
            power = _checked_pow10(shift)
            multiplied = None if power is None else _checked_mul(value, power)
            if multiplied is None:
                raise ValueError(_TOO_LARGE)
            value = multiplied
    else:
        divisor = _checked_pow10(-shift)
        if divisor is not None:
            sticky |= value % divisor != 0
            value //= divisor
        else:
            sticky |= value != 0
            value = 0
    if sticky:
        value += 1
    if value > _MAX_NANOS:
        raise ValueError(_TOO_LARGE)
    return _Parsed(-value if negative else value, format_)
