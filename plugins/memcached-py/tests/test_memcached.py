"""Native unit tests of the Python Memcached reconcile logic (the same cases as the Rust plugin's)."""

from __future__ import annotations

import copy
import json

import pytest

import operator_host as oh
from memcached import DEFAULT_IMAGE, DEFAULT_PORT, MAX_SIZE, operator


def memcached(name="mc", size=2, **spec) -> dict:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default", "generation": 3},
        "spec": {"size": size, **spec},
    }


def reconcile(cr: dict, observed: list[dict] = ()) -> oh.Desired:
    return operator.run_reconcile(json.dumps(cr), [json.dumps(o) for o in observed])


def status(desired: oh.Desired) -> dict:
    return oh.to_json(desired.status)


def available(desired: oh.Desired) -> tuple[str, str]:
    condition = status(desired)["conditions"][0]
    assert condition["type"] == "Available"
    return condition["status"], condition["reason"]


def child(desired: oh.Desired, kind: str) -> dict:
    return next(c for c in desired.children if c["kind"] == kind)


def applied_deployment(cr: dict, ready: int) -> dict:
    """The Deployment the host applied for `cr`, once its controller observed it with
    `ready` pods ready, all updated and available."""
    deployment = copy.deepcopy(child(reconcile(cr), "Deployment"))
    deployment["metadata"]["generation"] = 2
    deployment["status"] = {"observedGeneration": 2, "replicas": ready, "readyReplicas": ready,
                            "updatedReplicas": ready, "availableReplicas": ready}
    return deployment


def test_deployment_replicas_follow_size_and_service_targets_the_port():
    desired = reconcile(memcached(size=3, containerPort=1234))
    deployment = child(desired, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == DEFAULT_IMAGE
    assert container["ports"][0]["containerPort"] == 1234
    service = child(desired, "Service")
    assert service["spec"]["ports"][0]["port"] == 1234
    assert service["spec"]["ports"][0]["targetPort"] == "memcached"


def test_selectors_are_unique_per_cr():
    a = child(reconcile(memcached("a")), "Deployment")["spec"]["selector"]["matchLabels"]
    b = child(reconcile(memcached("b")), "Deployment")["spec"]["selector"]["matchLabels"]
    assert a != b


def test_status_without_an_observed_deployment_is_not_available():
    desired = reconcile(memcached())
    condition = status(desired)["conditions"][0]
    assert status(desired)["readyReplicas"] == 0
    assert (condition["status"], condition["reason"]) == ("False", "DeploymentNotFound")
    assert condition["observedGeneration"] == 3
    assert "lastTransitionTime" not in condition


def test_status_is_available_once_every_pod_is_ready():
    cr = memcached()
    assert available(reconcile(cr, [applied_deployment(cr, 1)])) == ("False", "RolloutInProgress")
    ready = reconcile(cr, [applied_deployment(cr, 2)])
    assert available(ready) == ("True", "MinimumReplicasReady")
    assert status(ready)["selector"] == "app.kubernetes.io/instance=mc,app.kubernetes.io/name=memcached"


def test_status_reports_scaling_while_the_deployment_has_the_old_size():
    observed = [applied_deployment(memcached(), 2)]
    assert available(reconcile(memcached(size=5), observed))[1] == "Scaling"


def test_status_is_not_available_while_the_observed_deployment_has_the_old_image():
    old = memcached()
    new = memcached(image="memcached:1.6.40")
    new["metadata"]["generation"] = 4
    desired = reconcile(new, [applied_deployment(old, 2)])
    assert available(desired) == ("False", "SpecNotApplied")
    assert status(desired)["conditions"][0]["observedGeneration"] == 4
    assert available(reconcile(new, [applied_deployment(new, 2)])) == ("True", "MinimumReplicasReady")


def test_status_is_not_available_until_the_new_pods_replace_the_old_ones():
    cr = memcached()
    rolling = applied_deployment(cr, 2)
    rolling["metadata"]["generation"] = 3
    assert available(reconcile(cr, [rolling])) == ("False", "SpecNotObserved")
    rolling["status"].update(observedGeneration=3, replicas=3, readyReplicas=3)
    desired = reconcile(cr, [rolling])
    assert available(desired) == ("False", "RolloutInProgress")
    assert "1 old replicas" in status(desired)["conditions"][0]["message"]
    rolling["status"]["replicas"] = 2
    assert available(reconcile(cr, [rolling])) == ("True", "MinimumReplicasReady")


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"size": MAX_SIZE + 1}, "spec.size: must be between 0 and 100, got 101"),
        ({"size": 1, "containerPort": 70000}, "spec.containerPort: must be between 1 and 65535, got 70000"),
        ({"size": 1, "image": "bad image"}, 'spec.image: must be a container image reference, got "bad image"'),
    ],
)
def test_out_of_range_values_are_rejected_with_the_field(spec, message):
    with pytest.raises(oh.InvalidSpec) as error:
        reconcile(memcached(**spec))
    assert error.value.message == message


