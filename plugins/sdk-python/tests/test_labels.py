"""The recommended labels (`app_labels`, `component_labels`): the Rust SDK's labels.rs test, ported."""

from __future__ import annotations

import json

import operator_host as oh


def test_component_labels_add_the_component_to_the_app_labels() -> None:
    labels = oh.component_labels("webapp", "shop", "server")
    assert labels == {
        "app.kubernetes.io/component": "server",
        "app.kubernetes.io/instance": "shop",
        "app.kubernetes.io/name": "webapp",
    }
    assert oh.app_labels("webapp", "shop").items() <= labels.items()
    # Written in the order the Rust SDK's BTreeMap serializes them, so children render alike.
    assert json.dumps(labels) == json.dumps(labels, sort_keys=True)
    assert list(oh.app_labels("webapp", "shop")) == sorted(oh.app_labels("webapp", "shop"))
