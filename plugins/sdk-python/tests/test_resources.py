"""The Rust SDK's resources.rs tests, ported: quantities, resource names and the stored form."""

from __future__ import annotations

from typing import Optional

import pytest

from operator_host.errors import InvalidSpec
from operator_host.resources import (
    _is_qualified_name,
    canonical_quantity,
    validate_container_resources,
)

Entries = list[tuple[str, object]]


def resources(requests: Entries, limits: Entries) -> dict:
    return {"requests": dict(requests), "limits": dict(limits)}


def check(requests: Entries, limits: Entries) -> Optional[str]:
    """None when accepted, else the error's message."""
    try:
        validate_container_resources("resources", resources(requests, limits))
    except InvalidSpec as e:
        return e.message
    return None


def rejected(requests: Entries, limits: Entries, field: str, why: str) -> None:
    message = check(requests, limits)
    assert message is not None, "accepted"
    assert message.startswith(f"spec.resources{field}: ") and why in message, (
        f"{message!r} does not name {field!r} with {why!r}"
    )


def test_quantities_in_every_form_of_the_grammar_are_canonicalized() -> None:
    for quantity, canonical in [
        ("1", "1"),
        ("+1", "1"),
        ("1.", "1"),
        (".5", "500m"),
        ("0.1", "100m"),
        ("1.5", "1500m"),
        ("1000m", "1"),
        ("2000", "2k"),
        ("1024", "1024"),
        ("0.1n", "1n"),
        ("1.0000000001", "1000000001n"),
        ("100u", "100u"),
        ("5M", "5M"),
        ("9E", "9E"),
        ("1.5Gi", "1536Mi"),
        ("2048Ki", "2Mi"),
        ("1000Ki", "1000Ki"),
        ("0.5Ki", "512"),
        ("1Ei", "1Ei"),
        ("0Gi", "0"),
        ("-0", "0"),
        ("-1.5", "-1500m"),
        ("1e3", "1e3"),
        ("1000E-3", "1"),
        ("1500e-3", "1500e-3"),
        ("1e+3", "1e3"),
        ("1e0", "1"),
        ("1e-0", "1"),
        ("2E00", "2"),
        ("1e-1000", "1e-9"),
        ("00012", "12"),
        ("0.000000000000000000000000000000000000000001", "1n"),
    ]:
        assert canonical_quantity(quantity) == canonical, quantity


def test_text_outside_the_grammar_is_not_a_quantity() -> None:
    for quantity in [
        "",
        "not-a-quantity",
        ".",
        "-",
        "1.2.3",
        "1e",
        "1e+",
        "1e1.5",
        "1Ki3",
        "1i",
        "1 ",
        " 1",
        "--1",
        "1KI",
        "1K",
        "0x10",
        "1mi",
    ]:
        with pytest.raises(ValueError) as why:
            canonical_quantity(quantity)
        assert "must be a quantity" in str(why.value), f"{quantity}: {why.value}"
    for quantity in ["10E", "9223372036854775808", "8Ei", "1e19", "1e1000"]:
        with pytest.raises(ValueError) as why:
            canonical_quantity(quantity)
        assert "at most 2^63-1" in str(why.value), f"{quantity}: {why.value}"
    assert canonical_quantity("9223372036854775807") == "9223372036854775807"


def test_names_are_standard_or_fully_qualified() -> None:
    for name in ["cpu", "memory", "ephemeral-storage", "example.com/gpu", "kubernetes.io/x"]:
        assert check([], [(name, "1")]) is None, name
    assert check([], [("hugepages-2Mi", "2Mi"), ("memory", "1Gi")]) is None
    for name in ["k", "pods", "requests.cpu", "gpu"]:
        rejected(
            [], [(name, "1")], f'.limits["{name}"]', "must be a standard resource for containers"
        )
    for name, debug in [
        ("bad key", '"bad key"'),
        ("-k-", '"-k-"'),
        ("k-", '"k-"'),
        ("example.com/", '"example.com/"'),
        ("Example.com/gpu", '"Example.com/gpu"'),
        ("a/b/c", '"a/b/c"'),
        ("/gpu", '"/gpu"'),
    ]:
        rejected([(name, "1")], [], f".requests[{debug}]", "not a resource name")
    long = "a." * 121 + "com/gpu"
    assert _is_qualified_name(long) and len(long) > 244 + 4
    for name in ["requests.example.com/gpu", long]:
        rejected([], [(name, "1")], f'.limits["{name}"]', "extended resource name standard")


def test_quantities_must_parse_and_not_be_negative() -> None:
    rejected([], [("k", "not-a-quantity")], '.limits["k"]', "standard resource")
    rejected([], [("cpu", "not-a-quantity")], '.limits["cpu"]', "must be a quantity")
    rejected([("memory", "-1")], [], '.requests["memory"]', "greater than or equal to 0")
    rejected([("memory", "10E")], [], '.requests["memory"]', "at most 2^63-1")


def test_extended_resources_are_whole_and_need_an_equal_limit() -> None:
    gpu = "example.com/gpu"
    rejected([], [(gpu, "500m")], '.limits["example.com/gpu"]', "whole units")
    rejected([(gpu, "1")], [], '.limits["example.com/gpu"]', "must be set")
    rejected([(gpu, "1")], [(gpu, "2")], '.requests["example.com/gpu"]', "must equal")
    assert check([(gpu, "2")], [(gpu, "2")]) is None
    assert check([(gpu, "1k")], [(gpu, "1000")]) is None
    # Native resources may be overcommitted, with or without a limit.
    assert check([("cpu", "1")], [("cpu", "2")]) is None
    assert check([("cpu", "1"), ("kubernetes.io/x", "1")], []) is None


