"""The Rust SDK's view.rs tests, ported: content and spec hashes, and rollout status by kind."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Optional

import pytest

from operator_host.conditions import Condition
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


def test_a_daemon_set_is_complete_when_every_node_runs_an_available_updated_pod() -> None:
    def daemon_set(status: dict) -> dict:
        return {"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "agent", "generation": 3}, "spec": {}, "status": status}  # fmt: skip

    done = daemon_set({"observedGeneration": 3, "desiredNumberScheduled": 2,
                       "updatedNumberScheduled": 2, "numberAvailable": 2})  # fmt: skip
    assert rollout(done) == Rollout.complete()
    updating = daemon_set({"observedGeneration": 3, "desiredNumberScheduled": 2,
                           "updatedNumberScheduled": 1, "numberAvailable": 2})  # fmt: skip
    assert pending_reason(updating) == "RolloutInProgress"
    unavailable = daemon_set({"observedGeneration": 3, "desiredNumberScheduled": 2,
                              "updatedNumberScheduled": 2, "numberAvailable": 1})  # fmt: skip
    assert pending_reason(unavailable) == "RolloutInProgress"
    unobserved = daemon_set({"observedGeneration": 2, "desiredNumberScheduled": 2,
                             "updatedNumberScheduled": 2, "numberAvailable": 2})  # fmt: skip
    assert pending_reason(unobserved) == "SpecNotObserved"


def job(conditions: list) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
            "spec": {}, "status": {"conditions": conditions}}  # fmt: skip


def test_a_job_is_complete_once_its_complete_condition_holds_and_failed_once_failed_does() -> None:
    assert pending_reason(job([])) == "JobRunning"
    complete = job([{"type": "Complete", "status": "True"}])
    assert rollout(complete) == Rollout.complete()
    not_yet = job([{"type": "Complete", "status": "False"}])
    assert pending_reason(not_yet) == "JobRunning"
    failed = rollout(job([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]))
    assert failed.reason() == "JobFailed"
    assert "BackoffLimitExceeded" in failed.message(), repr(failed)


def migrate_job(command: str) -> dict:
    """What k8s-openapi serializes for the Rust test's Job of `command`."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
            "spec": {"template": {"metadata": {"name": "migrate", "labels": {"run": command}}}}}  # fmt: skip


