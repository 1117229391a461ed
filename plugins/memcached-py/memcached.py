"""operator-host plugin for Memcached, in Python: one Deployment and one Service per `Memcached` CR."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Optional

import operator_host as oh
from operator_host import Condition, Field, kinds
from operator_host.k8s_schemas import RESOURCE_REQUIREMENTS

#: Largest `spec.size` accepted (the CRD schema says the same).
MAX_SIZE = 100
#: The image used when `spec.image` is not set.
DEFAULT_IMAGE = "memcached:1.6.39-alpine"
#: The port used when `spec.containerPort` is not set.
DEFAULT_PORT = 11211


@dataclass
class MemcachedSpec:
    """The desired state of a Memcached cache."""

    size: Annotated[int, Field(minimum=0, maximum=100, description="Number of Memcached pods.")]
    image: Annotated[str, Field(description="Container image.")] = DEFAULT_IMAGE
    container_port: Annotated[
        int,
        Field(minimum=1, maximum=65535, description="Port Memcached listens on, and the Service's port."),
    ] = DEFAULT_PORT
    resources: Annotated[
        Optional[dict],
        Field(schema=RESOURCE_REQUIREMENTS, description="Compute resources of the Memcached container."),
    ] = None


@dataclass
class MemcachedStatus:
    """The observed state of a Memcached cache."""

    ready_replicas: Annotated[int, Field(description="Pods of the Deployment that are ready.")] = 0
    selector: Annotated[str, Field(description="The label selector of the pods, as a string.")] = ""
    conditions: Annotated[
        list[Condition],
        Field(
            schema=oh.conditions_schema(),
            description="`Available`: whether the Deployment has rolled out the current spec (image, port, resources, size) and its `size` pods are ready.",
        ),
    ] = field(default_factory=list)


operator = oh.Operator(
    name="memcached",
    version="0.1.0",
    parent=oh.CustomResource(
        group="cache.example.com",
        version="v1alpha1",
        kind="Memcached",
        plural="memcacheds",
        short_names=("mc",),
        spec=MemcachedSpec,
        status=MemcachedStatus,
        printer_columns=(
            oh.PrinterColumn("Size", "integer", ".spec.size"),
            oh.PrinterColumn("Ready", "integer", ".status.readyReplicas"),
            oh.PrinterColumn("Available", "string", '.status.conditions[?(@.type=="Available")].status'),
            oh.PrinterColumn("Image", "string", ".spec.image", priority=1),
            oh.PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    ),
    children=[kinds.DEPLOYMENT, kinds.SERVICE],
)


@operator.validate
def admission_check(
    parent: oh.Parent[MemcachedSpec, MemcachedStatus],
    old: Optional[oh.Parent[MemcachedSpec, MemcachedStatus]],
) -> oh.Validation:
    """Refuses at `kubectl apply` what `reconcile` would report as an invalid spec."""
    validation = oh.Validation()
    validation.check(validate, parent.spec)
    if parent.spec.size == 0:
        validation.warn(f"Memcached {parent.name_any}: spec.size is 0, so no Memcached pod runs")
    return validation


@operator.default
def pin_image(parent: oh.Parent[MemcachedSpec, MemcachedStatus]) -> None:
    """An image given without a tag or digest gets the tag this plugin is tested with, so a
    cache never runs whatever `latest` is that day."""
    pinned = pinned_image(parent.spec.image)
    if pinned is not None:
        parent.spec.image = pinned


def pinned_image(image: str) -> Optional[str]:
    """`image` with `DEFAULT_IMAGE`'s tag when it names the `memcached` repository without a
    tag or digest (`memcached`, `mirror.example.com/library/memcached`); None otherwise."""
    last = image.rsplit("/", 1)[-1]
    _, _, tag = DEFAULT_IMAGE.partition(":")
    if last == "memcached" and "@" not in image:
        return f"{image}:{tag}"
    return None


@operator.reconcile
def reconcile(parent: oh.Parent[MemcachedSpec, MemcachedStatus], observed: oh.Observed) -> oh.Desired:
    spec = validate(parent.spec)
    labels = selector_labels(parent.name)
    desired = oh.Desired()
    desired.child(deployment(parent.name, spec, labels))
    desired.child(service(parent.name, spec, labels))
    observed_deployment = observed.workload(kinds.DEPLOYMENT, parent.name)
    desired.status = status(parent, observed_deployment, desired, labels)
    return desired


def validate(spec: MemcachedSpec) -> MemcachedSpec:
    """Checks what the CRD schema cannot express, and what `render` sees without an API
    server; returns the spec the children are made from, with `resources` as the API server
    stores them (so the applied Deployment is the one observed)."""
    if not 0 <= spec.size <= MAX_SIZE:
        raise oh.invalid_field("size", f"must be between 0 and {MAX_SIZE}, got {spec.size}")
    if not 1 <= spec.container_port <= 65535:
        raise oh.invalid_field(
            "containerPort", f"must be between 1 and 65535, got {spec.container_port}"
        )
    if not spec.image.strip() or any(c.isspace() for c in spec.image):
        raise oh.invalid_field(
            "image", f"must be a container image reference, got {oh.debug_str(spec.image)}"
        )
    resources = (
        oh.validate_container_resources("resources", spec.resources)
        if spec.resources is not None
        else None
    )
    return MemcachedSpec(spec.size, spec.image, spec.container_port, resources)


def selector_labels(name: str) -> dict[str, str]:
    """Labels that select exactly one CR's pods: two CRs in a namespace never share them."""
    return {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": name}


def child_labels(selector: dict[str, str]) -> dict[str, str]:
    return {**selector, "app.kubernetes.io/component": "cache"}


def deployment(name: str, spec: MemcachedSpec, selector: dict[str, str]) -> dict:
    probe = {"tcpSocket": {"port": "memcached"}, "periodSeconds": 10}
    container = {
        "name": "memcached",
        "image": spec.image,
        "args": ["-m=64", "-o", "modern", f"-p={spec.container_port}"],
        "ports": [{"name": "memcached", "containerPort": spec.container_port, "protocol": "TCP"}],
        "readinessProbe": probe,
        "livenessProbe": probe,
        "securityContext": oh.restricted_container_security_context(),
    }
    if spec.resources is not None:
        container["resources"] = spec.resources
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": oh.child_meta(name, child_labels(selector)),
        "spec": {
            "replicas": spec.size,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": child_labels(selector)},
                "spec": {
                    "containers": [container],
                    # The image runs as its own non-root user (memcache).
                    "securityContext": oh.restricted_pod_security_context(),
                },
            },
        },
    }


