"""The children a plugin observes and the children it desires, as JSON objects (dicts)."""

from __future__ import annotations

import json
from typing import Iterator, Optional

from ._fmt import _debug_str as debug_str
from .errors import Retry
from .kinds import Kind
from .view import WorkloadView, stamp_spec_hash


def child_meta(name: str, labels: Optional[dict[str, str]] = None) -> dict:
    """Metadata of a child: its name and labels only.

    The host adds the namespace, the owner reference and its ownership labels; a plugin
    that sets them itself is refused, so children stay independent of who owns them.
    """
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return meta


class Observed:
    """The children the host observed for one parent, as read from the API server."""

    def __init__(self, objects: list[dict]) -> None:
        self.objects = objects

    @classmethod
    def from_json(cls, texts: list[str]) -> "Observed":
        """Observed children from the JSON texts of the request."""
        objects = []
        for index, text in enumerate(texts):
            try:
                objects.append(json.loads(text))
            except ValueError as e:
                raise Retry(f"observed child #{index} is not valid JSON: {e}") from None
        return cls(objects)

    def get(self, kind: Kind, name: str) -> Optional[dict]:
        """The observed child of `kind` named `name`, if there is one."""
        return next(
            (o for o in self.all(kind) if o.get("metadata", {}).get("name") == name), None
        )

    def all(self, kind: Kind) -> list[dict]:
        """Every observed child of `kind`."""
        return [o for o in self.objects if kind.matches(o)]

    def workload(self, kind: Kind, name: str) -> Optional[WorkloadView]:
        """The observed Deployment or StatefulSet named `name`, as a view of what its
        rollout status needs (see `WorkloadView.rollout_of`)."""
        found = self.get(kind, name)
        if found is None:
            return None
        try:
            return WorkloadView(found)
        except ValueError as e:
            raise Retry(f"observed {kind.kind} {debug_str(name)} does not decode: {e}") from None

    def __len__(self) -> int:
        return len(self.objects)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.objects)


class Desired:
    """What `reconcile` returns: the children that should exist, the status, and when to
    be called again."""

    def __init__(self) -> None:
        self.children: list[dict] = []
        self.status: object = {}
        self.requeue_after_ms: Optional[int] = None

    def child(self, child: dict) -> "Desired":
        """Adds a child: a JSON object with `apiVersion`, `kind` and `metadata.name`.

        An `apps/v1` workload (Deployment, StatefulSet, DaemonSet, ReplicaSet) gets the
        annotation `SPEC_HASH_ANNOTATION`, the hash of its spec, so that its observed copy
        tells whether it carries this spec yet (`WorkloadView.rollout_of`).
        """
        for key in ("apiVersion", "kind"):
            if not isinstance(child.get(key), str):
                raise Retry(f"a desired child has no {key}: {json.dumps(child)[:120]}")
        stamp_spec_hash(child)
        self.children.append(child)
        return self

    def get(self, kind: Kind, name: str) -> Optional[dict]:
        """The desired child of `kind` named `name`, if one was added."""
        return next(
            (
                c
                for c in self.children
                if kind.matches(c) and c.get("metadata", {}).get("name") == name
            ),
            None,
        )
