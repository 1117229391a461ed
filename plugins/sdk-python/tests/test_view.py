"""The Rust SDK's view.rs tests, ported: content and spec hashes, and rollout status by kind."""

from __future__ import annotations

import copy
import hashlib
from typing import Optional

import pytest

from operator_host.errors import Retry
from operator_host.view import (
    SPEC_HASH_ANNOTATION,
    Rollout,
    WorkloadView,
    content_hash,
    spec_hash,
    stamp_spec_hash,
)


def test_content_hash_is_stable_and_follows_the_content() -> None:
    data = {"a": "1", "b": "2"}
    # Pinned: a hash that changed between builds would roll every pod that carries it.
    assert content_hash(data) == "21f76dfbfe6dfe21f762080ef484112cf2952974cef30741fd1931e1c6d92112"
    assert content_hash({"b": "2", "a": "1"}) == content_hash(data)
    assert content_hash({"a": "1", "b": "3"}) != content_hash(data)


def deployment(replicas: int, status: dict) -> dict:
    """A Deployment of generation 2 with `spec.replicas` and the given status."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "generation": 2},
        "spec": {"replicas": replicas},
        "status": status,
    }


def rollout(obj: dict) -> Rollout:
    return WorkloadView(obj).rollout()


def pending_reason(obj: dict) -> str:
    found = rollout(obj)
    assert not found.is_complete(), repr(found)
    return found.reason()


def test_a_deployment_is_complete_when_every_replica_is_updated_and_available() -> None:
    done = deployment(
        2,
        {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
         "availableReplicas": 2, "readyReplicas": 2},
    )  # fmt: skip
    assert rollout(done) == Rollout.complete()


def test_a_deployment_whose_spec_is_not_observed_is_pending() -> None:
    # The counters describe generation 1: they say nothing of generation 2.
    stale = deployment(
        2,
        {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2},
    )
    assert pending_reason(stale) == "SpecNotObserved"
    never = deployment(2, {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2})
    assert pending_reason(never) == "SpecNotObserved"


def test_a_deployment_past_its_progress_deadline_has_failed() -> None:
    stuck = deployment(
        2,
        {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
         "conditions": [{"type": "Available", "reason": "MinimumReplicasAvailable"},
                        {"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]},
    )  # fmt: skip
    found = rollout(stuck)
    assert found.state == Rollout.FAILED, repr(found)
    assert found.reason() == "ProgressDeadlineExceeded"


def test_a_deployment_with_fewer_updated_replicas_than_desired_is_pending() -> None:
    # Scaling up: nothing old remains and all are available, but 2 of 3 exist.
    short = deployment(
        3,
        {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2},
    )
    assert pending_reason(short) == "RolloutInProgress"
    assert "2 of 3 new replicas" in rollout(short).message()


def test_a_deployment_with_old_replicas_left_is_pending() -> None:
    # Every new replica is there and available; one old pod has not terminated yet.
    surge = deployment(
        2,
        {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 3},
    )
    assert pending_reason(surge) == "RolloutInProgress"
    assert "1 old replicas" in rollout(surge).message()


def test_a_deployment_with_updated_replicas_not_available_is_pending() -> None:
    starting = deployment(
        2,
        {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
         "availableReplicas": 1, "readyReplicas": 2},
    )  # fmt: skip
    assert pending_reason(starting) == "RolloutInProgress"
    assert "1 of 2 updated" in rollout(starting).message()


def stateful_set(strategy: dict, status: dict) -> dict:
    """A StatefulSet of generation 5 with 3 replicas, `strategy` and the given status."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s", "generation": 5},
        "spec": {"replicas": 3, "updateStrategy": strategy},
        "status": status,
    }


def rolling(partition: int) -> dict:
    return {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}


def test_a_stateful_set_is_complete_when_every_pod_is_updated_and_ready() -> None:
    done = stateful_set(
        rolling(0),
        {"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
         "updatedReplicas": 3, "currentRevision": "s-2", "updateRevision": "s-2"},
    )  # fmt: skip
    assert rollout(done) == Rollout.complete()


def test_a_stateful_set_whose_spec_is_not_observed_is_pending() -> None:
    stale = stateful_set(
        rolling(0),
        {"observedGeneration": 4, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3},
    )
    assert pending_reason(stale) == "SpecNotObserved"


def test_a_stateful_set_with_pods_not_ready_is_pending() -> None:
    # Every pod is of the new revision, one is not ready yet.
    starting = stateful_set(
        rolling(0),
        {"observedGeneration": 5, "replicas": 3, "readyReplicas": 2,
         "updatedReplicas": 3, "currentRevision": "s-2", "updateRevision": "s-2"},
    )  # fmt: skip
    assert pending_reason(starting) == "RolloutInProgress"
    assert "1 pods to be ready" in rollout(starting).message()