def service(name: str, spec: MemcachedSpec, selector: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": oh.child_meta(name, child_labels(selector)),
        "spec": {
            "selector": selector,
            "ports": [
                {
                    "name": "memcached",
                    "port": spec.container_port,
                    "targetPort": "memcached",
                    "protocol": "TCP",
                }
            ],
        },
    }


def status(
    parent: oh.Parent[MemcachedSpec, MemcachedStatus],
    observed: Optional[oh.WorkloadView],
    desired: oh.Desired,
    selector: dict[str, str],
) -> MemcachedStatus:
    """Status from the observed Deployment: nothing is assumed that was not observed.

    `Available` is true only once the Deployment carries the spec in `desired` and has
    rolled it out by `kubectl rollout status`'s rules: the Deployment observed here is the one
    before this answer is applied, so after an image change it is the old one.
    """
    generation = parent.generation
    size = parent.spec.size
    ready = (observed.status.ready_replicas if observed else None) or 0
    if observed is None:
        available = Condition.new(
            "Available", False, "DeploymentNotFound", "the Deployment has not been observed yet", generation
        )
    elif observed.spec.replicas != size:
        available = Condition.new(
            "Available", False, "Scaling", f"the Deployment is being scaled to {size} replicas", generation
        )
    else:
        rollout = observed.rollout_of(desired)
        if rollout.is_complete():
            message, reason = f"{ready} of {size} pods are ready", "MinimumReplicasReady"
        else:
            message = f"{ready} of {size} pods are ready; rollout: {rollout.message()}"
            reason = rollout.reason()
        available = Condition.new("Available", rollout.is_complete(), reason, message, generation)
    return MemcachedStatus(
        ready_replicas=ready,
        selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())),
        conditions=[available],
    )
