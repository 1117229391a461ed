"""Contract 0.3.0 natively: the implements flags, validate (and `check`), default's patch, convert and their errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

import pytest

import operator_host as oh
from operator_host import Field, InvalidSpec, Retry, Validation


@dataclass
class GadgetSpec:
    """A gadget, v1: `replicas` is a number."""

    replicas: int
    zone: str = ""
    image: str = "busybox"


@dataclass
class Replicas:
    count: int


@dataclass
class GadgetSpecV2:
    """A gadget, v2: `replicas` is a structure."""

    replicas: Replicas
    zone: str = ""


@dataclass
class GadgetStatus:
    phase: Annotated[str, Field(enum=("Ready", "Pending"))] = "Pending"


GADGET_V1 = oh.CustomResource(
    group="g.dev", version="v1", kind="Gadget", spec=GadgetSpec, status=GadgetStatus
)
GADGET_V2 = oh.CustomResource(
    group="g.dev", version="v2", kind="Gadget", spec=GadgetSpecV2, status=GadgetStatus
)

operator = oh.Operator(
    name="gadget",
    version="0.1.0",
    parent=GADGET_V1,
    crd=oh.merge_crds([GADGET_V1.crd(), GADGET_V2.crd()], "v1"),
    children=[oh.kinds.CONFIG_MAP],
)


def check_replicas(spec: GadgetSpec) -> int:
    """What `reconcile` would refuse, raised as the SDK's invalid-spec error."""
    if not 1 <= spec.replicas <= 10:
        raise oh.invalid_field("replicas", f"must be between 1 and 10, got {spec.replicas}")
    return spec.replicas


@operator.reconcile
def reconcile(parent, observed):
    check_replicas(parent.spec)
    return oh.Desired()


@operator.validate
def validate(parent, old):
    validation = Validation()
    validation.check(check_replicas, parent.spec)
    if old is not None and old.spec.zone != parent.spec.zone:
        validation.immutable("spec.zone", parent.spec.zone)
    if parent.spec.replicas == 1:
        validation.warn(f"Gadget {parent.name}: one replica is no redundancy")
    return validation


@operator.validate_delete
def validate_delete(parent):
    validation = Validation()
    if parent.labels.get("protected") == "true":
        validation.forbidden("metadata.labels[protected]", "a protected Gadget cannot be deleted")
    return validation


@operator.default
def default(parent):
    if not parent.spec.zone:
        parent.spec.zone = "zone-a"
    parent.metadata.setdefault("labels", {})["zoned"] = "true"


@operator.convert
def convert(obj: dict, to_version: str) -> dict:
    from_version = obj["apiVersion"].removeprefix("g.dev/")
    if (from_version, to_version) == ("v1", "v2"):
        obj["spec"]["replicas"] = {"count": obj["spec"]["replicas"]}
    elif (from_version, to_version) == ("v2", "v1"):
        obj["spec"]["replicas"] = obj["spec"]["replicas"]["count"]
    elif from_version != to_version:
        raise InvalidSpec(f"cannot convert a Gadget from {from_version} to {to_version}: the versions are v1 and v2")
    obj["apiVersion"] = f"g.dev/{to_version}"
    return obj


def gadget(spec, labels=None, extra=None) -> str:
    metadata: dict = {"name": "g", "namespace": "default"}
    if labels:
        metadata["labels"] = labels
    obj = {"apiVersion": "g.dev/v1", "kind": "Gadget", "metadata": metadata, "spec": spec}
    obj.update(extra or {})
    return json.dumps(obj)


def printed(validation: Validation) -> list[str]:
    return [str(e) for e in validation.errors]


def test_registering_a_handler_sets_its_flag():
    assert operator.info()["implements"] == ["validate", "validate-delete", "default", "convert"]
    bare = oh.Operator(name="bare", version="0.1.0", parent=GADGET_V1)
    assert bare.info()["implements"] == []
    bare.default(lambda parent: None)
    assert bare.info()["implements"] == ["default"]