def test_an_old_jobs_completion_is_not_the_desired_jobs() -> None:
    old = Desired().child(migrate_job("v1"))
    observed = copy.deepcopy(old.children[0])
    observed["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    view = WorkloadView(observed)
    assert view.rollout_of(old) == Rollout.complete()
    # The plugin now wants the Job of new inputs: the old one's completion says nothing.
    new = Desired().child(migrate_job("v2"))
    assert view.rollout_of(new).reason() == "SpecNotApplied"


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
    replica_set = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                   "metadata": {"name": "x", "generation": 1},
                   "status": {"observedGeneration": 1}}  # fmt: skip
    assert rollout(replica_set).reason() == "UnsupportedKind"


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
    ds = {"kind": "DaemonSet", "metadata": {"name": "agent", "generation": 3}}
    assert rollout({**ds, "status": {"observedGeneration": 2}}).message() == (
        "waiting for the DaemonSet controller to observe its spec"
    )
    assert rollout({**ds, "status": {"observedGeneration": 3, "desiredNumberScheduled": 2,
                                     "updatedNumberScheduled": 1}}).message() == (
        "1 of 2 new pods have been updated"
    )  # fmt: skip
    assert rollout({**ds, "status": {"observedGeneration": 3, "desiredNumberScheduled": 2,
                                     "updatedNumberScheduled": 2, "numberAvailable": 1}}).message() == (
        "1 of 2 updated pods are available"
    )  # fmt: skip
    # A DaemonSet whose controller counted no node is complete, as kubectl says.
    assert rollout({**ds, "status": {"observedGeneration": 3}}) == Rollout.complete()
    assert rollout(job([])) == Rollout.pending("JobRunning", 'waiting for Job "migrate" to complete')
    failed = [{"type": "Complete", "status": "False"},
              {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]  # fmt: skip
    assert rollout(job(failed)) == Rollout.failed(
        "JobFailed", 'Job "migrate" failed (BackoffLimitExceeded)'
    )
    assert rollout(job([{"type": "Failed", "status": "True"}])) == Rollout.failed(
        "JobFailed", 'Job "migrate" failed (no reason given)'
    )
    # Complete wins over Failed; a condition that is not True does not hold.
    assert rollout(job([*failed, {"type": "Complete", "status": "True"}])).is_complete()
    assert rollout(job([{"type": "Failed", "status": "Unknown"}])).reason() == "JobRunning"
    # A Job has no observed generation: one that never reports it still completes.
    assert "generation" not in job([])["metadata"]
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
    batch = {"apiVersion": "batch/v1", "kind": "Job", "spec": {}}
    stamp_spec_hash(batch)
    assert batch["metadata"] == {"annotations": {SPEC_HASH_ANNOTATION: spec_hash({})}}
    # Each kind under its own API version only.
    for api_version, kind in [("apps/v1", "Job"), ("batch/v1", "Deployment"),
                              ("batch/v1", "CronJob"), ("apps/v2", "Deployment")]:  # fmt: skip
        other = {"apiVersion": api_version, "kind": kind, "spec": {}}
        stamp_spec_hash(other)
        assert "metadata" not in other, other
    specless = {"apiVersion": "apps/v1", "kind": "Deployment"}
    stamp_spec_hash(specless)
    assert "metadata" not in specless
    null_spec = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": None}
    stamp_spec_hash(null_spec)
    assert null_spec["metadata"] == {"annotations": {SPEC_HASH_ANNOTATION: spec_hash(None)}}
    kept = {"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {}, "metadata": None}
    stamp_spec_hash(kept)
    assert kept["metadata"] is None


# The Rust SDK's own stamps: `Desired::child` (and `run_once`) of these children, as k8s-openapi
# serializes them, printed by a snippet built against the SDK's rlib (`rustc --extern
# operator_host_sdk=...`). The whole child text must match, not only the hash.
RUST_CHILDREN = [
    (
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "agent", "labels": {"app": "agent"}},
         "spec": {"selector": {"matchLabels": {"app": "agent"}},
                  "template": {"metadata": {"labels": {"app": "agent"}},
                               "spec": {"containers": [{"name": "agent", "image": "agent:1.2",
                                                        "args": ["--node=$(NODE)", "\u2028é"]}]}}}},
        '{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":'
        '"d6a38dd85a52f25b84af2b82ed6d27db8481c5ecf8d27966b4d98085be3a5fbb"},"labels":{"app":"agent"},"name":"agent"},'
        '"spec":{"selector":{"matchLabels":{"app":"agent"}},"template":{"metadata":{"labels":{"app":"agent"}},'
        '"spec":{"containers":[{"args":["--node=$(NODE)","\u2028é"],"image":"agent:1.2","name":"agent"}]}}}}',
    ),
    (
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
         "spec": {"replicas": 2, "minReadySeconds": 5, "selector": {"matchLabels": {"app": "rs"}},
                  "template": {"metadata": {"labels": {"app": "rs"}},
                               "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                        "resources": {"limits": {"cpu": "500m"}}}]}}}},
        '{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":'
        '"fc60c3a7bc7b30d78fe824a0a6702a248c3c3105f08f0d7de3bf4249061a467a"},"name":"rs"},'
        '"spec":{"minReadySeconds":5,"replicas":2,"selector":{"matchLabels":{"app":"rs"}},'
        '"template":{"metadata":{"labels":{"app":"rs"}},"spec":{"containers":[{"image":"busybox:1.36",'
        '"name":"c","resources":{"limits":{"cpu":"500m"}}}]}}}}',
    ),
    (
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
         "spec": {"backoffLimit": 2,
                  "template": {"metadata": {"labels": {"run": "v1"}},
                               "spec": {"restartPolicy": "Never",
                                        "containers": [{"name": "migrate", "image": "app:1",
                                                        "command": ["migrate", "--to=3"]}]}}}},
        '{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":'
        '"3fdc4c836e505ad09559017226375157ba6b1a0ac19af62024a1ea5979cc2795"},"name":"migrate"},'
        '"spec":{"backoffLimit":2,"template":{"metadata":{"labels":{"run":"v1"}},"spec":{"containers":'
        '[{"command":["migrate","--to=3"],"image":"app:1","name":"migrate"}],"restartPolicy":"Never"}}}}',
    ),
    # A Job without a spec has nothing to hash (k8s-openapi leaves `spec` out when it is None).
    (
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bare"}},
        '{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"bare"}}',
    ),
    (
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
         "spec": {"replicas": 1, "selector": {}, "template": {}}},
        '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":'
        '"b972ac596267f34c70e946f4cd6bb64bf628e5319a2d38a86344befc76325797"},"name":"d"},'
        '"spec":{"replicas":1,"selector":{},"template":{}}}',
    ),
    (
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
         "spec": {"selector": {}, "template": {}}},
        '{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":'
        '"b9957ee119303188ab213b25045c618f62f898917b56c629ce8d207195807be2"},"name":"s"},'
        '"spec":{"selector":{},"template":{}}}',
    ),
]  # fmt: skip


