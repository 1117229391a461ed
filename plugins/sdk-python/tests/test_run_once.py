"""A step that runs once (`Desired.run_once`) and where a workload's rollout stands
(`Observed.rollout_of`): the Rust SDK's children.rs tests, ported, and its outputs."""

from __future__ import annotations

import copy
import json

import pytest

import operator_host as oh
from operator_host import CONTENT_HASH_ANNOTATION, ChildOptions, Condition, Retry, Rollout, kinds

BARRIER = ChildOptions().recreate().ready_when_condition("Complete")


def template_hash(desired: oh.Desired) -> object:
    return desired.children[0]["spec"]["template"]["metadata"]["annotations"][CONTENT_HASH_ANNOTATION]


def test_a_run_once_job_is_recreated_behind_a_barrier_and_changes_with_its_inputs() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": oh.child_meta("migrate")}
    first = oh.Desired().run_once(job, {"schema": 3})
    assert first.options == [BARRIER]
    same = oh.Desired().run_once(job, {"schema": 3})
    following = oh.Desired().run_once(job, {"schema": 4})
    assert template_hash(first) == template_hash(same)
    assert template_hash(first) != template_hash(following)
    assert isinstance(template_hash(first), str)


def serde_json_text(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_run_once_makes_the_rust_sdks_job() -> None:
    # `Desired::run_once` of the same Jobs and inputs in the Rust SDK, printed by a snippet
    # built against its rlib: the content hash, the spec hash over it, and where they go.
    once = {"metadata": {"name": "once"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "m", "image": "app:2"}]}}}}  # fmt: skip
    desired = oh.Desired().run_once(once, {"image": "app:2", "schema": 4})
    desired.run_once({"metadata": {"name": "onceless"}}, None)
    assert [serde_json_text(c) for c in desired.children] == [
        '{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":'
        '"ac00e41415aab2e247e3b477d8601a0e47d25a46ee69dc561f706b9639e86ab3"},"name":"once"},'
        '"spec":{"template":{"metadata":{"annotations":{"sdk.operator-host.dev/content-hash":'
        '"2f8869cf48c9e58e7819601615aeadf739e3583e9abd11863f50abc5e4a89aec"}},'
        '"spec":{"containers":[{"image":"app:2","name":"m"}],"restartPolicy":"Never"}}}}',
        '{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":'
        '"9283f129e43dfbdeb8467215c90a7f4dfea30bf626218debcef34cd19506ab15"},"name":"onceless"},'
        '"spec":{"template":{"metadata":{"annotations":{"sdk.operator-host.dev/content-hash":'
        '"74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"}}}}}',
    ]  # fmt: skip
    assert desired.options == [BARRIER, BARRIER]


def test_run_once_changes_a_copy_and_keeps_what_the_job_has() -> None:
    job = {"metadata": {"name": "m"},
           "spec": {"template": {"metadata": {"labels": {"app": "m"}, "annotations": {"a": "b"}}}}}  # fmt: skip
    before = copy.deepcopy(job)
    child = oh.Desired().run_once(job, ["x"]).children[0]
    assert job == before
    assert (child["apiVersion"], child["kind"]) == ("batch/v1", "Job")
    template = child["spec"]["template"]["metadata"]
    assert template["labels"] == {"app": "m"}
    assert template["annotations"] == {"a": "b", CONTENT_HASH_ANNOTATION: oh.content_hash(["x"])}
    # A null level is an empty one, as Rust's None.
    nulls = oh.Desired().run_once({"metadata": {"name": "n"}, "spec": {"template": {"metadata": None}}}, 1)
    assert list(nulls.children[0]["spec"]["template"]["metadata"]["annotations"]) == [CONTENT_HASH_ANNOTATION]


@pytest.mark.parametrize(
    "job,message",
    [
        ({"apiVersion": "apps/v1", "kind": "Deployment"}, "run_once takes a batch/v1 Job, got 'apps/v1' 'Deployment'"),
        ({"kind": "CronJob"}, "run_once takes a batch/v1 Job, got 'batch/v1' 'CronJob'"),
        ({"spec": []}, "a run-once Job's spec is not an object"),
        ({"spec": {"template": {"metadata": {"annotations": "x"}}}},
         "a run-once Job's spec.template.metadata.annotations is not an object"),
        ("Job", "run_once takes a Job as a dict, got str"),
    ],
)  # fmt: skip
def test_run_once_refuses_what_is_not_a_job(job: object, message: str) -> None:
    with pytest.raises(TypeError) as error:
        oh.Desired().run_once(job, 1)  # type: ignore[arg-type]
    assert str(error.value) == message


def test_inputs_that_are_not_json_are_a_retry() -> None:
    with pytest.raises(Retry) as error:
        oh.Desired().run_once({"metadata": {"name": "m"}}, {1, 2})
    assert error.value.message == "cannot serialize the hashed content: a set is not JSON"


def observed_run(desired: oh.Desired, conditions: list) -> oh.Observed:
    """The Job `desired` holds as the API server would hold it once applied, with `conditions`."""
    job = copy.deepcopy(desired.children[0])
    job["spec"]["template"]["metadata"]["labels"] = {"batch.kubernetes.io/job-name": "migrate"}
    job["status"] = {"conditions": conditions}
    return oh.Observed([job])


def migration(schema: int) -> oh.Desired:
    job = {"metadata": oh.child_meta("migrate"),
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "m", "image": "app:1"}]}}}}  # fmt: skip
    return oh.Desired().run_once(job, {"schema": schema})


def test_the_rollout_of_a_run_once_job_is_the_run_of_these_inputs() -> None:
    complete = [{"type": "Complete", "status": "True"}]
    current, following = migration(3), migration(4)
    assert oh.Observed([]).rollout_of(kinds.JOB, "migrate", current) == Rollout.pending(
        "NotCreated", 'the Job "migrate" is not created yet'
    )
    assert observed_run(current, []).rollout_of(kinds.JOB, "migrate", current) == Rollout.pending(
        "JobRunning", 'waiting for Job "migrate" to complete'
    )
    done = observed_run(current, complete)
    assert done.rollout_of(kinds.JOB, "migrate", current) == Rollout.complete()
    # New inputs: the completed Job is the old run's, until the host has recreated it.
    assert done.rollout_of(kinds.JOB, "migrate", following) == Rollout.pending(
        "SpecNotApplied", 'the Job "migrate" does not carry the desired spec yet'
    )
    failed = observed_run(current, [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}])
    assert failed.rollout_of(kinds.JOB, "migrate", current).condition("MigrationComplete", 5) == Condition(
        "MigrationComplete", "False", "JobFailed", 'Job "migrate" failed (DeadlineExceeded)', 5
    )
    # Another kind of the same name is not the Job.
    assert done.rollout_of(kinds.DEPLOYMENT, "migrate", current).reason() == "NotCreated"


def test_an_observed_workload_that_does_not_decode_is_a_retry() -> None:
    broken = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
              "status": {"conditions": [{"type": "Complete", "status": True}]}}  # fmt: skip
    with pytest.raises(Retry) as error:
        oh.Observed([broken]).rollout_of(kinds.JOB, "migrate", migration(3))
    assert error.value.message == (
        'observed Job "migrate" does not decode: invalid type: boolean `true`, expected a borrowed string'
    )
