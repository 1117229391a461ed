"""The SDK's declaration, decoding and conditions, natively (no host, no component)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional

import pytest

import operator_host as oh
from operator_host import Condition, Field, InvalidSpec, Retry


@dataclass
class Inner:
    name: str
    weight: float = 1.0


@dataclass
class ThingSpec:
    """A thing."""

    size: Annotated[int, Field(minimum=0, maximum=10, description="How many.")]
    image: str = "busybox"
    big: Annotated[int, Field(format="int64")] = 0
    tags: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    inner: Optional[Inner] = None
    enabled: bool = True


@dataclass
class ThingStatus:
    phase: Annotated[str, Field(enum=("Ready", "Pending"))] = "Pending"
    conditions: Annotated[list[Condition], Field(schema=oh.conditions_schema())] = field(
        default_factory=list
    )


operator = oh.Operator(
    name="thing",
    version="0.1.0",
    parent=oh.CustomResource(
        group="t.dev", version="v1", kind="Thing", spec=ThingSpec, status=ThingStatus,
        short_names=("th",),
    ),
    children=[oh.kinds.DEPLOYMENT],
)


@operator.reconcile
def reconcile(parent, observed):
    desired = oh.Desired()
    desired.child({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": oh.child_meta(parent.name), "spec": {"replicas": parent.spec.size}})
    desired.status = ThingStatus("Ready", [Condition.new("Ready", True, "Up", "", parent.generation)])
    return desired


def thing(spec, status=None) -> str:
    parent = {"apiVersion": "t.dev/v1", "kind": "Thing", "metadata": {"name": "a", "generation": 2},
              "spec": spec}
    if status is not None:
        parent["status"] = status
    return json.dumps(parent)


def test_the_crd_is_made_from_the_declaration():
    crd = operator.parent.crd()
    assert crd["metadata"]["name"] == "things.t.dev"
    assert crd["spec"]["names"] == {"kind": "Thing", "plural": "things",
                                    "shortNames": ["th"], "singular": "thing"}
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["size"]
    assert spec["description"] == "A thing."
    props = spec["properties"]
    assert props["size"] == {"type": "integer", "format": "int32", "minimum": 0.0, "maximum": 10.0,
                             "description": "How many."}
    assert props["image"] == {"type": "string", "default": "busybox"}
    assert props["big"]["format"] == "int64"
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "default": []}
    assert props["limits"]["additionalProperties"] == {"type": "integer", "format": "int32"}
    assert props["inner"]["nullable"] is True
    assert props["inner"]["required"] == ["name"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["phase"]["enum"] == ["Ready", "Pending"]
    assert status["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_the_spec_is_decoded_with_defaults():
    parent = operator.decode_parent(json.loads(thing({"size": 3, "inner": {"name": "x"}})))
    assert parent.spec == ThingSpec(size=3, inner=Inner("x"))
    assert parent.status is None
    assert parent.generation == 2


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"size": "3"}, 'the Thing does not match its schema: spec.size: expected an integer, got "3"'),
        ({}, "the Thing does not match its schema: spec: missing field `size`"),
        (None, "the Thing does not match its schema: spec: expected an object, got null"),
        ({"size": 1, "tags": ["a", 2]}, "spec.tags[1]: expected a string, got 2"),
        ({"size": 1, "limits": {"a": True}}, 'spec.limits["a"]: expected an integer, got true'),
        ({"size": 2**31}, "spec.size: expected a int32 integer, got 2147483648"),
        ({"size": 1, "inner": {"weight": 1}}, "spec.inner: missing field `name`"),
        ({"size": 1, "enabled": "yes"}, 'spec.enabled: expected a boolean, got "yes"'),
    ],
)
def test_an_invalid_spec_names_the_field(spec, message):
    with pytest.raises(InvalidSpec) as error:
        operator.run_reconcile(thing(spec), [])
    assert message in error.value.message


def test_a_previous_status_that_no_longer_decodes_is_dropped():
    kept = operator.decode_parent(json.loads(thing({"size": 1}, {"phase": "Ready"})))
    assert kept.status == ThingStatus(phase="Ready")
    dropped = operator.decode_parent(json.loads(thing({"size": 1}, {"phase": 7})))
    assert dropped.status is None


def test_reconcile_returns_children_with_the_spec_hash_and_a_status():
    desired = operator.run_reconcile(thing({"size": 2}), [])
    (deployment,) = desired.children
    assert oh.SPEC_HASH_ANNOTATION in deployment["metadata"]["annotations"]
    assert json.loads(oh.operator.json_text(desired.status)) == {
        "phase": "Ready",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Up", "message": "",
                        "observedGeneration": 2}],
    }


def test_bad_request_json_is_a_retry():
    with pytest.raises(Retry, match="the parent is not valid JSON"):
        operator.run_reconcile("{", [])
    with pytest.raises(Retry, match="observed child #1 is not valid JSON"):
        operator.run_reconcile(thing({"size": 1}), ["{}", "nope"])


def test_info_declares_the_kinds_and_no_finalizer():
    info = operator.info()
    assert info["parent"] == oh.Kind("t.dev", "v1", "Thing", "things")
    assert info["children"] == [oh.kinds.DEPLOYMENT]
    assert info["needs_finalize"] is False


def test_observed_children_by_kind_and_name():
    observed = oh.Observed.from_json([
        json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}),
        json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}}),
    ])
    assert observed.get(oh.kinds.DEPLOYMENT, "a")["kind"] == "Deployment"
    assert observed.get(oh.kinds.DEPLOYMENT, "b") is None
    assert len(observed.all(oh.kinds.SERVICE)) == 1


def test_a_child_without_kind_is_refused():
    with pytest.raises(Retry, match="no kind"):
        oh.Desired().child({"apiVersion": "v1", "metadata": {"name": "x"}})


@pytest.mark.parametrize(
    "phase, reason",
    [("ONLINE_PARTIAL", "OnlinePartial"), ("online-partial", "OnlinePartial"),
     ("Running", "Running"), ("RolloutComplete", "RolloutComplete"),
     ("3 members", "Members"), ("", "Unknown")],
)
def test_ready_from_phase_makes_a_valid_reason(phase, reason):
    condition = Condition.ready_from_phase(phase, True, "m", 2)
    assert (condition.type, condition.status, condition.reason) == ("Ready", "True", reason)


def test_the_vendored_wit_is_the_hosts():
    sdk = Path(__file__).parent.parent
    assert (sdk / "operator_host/wit/reconciler.wit").read_bytes() == (
        sdk.parent.parent / "wit/reconciler.wit"
    ).read_bytes()