def test_a_stateful_set_counts_updated_pods_above_its_partition() -> None:
    # All ready, but only 2 of 3 pods run the new revision.
    status = {"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
              "updatedReplicas": 2, "currentRevision": "s-1", "updateRevision": "s-2"}  # fmt: skip
    unpartitioned = stateful_set(rolling(0), copy.deepcopy(status))
    assert pending_reason(unpartitioned) == "RolloutInProgress"
    # With partition 1, pod 0 keeps the old revision by design.
    assert rollout(stateful_set(rolling(1), status)) == Rollout.complete()
    # A missing partition is the API server's default, 0.
    defaulted = stateful_set(
        {"type": "RollingUpdate", "rollingUpdate": {}},
        {"observedGeneration": 5, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 2},
    )
    assert pending_reason(defaulted) == "RolloutInProgress"


def test_a_stateful_set_without_rolling_update_settings_compares_revisions() -> None:
    def status(current: str) -> dict:
        return {"observedGeneration": 5, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                "currentRevision": current, "updateRevision": "s-2"}  # fmt: skip

    strategy = {"type": "RollingUpdate"}
    assert pending_reason(stateful_set(dict(strategy), status("s-1"))) == "RolloutInProgress"
    assert rollout(stateful_set(strategy, status("s-2"))) == Rollout.complete()


def test_an_on_delete_stateful_set_is_complete_only_once_every_pod_is_updated() -> None:
    def status(updated: int) -> dict:
        return {"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
                "updatedReplicas": updated}  # fmt: skip

    on_delete = {"type": "OnDelete"}
    assert pending_reason(stateful_set(dict(on_delete), status(2))) == "RolloutInProgress"
    assert rollout(stateful_set(on_delete, status(3))) == Rollout.complete()


def test_kinds_without_rollout_rules_are_not_complete() -> None:
    daemon_set = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                  "metadata": {"name": "x", "generation": 1},
                  "status": {"observedGeneration": 1}}  # fmt: skip
    assert rollout(daemon_set).reason() == "UnsupportedKind"


class Desired:
    """What the Rust tests use of `Desired`: `child` (which stamps workloads) and `children`."""

    def __init__(self) -> None:
        self.children: list[dict] = []

    def child(self, child: dict) -> "Desired":
        stamp_spec_hash(child)
        self.children.append(child)
        return self


def desired_deployment(image: str) -> Desired:
    # What k8s-openapi serializes for the Rust test's Deployment (its selector is required).
    return Desired().child(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {
                "replicas": 2,
                "selector": {},
                "template": {"spec": {"containers": [{"name": "c", "image": image}]}},
            },
        }
    )


def applied(desired: Desired) -> dict:
    """What the API server would hold after applying `desired`'s Deployment: its spec (plus a
    defaulted field), its annotations, generation 2, and a complete rollout."""
    obj = copy.deepcopy(desired.children[0])
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    obj["metadata"]["generation"] = 2
    obj["status"] = {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                     "availableReplicas": 2}  # fmt: skip
    return obj


def test_workloads_are_stamped_with_the_hash_of_their_spec_and_nothing_else_is() -> None:
    a = desired_deployment("memcached:1")

    def hash_of(d: Desired) -> Optional[str]:
        found = d.children[0]["metadata"]["annotations"][SPEC_HASH_ANNOTATION]
        return found if isinstance(found, str) else None

    found = hash_of(a)
    assert found is not None and len(found) == 64
    assert hash_of(a) == hash_of(desired_deployment("memcached:1"))
    assert hash_of(a) != hash_of(desired_deployment("memcached:2"))
    # The pod template is not annotated: stamping must never roll the pods.
    assert "metadata" not in a.children[0]["spec"]["template"]
    service = Desired().child({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "d"}})
    assert "annotations" not in service.children[0]["metadata"]


def test_the_rollout_of_a_changed_spec_is_pending_until_the_workload_carries_it() -> None:
    old = desired_deployment("memcached:1")
    new = desired_deployment("memcached:2")
    view = WorkloadView(applied(old))
    # Fully rolled out, and defaulted by the API server: current for what was applied...
    assert view.rollout() == Rollout.complete()
    assert view.is_current(old)
    assert view.rollout_of(old) == Rollout.complete()
    # ...but not for the spec the plugin is about to apply.
    assert not view.is_current(new)
    assert view.rollout_of(new).reason() == "SpecNotApplied"
    # A workload applied before the SDK stamped it is not current either.
    unstamped = applied(old)
    del unstamped["metadata"]["annotations"]
    view = WorkloadView(unstamped)
    assert view.rollout_of(old).reason() == "SpecNotApplied"
    # Nor is a workload the plugin does not desire (another kind of the same name).
    other_kind = applied(old)
    other_kind["kind"] = "StatefulSet"
    view = WorkloadView(other_kind)
    assert not view.is_current(old)