def test_a_request_is_at_most_its_limit() -> None:
    rejected([("cpu", "2")], [("cpu", "1")], '.requests["cpu"]', "at most the limit")
    rejected([("cpu", "1001m")], [("cpu", "1")], '.requests["cpu"]', "(1), got 1001m")
    assert check([("cpu", "1000m")], [("cpu", "1")]) is None
    assert check([("memory", "1Gi")], [("memory", "1073741824")]) is None


def test_huge_pages_are_whole_pages_with_an_equal_limit_and_cpu_or_memory() -> None:
    memory = ("memory", "1Gi")
    rejected([], [("hugepages-x", "1")], '.limits["hugepages-x"]', "page size")
    rejected([], [("hugepages-0", "1")], '.limits["hugepages-0"]', "page size")
    rejected([], [("hugepages-1.5", "3")], '.limits["hugepages-1.5"]', "page size")
    field = '.limits["hugepages-2Mi"]'
    rejected([], [("hugepages-2Mi", "3Mi"), memory], field, "multiple of the page size 2Mi")
    huge = ("hugepages-2Mi", "4Mi")
    rejected([huge], [memory], field, "must be set")
    rejected(
        [("hugepages-2Mi", "2Mi")], [huge, memory], '.requests["hugepages-2Mi"]', "must equal"
    )
    rejected([huge], [huge], "", "huge pages require a cpu or memory")
    assert check([huge, ("cpu", "1")], [huge]) is None
    assert check([huge], [huge, memory]) is None


def test_claims_are_refused_the_pod_declares_none() -> None:
    with pytest.raises(InvalidSpec) as error:
        validate_container_resources("resources", {"claims": [{"name": "gpu"}]})
    assert error.value.message.startswith("spec.resources.claims: must be empty")


def test_the_value_is_what_the_api_server_stores() -> None:
    empty = {"claims": [], "limits": {}, "requests": {}}
    assert validate_container_resources("resources", empty) == {}
    given = resources([("cpu", "0.5"), ("memory", "1.5Gi")], [("cpu", "1000m")])
    assert validate_container_resources("resources", given) == resources(
        [("cpu", "500m"), ("memory", "1536Mi")], [("cpu", "1")]
    )
    # The field path is the caller's.
    with pytest.raises(InvalidSpec) as error:
        validate_container_resources("x.res", resources([("k", "1")], []))
    assert error.value.message.startswith('spec.x.res.requests["k"]: ')


# Beyond the Rust tests: the whole messages, and what only the JSON form can hold.


def test_messages_are_the_rust_ones_byte_for_byte() -> None:
    def message(requests: Entries, limits: Entries, field: str = "resources") -> str:
        with pytest.raises(InvalidSpec) as error:
            validate_container_resources(field, resources(requests, limits))
        return error.value.message

    assert message([("cpu", "1001m")], [("cpu", "1")]) == (
        'spec.resources.requests["cpu"]: must be at most the limit of cpu (1), got 1001m'
    )
    assert message([], [("cpu", "x")]) == (
        'spec.resources.limits["cpu"]: must be a quantity: a number with an optional suffix'
        " (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E) or exponent (e3), such as 500m,"
        ' 2 or 1.5Gi, got "x"'
    )
    assert message([("example.com/gpu", "1")], []) == (
        'spec.resources.limits["example.com/gpu"]: must be set (to the request, 1):'
        " example.com/gpu cannot be overcommitted, so a request needs an equal limit"
    )
    assert message([], [('a"b\n', "1")]) == (
        'spec.resources.limits["a\\"b\\n"]: "a\\"b\\n" is not a resource name: an optional'
        " DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', beginning"
        " and ending with a letter or digit"
    )
    assert message([], [("hugepages-2Mi", "2Mi")], "c") == (
        "spec.c: huge pages require a cpu or memory request or limit"
    )
    with pytest.raises(InvalidSpec) as error:
        validate_container_resources("r", {"claims": [{"name": "a"}, {"name": "b"}, {}]})
    assert error.value.message == (
        "spec.r.claims: must be empty: a claim must name one of the pod's resourceClaims, and"
        ' the pod declares none (got ["a", "b", ""])'
    )


def test_numbers_are_quantities_and_other_types_are_refused() -> None:
    # k8s-openapi reads a number as its Rust text: an integer as such, an f64 with `{}`.
    given = resources([("cpu", 0.5), ("memory", 1073741824)], [("cpu", 1.0)])
    assert validate_container_resources("resources", given) == resources(
        [("cpu", "500m"), ("memory", "1073741824")], [("cpu", "1")]
    )
    assert check([("cpu", 1e-7)], []) is None
    assert validate_container_resources("resources", None) is None
    for value, words in [
        (True, "boolean `true`"),
        (None, "null"),
        ([], "sequence"),
    ]:
        with pytest.raises(InvalidSpec) as error:
            validate_container_resources("r", {"limits": {"cpu": value}})
        assert error.value.message == (
            f'spec.r.limits["cpu"]: invalid type: {words}, expected Quantity'
        )
    with pytest.raises(InvalidSpec) as error:
        validate_container_resources("r", {"limits": ["cpu"]})
    assert error.value.message == "spec.r.limits: invalid type: sequence, expected a map"
    with pytest.raises(InvalidSpec) as error:
        validate_container_resources("r", "1")
    assert error.value.message == (
        'spec.r: invalid type: string "1", expected ResourceRequirements'
    )