@pytest.mark.parametrize(
    "resources, prefix",
    [
        ({"requests": {"k": 1}}, 'spec.resources.requests["k"]: '),
        ({"requests": {"bad key": 1}}, 'spec.resources.requests["bad key"]: '),
        ({"limits": {"cpu": "not-a-quantity"}}, 'spec.resources.limits["cpu"]: '),
        ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, 'spec.resources.requests["cpu"]: '),
        ({"requests": {"example.com/gpu": 1}}, 'spec.resources.limits["example.com/gpu"]: '),
    ],
)
def test_resources_the_api_server_refuses_are_rejected_with_the_entry(resources, prefix):
    with pytest.raises(oh.InvalidSpec) as error:
        reconcile(memcached(resources=resources))
    assert error.value.message.startswith(prefix), error.value.message


def test_the_container_gets_resources_as_the_api_server_stores_them():
    desired = reconcile(memcached(resources={"requests": {"cpu": "0.5"}, "limits": {}, "claims": []}))
    container = child(desired, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "500m"}}
    none = child(reconcile(memcached()), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "resources" not in none


def test_the_deployment_carries_the_hash_of_its_spec_and_its_pods_do_not():
    desired = reconcile(memcached())
    deployment = child(desired, "Deployment")
    assert oh.SPEC_HASH_ANNOTATION in deployment["metadata"]["annotations"]
    assert "annotations" not in deployment["spec"]["template"]["metadata"]
    assert "annotations" not in child(desired, "Service")["metadata"]


def test_children_carry_no_namespace_or_owner():
    for c in reconcile(memcached()).children:
        assert "namespace" not in c["metadata"]
        assert "ownerReferences" not in c["metadata"]


def test_crd_declares_defaults_range_and_printer_columns():
    version = operator.parent.crd()["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["size"]["maximum"] == 100
    assert spec["image"]["default"] == DEFAULT_IMAGE
    assert spec["containerPort"]["default"] == DEFAULT_PORT
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names == ["Size", "Ready", "Available", "Image", "Age"]


def test_the_plugin_validates_and_defaults_at_admission():
    assert operator.info()["implements"] == ["validate", "default"]


@pytest.mark.parametrize(
    "spec, errors",
    [
        ({"size": MAX_SIZE + 1}, ["spec.size: Invalid value: must be between 0 and 100, got 101"]),
        ({"size": 1, "image": "bad image"},
         ['spec.image: Invalid value: must be a container image reference, got "bad image"']),
        ({"size": 1, "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
         ['spec.resources.requests["cpu"]: Invalid value: must be at most the limit of cpu (1), got 2']),
        ({"size": "two"}, ['spec.size: Invalid value: expected an integer, got "two"']),
        ({"size": 3}, []),
    ],
)
def test_validate_refuses_what_reconcile_refuses(spec, errors):
    cr = memcached(**spec)
    validation = operator.run_validate("create", json.dumps(cr), None)
    assert [str(e) for e in validation.errors] == errors
    assert validation.warnings == []


def test_validate_warns_that_size_zero_runs_no_pod():
    validation = operator.run_validate("update", json.dumps(memcached("idle", size=0)), json.dumps(memcached("idle")))
    assert validation.errors == []
    assert validation.warnings == ["Memcached idle: spec.size is 0, so no Memcached pod runs"]


@pytest.mark.parametrize(
    "image, defaulted",
    [
        ("memcached", "memcached:1.6.39-alpine"),
        ("mirror.example.com/library/memcached", "mirror.example.com/library/memcached:1.6.39-alpine"),
        ("memcached:1.6.40-alpine", None),
        ("memcached@sha256:abcd", None),
        ("example.com/memcached-exporter", None),
    ],
)
def test_default_pins_an_untagged_memcached_image(image, defaulted):
    cr = memcached(size=1, image=image)
    cr["spec"]["unmodelled"] = "kept"
    answer = json.loads(operator.run_default(json.dumps(cr)))
    assert answer["spec"] == {"size": 1, "image": defaulted or image, "unmodelled": "kept"}


def test_default_adds_no_image_when_none_is_given():
    cr = memcached(size=1)
    assert json.loads(operator.run_default(json.dumps(cr))) == cr