def test_field_errors_print_as_the_api_server_prints_them():
    validation = Validation()
    validation.invalid("spec.size", 0, "must be between 1 and 10").required(
        "spec.image", "a container image"
    ).immutable("spec.storage", "2Gi").not_supported("spec.mode", "x", ["a", "b"]).forbidden(
        "spec.secret", "may not be set here"
    )
    assert printed(validation) == [
        "spec.size: Invalid value: 0: must be between 1 and 10",
        "spec.image: Required value: a container image",
        'spec.storage: Invalid value: "2Gi": field is immutable',
        'spec.mode: Unsupported value: "x": supported values: "a", "b"',
        "spec.secret: Forbidden: may not be set here",
    ]
    assert [e.value for e in validation.errors] == ["0", None, '"2Gi"', '"x"', None]
    assert not validation.is_valid
    with pytest.raises(InvalidSpec) as error:
        validation.raise_if_invalid()
    assert error.value.message.startswith("spec.size: Invalid value: 0: must be between 1 and 10, spec.image:")
    Validation().warn("only a warning").raise_if_invalid()


def test_check_turns_the_sdks_invalid_spec_into_a_field_error():
    validation = Validation()
    assert validation.check(check_replicas, GadgetSpec(replicas=3)) == 3
    assert validation.check(check_replicas, GadgetSpec(replicas=11)) is None
    validation.check(lambda: (_ for _ in ()).throw(Retry("not a spec problem")))
    validation.check(lambda: (_ for _ in ()).throw(InvalidSpec("no path in this message")))
    validation.check(
        oh.validate_container_resources, "resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    )
    assert [(e.reason, e.field, e.value, e.detail) for e in validation.errors] == [
        (oh.FieldErrorType.INVALID, "spec.replicas", None, "must be between 1 and 10, got 11"),
        (oh.FieldErrorType.INVALID, "spec", None, "no path in this message"),
        (
            oh.FieldErrorType.INVALID,
            'spec.resources.requests["cpu"]',
            None,
            "must be at most the limit of cpu (1), got 2",
        ),
    ]
    with pytest.raises(ZeroDivisionError):
        validation.check(lambda: 1 / 0)


def test_check_keeps_a_field_path_that_holds_the_separator():
    validation = Validation()
    validation.check(lambda: (_ for _ in ()).throw(oh.invalid_at('spec.labels["a: b"]', "too long")))
    assert (validation.errors[0].field, validation.errors[0].detail) == ('spec.labels["a: b"]', "too long")


def test_validate_calls_the_handler_with_the_decoded_parent_and_the_old_one():
    created = operator.run_validate("create", gadget({"replicas": 1, "zone": "z"}), None)
    assert printed(created) == []
    assert created.warnings == ["Gadget g: one replica is no redundancy"]
    updated = operator.run_validate(
        "update", gadget({"replicas": 11, "zone": "y"}), gadget({"replicas": 3, "zone": "z"})
    )
    assert printed(updated) == [
        "spec.replicas: Invalid value: must be between 1 and 10, got 11",
        'spec.zone: Invalid value: "y": field is immutable',
    ]


def test_a_parent_that_does_not_decode_is_refused_with_its_field():
    refused = operator.run_validate("create", gadget({"replicas": "three"}), None)
    assert [(e.reason, e.field, e.value, e.detail) for e in refused.errors] == [
        (oh.FieldErrorType.INVALID, "spec.replicas", None, 'expected an integer, got "three"')
    ]
    missing = operator.run_validate("create", gadget({"zone": "z"}), None)
    assert printed(missing) == ["spec: Invalid value: missing field `replicas`"]
    not_json = operator.run_validate("create", "{", None)
    assert printed(not_json) == [
        ": Invalid value: null: not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    ]


def test_an_old_parent_that_does_not_decode_validates_as_a_create():
    validation = operator.run_validate(
        "update", gadget({"replicas": 2, "zone": "y"}), gadget({"replicas": "old schema"})
    )
    assert printed(validation) == [] and validation.warnings == []


def test_validate_delete_sees_the_old_parent():
    protected = operator.run_validate("delete", None, gadget({"replicas": 2}, labels={"protected": "true"}))
    assert printed(protected) == ["metadata.labels[protected]: Forbidden: a protected Gadget cannot be deleted"]
    assert printed(operator.run_validate("delete", None, gadget({"replicas": 2}))) == []
    with pytest.raises(ValueError, match="unknown admission operation 'connect'"):
        operator.run_validate("connect", None, None)


def test_an_unregistered_validate_refuses_nothing_but_an_undecodable_parent():
    bare = oh.Operator(name="bare", version="0.1.0", parent=GADGET_V1)
    assert printed(bare.run_validate("create", gadget({"replicas": 99}), None)) == []
    assert printed(bare.run_validate("delete", None, gadget({"replicas": 99}))) == []
    assert printed(bare.run_validate("create", gadget({"replicas": []}), None)) == [
        "spec.replicas: Invalid value: expected an integer, got []"
    ]


def test_a_validate_handler_must_return_a_validation():
    wrong = oh.Operator(name="wrong", version="0.1.0", parent=GADGET_V1)
    wrong.validate(lambda parent, old: None)
    with pytest.raises(TypeError, match="validate returned NoneType, expected a Validation"):
        wrong.run_validate("create", gadget({"replicas": 1}), None)


def test_an_invalid_spec_raised_by_a_validate_handler_is_its_field_error():
    raising = oh.Operator(name="raising", version="0.1.0", parent=GADGET_V1)
    raising.validate(lambda parent, old: check_replicas(parent.spec) and Validation())
    assert printed(raising.run_validate("create", gadget({"replicas": 11}), None)) == [
        "spec.replicas: Invalid value: must be between 1 and 10, got 11"
    ]
    assert printed(raising.run_validate("create", gadget({"replicas": 2}), None)) == []


def test_default_patches_only_the_fields_the_handler_changed():
    received = gadget(
        {"replicas": 2, "unmodelled": {"kept": True}},
        extra={
            "status": {"phase": "Ready"},
            "metadata": {"name": "g", "annotations": {"a": "1"}, "labels": {"app": "x"}},
        },
    )
    defaulted = json.loads(operator.run_default(received))
    assert defaulted == {
        "apiVersion": "g.dev/v1",
        "kind": "Gadget",
        # The typed spec's own default (image) is not written: the handler did not set it.
        "metadata": {"name": "g", "annotations": {"a": "1"}, "labels": {"app": "x", "zoned": "true"}},
        "spec": {"replicas": 2, "unmodelled": {"kept": True}, "zone": "zone-a"},
        "status": {"phase": "Ready"},
    }


def test_default_is_idempotent_and_returns_an_unchanged_object_as_received():
    once = operator.run_default(gadget({"replicas": 2}))
    assert operator.run_default(once) == once
    # Not re-encoded: the very text, spacing included.
    text = '{"apiVersion": "g.dev/v1", "kind": "Gadget", "metadata": {"labels": {"zoned": "true"}}, "spec": {"replicas": 2, "zone": "b"}}'
    assert operator.run_default(text) == text


def test_default_leaves_a_parent_that_does_not_decode_to_validate():
    text = gadget({"replicas": "three"})
    assert operator.run_default(text) == text
    with pytest.raises(InvalidSpec) as error:
        operator.run_default("not json")
    assert error.value.message == "the object is not JSON: Expecting value: line 1 column 1 (char 0)"


def test_default_may_return_a_new_parent_and_removes_what_it_clears():
    clearing = oh.Operator(name="clearing", version="0.1.0", parent=GADGET_V1)

    @clearing.default
    def replace(parent):
        parent.raw["metadata"].pop("labels")
        return oh.Parent(parent.raw, GadgetSpec(replicas=parent.spec.replicas, zone="z"), None)

    defaulted = json.loads(clearing.run_default(gadget({"replicas": 4}, labels={"drop": "me"})))
    assert defaulted["metadata"] == {"name": "g", "namespace": "default"}
    assert defaulted["spec"] == {"replicas": 4, "zone": "z"}
    clearing.default(lambda parent: "a string")
    with pytest.raises(TypeError, match="default returned str, expected None"):
        clearing.run_default(gadget({"replicas": 4}))


def test_merge_crds_serves_every_version_and_stores_one():
    crd = operator.info()["crd"]
    versions = crd["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [("v1", True, True), ("v2", True, False)]
    v2_spec = versions[1]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert v2_spec["properties"]["replicas"]["required"] == ["count"]
    stored_v2 = oh.merge_crds([GADGET_V1.crd(), GADGET_V2.crd()], "v2")["spec"]["versions"]
    assert [(v["name"], v["storage"]) for v in stored_v2] == [("v2", True), ("v1", False)]
    # In kube's order (the Rust SDK's): the storage version, then the others from the last.
    v3 = oh.CustomResource(group="g.dev", version="v3", kind="Gadget", spec=GadgetSpecV2).crd()
    three = oh.merge_crds([GADGET_V1.crd(), GADGET_V2.crd(), v3], "v2")["spec"]["versions"]
    assert [v["name"] for v in three] == ["v2", "v3", "v1"]


def test_a_crd_of_several_versions_needs_a_convert_handler():
    unconverted = oh.Operator(
        name="unconverted",
        version="0.1.0",
        parent=GADGET_V1,
        crd=oh.merge_crds([GADGET_V1.crd(), GADGET_V2.crd()], "v1"),
    )
    with pytest.raises(ValueError, match=r"plugin unconverted: its CRD serves v1, v2, so it needs a convert handler"):
        unconverted.info()


@pytest.mark.parametrize(
    "crds, storage, message",
    [
        ([], "v1", "merge_crds: expected at least one CRD"),
        ([GADGET_V1.crd()], "v3", "merge_crds: expected exactly one CRD of the storage version v3, found 0"),
        (
            [GADGET_V1.crd(), oh.CustomResource(group="other.dev", version="v2", kind="Gadget", spec=GadgetSpecV2).crd()],
            "v1",
            "merge_crds: the versions differ in group: 'other.dev' and 'g.dev'",
        ),
        (
            [GADGET_V1.crd(), GADGET_V2.crd(), GADGET_V2.crd()],
            "v1",
            "merge_crds: expected each version once, got v2 more than once",
        ),
        (
            [oh.merge_crds([GADGET_V1.crd(), GADGET_V2.crd()], "v1")],
            "v1",
            "merge_crds: gadgets.g.dev serves 2 versions, expected one",
        ),
    ],
)
def test_merge_crds_refuses_what_does_not_merge(crds, storage, message):
    with pytest.raises(ValueError) as error:
        oh.merge_crds(crds, storage)
    assert str(error.value) == message


def test_convert_round_trips_through_the_handler():
    one = gadget({"replicas": 3, "zone": "a"})
    two = operator.run_convert(one, "v2")
    assert json.loads(two)["spec"] == {"replicas": {"count": 3}, "zone": "a"}
    assert json.loads(two)["apiVersion"] == "g.dev/v2"
    assert json.loads(operator.run_convert(two, "v1")) == json.loads(one)


def test_convert_errors_name_what_was_expected():
    with pytest.raises(InvalidSpec) as error:
        operator.run_convert(gadget({"replicas": 3}), "v9")
    assert error.value.message == "cannot convert a Gadget from v1 to v9: the versions are v1 and v2"
    with pytest.raises(InvalidSpec) as error:
        operator.run_convert("[", "v2")
    assert error.value.message == "the object is not JSON: Expecting value: line 1 column 2 (char 1)"
    bare = oh.Operator(name="bare", version="0.1.0", parent=GADGET_V1)
    with pytest.raises(InvalidSpec) as error:
        bare.run_convert(gadget({"replicas": 3}), "v2")
    assert error.value.message == "this plugin does not convert between versions (asked for v2)"
    bare.convert(lambda obj, to_version: [obj])
    with pytest.raises(InvalidSpec) as error:
        bare.run_convert(gadget({"replicas": 3}), "v2")
    assert error.value.message == "convert to v2 returned list, expected the object as a dict"
