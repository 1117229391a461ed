"""A hostile plugin in Python for the sandbox tests: each `Attack` CR names a resource attack to run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import operator_host as oh
from operator_host import Field

# State a call leaves behind: a fresh instance per call must start from zero again.
_calls = 0


@dataclass
class AttackSpec:
    """Which attack the next reconcile runs."""

    attack: str
    count: Annotated[int, Field(format="int64")] = 0


operator = oh.Operator(
    name="hostile",
    version="0.1.0",
    parent=oh.CustomResource(
        group="hostile.operator-host.dev", version="v1alpha1", kind="Attack", spec=AttackSpec,
        status=None,
    ),
    children=[oh.kinds.CONFIG_MAP],
)


@operator.reconcile
def reconcile(parent: oh.Parent[AttackSpec, None], observed: oh.Observed) -> oh.Desired:
    global _calls
    _calls += 1
    desired = oh.Desired()
    attack = parent.spec.attack
    if attack == "none":
        desired.status = {"attack": "none"}
    elif attack == "loop":
        while True:
            pass
    elif attack == "memory":
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))
    elif attack == "big-response":
        desired.status = {"blob": "x" * parent.spec.count}
    elif attack == "counter":
        desired.status = {"calls": _calls}
    else:
        raise oh.invalid_field("attack", f"unknown attack {oh.debug_str(attack)}")
    return desired
