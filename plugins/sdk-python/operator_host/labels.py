"""The recommended labels of a parent's children, and selectors of one component's pods only."""

from __future__ import annotations

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"


def app_labels(app: str, instance: str) -> dict[str, str]:
    """`app.kubernetes.io/name: app` and `app.kubernetes.io/instance: instance` (the parent's
    name): labels every child of one parent can carry, and a selector of that parent's pods
    when it has one kind of pod. Keys in sorted order, as the Rust SDK writes them."""
    return {INSTANCE_LABEL: instance, NAME_LABEL: app}


def component_labels(app: str, instance: str, component: str) -> dict[str, str]:
    """`app_labels` and `app.kubernetes.io/component: component`. Give each kind of pod of a
    parent (the server's, a migration Job's, ...) a component of its own, and a Service's or a
    PodDisruptionBudget's selector made of these labels matches that component's pods only,
    never another child's (`render` and `conformance` warn when two children's selectors do)."""
    return {COMPONENT_LABEL: component, **app_labels(app, instance)}
