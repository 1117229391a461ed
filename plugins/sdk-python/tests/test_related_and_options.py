"""Contract 0.2.0's additions natively: related declarations and objects, and child options."""

from __future__ import annotations

import json
from dataclasses import dataclass
import pytest

import operator_host as oh
from operator_host import ChildOptions, DeletePolicy, Readiness, Related, Retry, SecretView, UpdateStrategy


@dataclass
class SiteSpec:
    tls_secret: str = ""


@dataclass
class ConfigMapView:
    """The fields of a ConfigMap the plugin reads."""

    data: dict[str, str]


operator = oh.Operator(
    name="site",
    version="0.1.0",
    parent=oh.CustomResource(group="s.dev", version="v1", kind="Site", spec=SiteSpec),
    children=[oh.kinds.JOB, oh.kinds.DEPLOYMENT],
    related=[
        Related.by_name_at("tls", oh.kinds.SECRET, "spec.tlsSecret"),
        Related.by_labels("config", oh.kinds.CONFIG_MAP, "app=site").with_secret_data(),
    ],
)


@operator.reconcile
def reconcile(parent, observed):
    desired = oh.Desired()
    secret = observed.related_one("tls")
    desired.child(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": oh.child_meta("migrate")},
        ChildOptions().recreate().ready_when_condition("Complete"),
    )
    desired.child(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": oh.child_meta("web"), "spec": {}}
    )
    desired.status = {
        "tls": (secret or {}).get("data", {}).get("tls.crt", ""),
        "configs": [c.data for c in observed.related("config", ConfigMapView)],
    }
    return desired


def site(tls_secret: str = "") -> str:
    return json.dumps({"apiVersion": "s.dev/v1", "kind": "Site", "metadata": {"name": "s"},
                       "spec": {"tlsSecret": tls_secret}})


def test_related_declarations_are_in_the_info():
    assert operator.info()["related"] == [
        Related("tls", oh.kinds.SECRET, name_from_path="spec.tlsSecret", secret_view=SecretView.DATA_HASH),
        Related("config", oh.kinds.CONFIG_MAP, label_selector="app=site", secret_view=SecretView.FULL),
    ]


def test_a_related_declaration_has_exactly_one_selector():
    with pytest.raises(ValueError) as error:
        Related("both", oh.kinds.SECRET, name_from_path="spec.a", label_selector="a=b")
    assert str(error.value) == "related 'both': expected exactly one of name_from_path and label_selector"
    with pytest.raises(ValueError):
        Related("neither", oh.kinds.SECRET)


def test_the_requests_related_objects_reach_the_handler():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cert"}, "data": {"tls.crt": "aGFzaA=="}}
    configs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "1"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"k": "2"}},
    ]
    desired = operator.run_reconcile(
        site("cert"), [], [("tls", [json.dumps(secret)]), ("config", [json.dumps(c) for c in configs])]
    )
    assert desired.status == {"tls": "aGFzaA==", "configs": [{"k": "1"}, {"k": "2"}]}
    nothing = operator.run_reconcile(site(), [], [("tls", []), ("config", [])])
    assert nothing.status == {"tls": "", "configs": []}


def test_related_objects_that_do_not_parse_or_decode_are_retried():
    with pytest.raises(Retry) as error:
        operator.run_reconcile(site(), [], [("tls", []), ("config", ["{}", "nope"])])
    assert error.value.message == "related config #1 is not valid JSON: Expecting value: line 1 column 1 (char 0)"
    observed = oh.Observed([]).with_related(
        "config", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "odd"}, "data": {"k": 1}}]
    )
    with pytest.raises(Retry) as error:
        observed.related("config", ConfigMapView)
    assert error.value.message == (
        'related config "odd" does not decode as ConfigMapView: data["k"]: expected a string, got 1'
    )
    with pytest.raises(Retry) as error:
        oh.Observed([]).with_related("config", [{"metadata": {"name": "bare"}}]).related("config", ConfigMapView)
    assert error.value.message == 'related config "bare" does not decode as ConfigMapView: missing field `data`'


def test_an_undeclared_related_name_is_empty():
    observed = oh.Observed([]).with_related("tls", [{"kind": "Secret"}])
    assert observed.related("tls") == [{"kind": "Secret"}]
    assert observed.related("other") == []
    assert observed.related_one("other") is None


def test_children_carry_their_options_in_order():
    desired = operator.run_reconcile(site(), [], [])
    assert [c["kind"] for c in desired.children] == ["Job", "Deployment"]
    assert desired.options == [
        ChildOptions(UpdateStrategy.RECREATE, DeletePolicy.DELETE, Readiness(condition_type="Complete")),
        ChildOptions(),
    ]
    # A child appended by hand gets the defaults.
    desired.children.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    assert desired.options_of(2) == ChildOptions(UpdateStrategy.IN_PLACE, DeletePolicy.DELETE, None)


def test_child_options_chain_without_changing_the_original():
    base = ChildOptions()
    options = base.create_only().orphan_on_prune().ready_when_field("status.readyReplicas", 3)
    assert options == ChildOptions(
        UpdateStrategy.CREATE_ONLY, DeletePolicy.ORPHAN, Readiness(path="status.readyReplicas", value="3")
    )
    assert base == ChildOptions()
    assert ChildOptions().ready_when_field("status.phase", "Running").ready_when == Readiness(
        path="status.phase", value='"Running"'
    )


def test_a_readiness_value_that_is_not_json_is_refused():
    with pytest.raises(Retry) as error:
        ChildOptions().ready_when_field("status.x", object())
    assert error.value.message == (
        "cannot serialize the readiness value of status.x: Object of type object is not JSON serializable"
    )


@pytest.mark.parametrize(
    "fields",
    [{}, {"condition_type": "Complete", "path": "status.x", "value": "1"}, {"path": "status.x"},
     {"condition_type": "Complete", "value": "1"}],
)
def test_a_readiness_is_a_condition_or_a_field_and_its_value(fields):
    with pytest.raises(ValueError, match="^a readiness is a condition type, or a field path with its value"):
        Readiness(**fields)


def test_child_options_must_be_child_options():
    with pytest.raises(TypeError, match="child options must be a ChildOptions, got dict"):
        oh.Desired().child({"apiVersion": "v1", "kind": "ConfigMap"}, {"update": "recreate"})
