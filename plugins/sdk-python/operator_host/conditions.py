"""Kubernetes-style status conditions, without a clock."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional


@dataclass
class Condition:
    """A status condition in the shape of `metav1.Condition`.

    Plugins have no clock, so `last_transition_time` stays empty: the host stamps it when it
    writes status, keeping the previous time while the condition's status is unchanged.
    """

    type: str
    status: str
    reason: str
    message: str
    observed_generation: Optional[int] = None
    last_transition_time: Optional[str] = None

    @classmethod
    def new(
        cls, type: str, ok: bool, reason: str, message: str, observed_generation: Optional[int]
    ) -> "Condition":
        """A condition that is `True` when `ok`, `False` otherwise."""
        return cls(type, "True" if ok else "False", reason, message, observed_generation)

    @classmethod
    def ready_from_phase(
        cls, phase: str, ready: bool, message: str, observed_generation: Optional[int]
    ) -> "Condition":
        """The `Ready` condition of a parent in `phase`, with the phase as its reason in
        CamelCase (`ONLINE_PARTIAL` and `online-partial` give `OnlinePartial`), so that
        `kubectl wait --for=condition=Ready` works."""
        return cls.new("Ready", ready, camel_case_reason(phase), message, observed_generation)


def camel_case_reason(text: str) -> str:
    """`text` as a condition reason: words split at anything but ASCII letters and digits,
    each capitalised; `Unknown` when nothing is left."""
    reason = ""
    for word in re.split(r"[^A-Za-z0-9]", text):
        if not word:
            continue
        # A word already in CamelCase (`RolloutComplete`) keeps its inner capitals.
        keep_case = any("a" <= c <= "z" for c in word)
        rest = word[1:] if keep_case else word[1:].lower()
        reason += word[0].upper() + rest
    return reason.lstrip("0123456789") or "Unknown"


def conditions_schema() -> dict:
    """The CRD schema of a `conditions` status field: a list map keyed by `type`."""
    return {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["status", "type"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "observedGeneration": {"type": "integer", "format": "int64"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
            },
        },
    }