def serde_json_text(value: object) -> str:
    """`value` as serde_json writes it (maps sorted, no spaces, non-ASCII as is)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("child,rust", RUST_CHILDREN, ids=lambda v: v["kind"] if isinstance(v, dict) else "")
def test_spec_hashes_equal_the_rust_sdks(child: dict, rust: str) -> None:
    stamped = Desired().child(copy.deepcopy(child)).children[0]
    assert serde_json_text(stamped) == rust


def test_a_rollout_is_a_condition() -> None:
    running = Rollout.pending("JobRunning", 'waiting for Job "migrate" to complete')
    assert running.condition("MigrationComplete", 7) == Condition(
        "MigrationComplete", "False", "JobRunning", 'waiting for Job "migrate" to complete', 7
    )
    assert Rollout.complete().condition("Available", None) == Condition(
        "Available", "True", "RolloutComplete", "rolled out", None
    )
    failed = Rollout.failed("JobFailed", 'Job "migrate" failed (BackoffLimitExceeded)')
    condition = failed.condition("MigrationComplete", 2)
    assert (condition.status, condition.reason) == ("False", "JobFailed")
    assert condition.last_transition_time is None


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
            {"status": {"conditions": [{"type": "Complete", "status": None}]}},
            "invalid type: null, expected a borrowed string",
        ),
        ({"status": {"numberAvailable": "2"}}, 'invalid type: string "2", expected i32'),
        (
            {"status": {"conditions": [["Complete", "True", "R", 1]]}},
            "invalid length 4, expected fewer elements in array",
        ),
        (
            ["apps/v1", "Deployment", {}, {}, {}, 1],
            "invalid length 6, expected fewer elements in array",
        ),
    ]:
        with pytest.raises(ValueError) as error:
            WorkloadView(obj)
        assert str(error.value) == message
    assert WorkloadView(["apps/v1", "Deployment"]).kind == "Deployment"
    # serde takes a struct from an array of its fields in order, the DaemonSet's and the
    # condition's status among them.
    status = WorkloadView({"status": [1, 2, 3, 4, 5, "c", "u", 6, 7, 8, [["Complete", "True", "R"]]]}).status
    assert (status.desired_number_scheduled, status.updated_number_scheduled, status.number_available) == (6, 7, 8)
    assert status.conditions[0].status == "True" and status.conditions[0].reason == "R"
