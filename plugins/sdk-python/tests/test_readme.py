"""The README's examples run as written: executed in order, each does what the README says."""

import json
import re
from pathlib import Path

import pytest

import operator_host as oh


@pytest.fixture(scope="module")
def readme():
    """The namespace the README's Python blocks leave, run one after the other."""
    text = (Path(__file__).parent.parent / "README.md").read_text()
    namespace: dict = {"__name__": "readme_example"}
    for index, source in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
        exec(compile(source, f"README.md block {index}", "exec"), namespace)
    return namespace


def thing(spec: dict) -> str:
    return json.dumps({"apiVersion": "example.com/v1", "kind": "Thing",
                       "metadata": {"name": "a", "namespace": "default", "generation": 1}, "spec": spec})


def test_the_readme_example_reconciles(readme):
    desired = readme["operator"].run_reconcile(thing({"size": 2}), [])
    (deployment,) = desired.children
    assert deployment["spec"]["replicas"] == 2
    assert desired.status.conditions[0].reason == "Pending"


def test_the_readme_validate_and_default(readme):
    operator = readme["operator"]
    assert operator.info()["implements"] == ["validate", "default"]
    refused = operator.run_validate("update", thing({"size": 1, "image": " busybox:latest"}), thing({"size": 3}))
    assert [str(e) for e in refused.errors] == [
        "spec.image: Invalid value: must not start or end with spaces",
        'spec.image: Invalid value: " busybox:latest": must name a fixed tag, not latest',
    ]
    assert refused.warnings == ["Thing a: scaling down from 3 to 1"]
    # The dataclass's default image (busybox) is untagged, so `default` pins it and it is written.
    assert json.loads(operator.run_default(thing({"size": 1})))["spec"] == {"size": 1, "image": "busybox:1.36"}
    pinned = json.loads(operator.run_default(thing({"size": 1, "image": "registry.local/busybox", "note": "kept"})))
    assert pinned["spec"] == {"size": 1, "image": "registry.local/busybox:1.36", "note": "kept"}
    tagged = thing({"size": 1, "image": "busybox:1.37"})
    assert operator.run_default(tagged) == tagged


def test_the_readme_related_and_child_options(readme):
    site = readme["site"]
    assert site.info()["related"] == [oh.Related.by_name_at("tls", oh.kinds.SECRET, "spec.tlsSecret")]
    parent = json.dumps({"apiVersion": "example.com/v1", "kind": "Site", "metadata": {"name": "s"},
                         "spec": {"image": "app:1", "tlsSecret": "cert"}})
    with pytest.raises(oh.Retry, match="the Secret cert does not exist yet"):
        site.run_reconcile(parent, [], [("tls", [])])
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cert"}, "data": {"tls.crt": "aGFzaA=="}}
    desired = site.run_reconcile(parent, [], [("tls", [json.dumps(secret)])])
    assert [c["kind"] for c in desired.children] == ["Job", "Deployment"]
    assert desired.options == [oh.ChildOptions().recreate().ready_when_condition("Complete"), oh.ChildOptions()]
    annotations = desired.children[1]["spec"]["template"]["metadata"]["annotations"]
    assert annotations[oh.CONTENT_HASH_ANNOTATION] == oh.content_hash(secret)


def test_the_readme_run_once_and_rollout_conditions(readme):
    app = readme["app"]

    def parent(image: str, schema: int) -> str:
        return json.dumps({"apiVersion": "example.com/v1", "kind": "App",
                           "metadata": {"name": "a", "namespace": "default", "generation": 4},
                           "spec": {"image": image, "schema": schema}})

    def conditions(desired) -> list[tuple[str, str, str]]:
        return [(c.type, c.status, c.reason) for c in desired.status.conditions]

    first = app.run_reconcile(parent("app:1", 2), [])
    assert [c["kind"] for c in first.children] == ["Job", "Deployment"]
    assert first.options == [oh.ChildOptions().recreate().ready_when_condition("Complete"), oh.ChildOptions()]
    assert conditions(first) == [("MigrationComplete", "False", "NotCreated"), ("Available", "False", "NotCreated")]
    assert first.status.conditions[0].observed_generation == 4
    # The host applied the Job and it ran: the migration of these inputs is complete.
    job = {**first.children[0], "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    done = app.run_reconcile(parent("app:1", 2), [json.dumps(job)])
    assert conditions(done)[0] == ("MigrationComplete", "True", "RolloutComplete")
    assert done.children == first.children
    # A new schema version: a new template (so the host recreates the Job), and the old run's
    # completion is not this one's.
    moved = app.run_reconcile(parent("app:1", 3), [json.dumps(job)])
    annotation = lambda d: d.children[0]["spec"]["template"]["metadata"]["annotations"][oh.CONTENT_HASH_ANNOTATION]
    assert annotation(moved) != annotation(first)
    assert conditions(moved)[0] == ("MigrationComplete", "False", "SpecNotApplied")
    assert moved.status.conditions[0].message == 'the Job "a-migrate" does not carry the desired spec yet'


def test_the_readme_convert_round_trips(readme):
    widget = readme["widget"]
    assert widget.info()["implements"] == ["convert"]
    assert [v["name"] for v in widget.info()["crd"]["spec"]["versions"]] == ["v1", "v2"]
    one = json.dumps({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                      "spec": {"replicas": 3}})
    two = widget.run_convert(one, "v2")
    assert json.loads(two)["spec"] == {"replicas": {"count": 3}}
    assert json.loads(widget.run_convert(two, "v1")) == json.loads(one)
    with pytest.raises(oh.InvalidSpec, match="cannot convert a Widget from v1 to v3: it has v1 and v2"):
        widget.run_convert(one, "v3")