# Beyond the Rust tests: whole messages, the canonical JSON text, and decoding.


def test_messages_are_the_rust_ones_byte_for_byte() -> None:
    old = desired_deployment("memcached:1")
    unstamped = applied(old)
    del unstamped["metadata"]["annotations"]
    assert WorkloadView(unstamped).rollout_of(old.children) == Rollout.pending(
        "SpecNotApplied", 'the Deployment "d" does not carry the desired spec yet'
    )
    assert rollout(deployment(2, {})).message() == (
        "waiting for the Deployment controller to observe its spec"
    )
    stuck = deployment(2, {"observedGeneration": 2, "conditions": [
        {"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]})  # fmt: skip
    assert rollout(stuck) == Rollout.failed(
        "ProgressDeadlineExceeded", 'Deployment "d" exceeded its progress deadline'
    )
    surge = deployment(2, {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2})
    assert rollout(surge).message() == "1 old replicas are pending termination"
    revisions = stateful_set(
        {}, {"observedGeneration": 5, "readyReplicas": 3, "updatedReplicas": 1,
             "currentRevision": "s-1", "updateRevision": "s-2"}
    )  # fmt: skip
    assert rollout(revisions).message() == (
        "waiting for the rolling update to revision s-2 (1 pods updated)"
    )
    partitioned = stateful_set(
        rolling(1), {"observedGeneration": 5, "readyReplicas": 3, "updatedReplicas": 1}
    )
    assert rollout(partitioned).message() == "1 of 2 new pods have been updated"
    odd = {"kind": 'a"b', "metadata": {"name": "x"}}
    assert rollout(odd) == Rollout.failed("UnsupportedKind", 'no rollout rules for kind "a\\"b"')
    assert Rollout.complete().reason() == "RolloutComplete"
    assert Rollout.complete().message() == "rolled out"


def test_the_hashed_text_is_serde_json_s() -> None:
    def text_hash(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    value = {
        "z": [1, -2, 1.0, 0.5, 1e16, 1.5e-7, 0.00001, -0.0, True, False, None],
        "a": {"é/\u2028": "\"\\\n\t\x01\x7f/é"},
    }
    assert spec_hash(value) == text_hash(
        '{"a":{"é/\u2028":"\\"\\\\\\n\\t\\u0001\x7f/é"},'
        '"z":[1,-2,1.0,0.5,1e+16,1.5e-7,0.00001,-0.0,true,false,null]}'
    )
    # Keys serde_json writes as strings; what it cannot serialize is a Retry.
    assert content_hash({2: "x", True: "y"}) == spec_hash({"2": "x", "true": "y"})
    assert content_hash(float("nan")) == spec_hash(None)
    for bad, why in [({None: 1}, "key must be a string"), (2**64, "number out of range")]:
        with pytest.raises(Retry) as error:
            content_hash(bad)
        assert error.value.message == f"cannot serialize the hashed content: {why}"


def test_stamping_follows_the_rust_rules() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {}}
    stamp_spec_hash(job)
    assert "metadata" not in job
    specless = {"apiVersion": "apps/v1", "kind": "Deployment"}
    stamp_spec_hash(specless)
    assert "metadata" not in specless
    null_spec = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": None}
    stamp_spec_hash(null_spec)
    assert null_spec["metadata"] == {"annotations": {SPEC_HASH_ANNOTATION: spec_hash(None)}}
    kept = {"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {}, "metadata": None}
    stamp_spec_hash(kept)
    assert kept["metadata"] is None


def test_views_decode_like_serde() -> None:
    assert WorkloadView({}) == WorkloadView()
    view = WorkloadView({"kind": "Deployment", "status": {"conditions": [{"reason": None}]}})
    assert view.kind == "Deployment" and view.metadata.name == ""
    assert view.status.conditions[0].type_ == "" and view.spec.replicas is None
    for obj, message in [
        (None, "invalid type: null, expected struct WorkloadView"),
        ({"kind": 5}, "invalid type: integer `5`, expected a borrowed string"),
        ({"metadata": {"generation": 2.0}}, "invalid type: floating point `2.0`, expected i64"),
        ({"spec": {"replicas": 2**31}}, "invalid value: integer `2147483648`, expected i32"),
        ({"status": {"conditions": {}}}, "invalid type: map, expected a sequence"),
        ({"metadata": None}, "invalid type: null, expected struct MetadataView"),
        (
            ["apps/v1", "Deployment", {}, {}, {}, 1],
            "invalid length 6, expected fewer elements in array",
        ),
    ]:
        with pytest.raises(ValueError) as error:
            WorkloadView(obj)
        assert str(error.value) == message
    assert WorkloadView(["apps/v1", "Deployment"]).kind == "Deployment"
