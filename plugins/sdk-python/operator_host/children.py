"""The children a plugin observes (with the related objects it reads) and the children it desires, as JSON objects (dicts)."""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

from ._fmt import _debug_str as debug_str
from .errors import InvalidSpec, Retry
from .kinds import Kind
from .options import ChildOptions
from .schema import decode
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
    """The children the host observed for one parent, as read from the API server, and the
    related objects the plugin declared (`Operator(related=[...])`)."""

    def __init__(self, objects: list[dict], related: Optional[dict[str, list[dict]]] = None) -> None:
        self.objects = objects
        self._related: dict[str, list[dict]] = dict(related or {})

    @classmethod
    def from_json(
        cls, texts: list[str], related: Optional[list[tuple[str, list[str]]]] = None
    ) -> "Observed":
        """Observed children from the JSON texts of the request, and the related objects as
        (declaration name, JSON texts) pairs."""
        observed = cls(_parse_all(texts, "observed child"))
        for name, related_texts in related or []:
            observed._related[name] = _parse_all(related_texts, f"related {name}")
        return observed

    def with_related(self, name: str, objects: list[dict]) -> "Observed":
        """The same, with `objects` as the related objects declared as `name` (for tests)."""
        return Observed(self.objects, {**self._related, name: list(objects)})

    def related(self, name: str, as_type: Optional[type] = None) -> list[Any]:
        """The related objects declared as `name` (`Related`), as read from the API server (a
        Secret as its `secret_view` says): empty when none matches, and for a name that was
        not declared. Dicts, or instances of the dataclass `as_type` (decoded as a spec is,
        with only the fields it declares)."""
        objects = self._related.get(name, [])
        if as_type is None:
            return list(objects)
        return [_decode_related(name, as_type, o) for o in objects]

    def related_one(self, name: str, as_type: Optional[type] = None) -> Optional[Any]:
        """The one related object declared as `name` by `Related.by_name_at` (see `related`),
        or None while the parent names none or it does not exist."""
        found = self.related(name, as_type)
        return found[0] if found else None

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
    """What `reconcile` returns: the children that should exist (each with how the host
    handles it), the status, and when to be called again."""

    def __init__(self) -> None:
        self.children: list[dict] = []
        #: How the host handles each child, by index in `children`.
        self.options: list[ChildOptions] = []
        self.status: object = {}
        self.requeue_after_ms: Optional[int] = None

    def child(self, child: dict, options: Optional[ChildOptions] = None) -> "Desired":
        """Adds a child: a JSON object with `apiVersion`, `kind` and `metadata.name`, handled
        as `options` say (by default applied in place, deleted once no longer returned, no
        barrier).

        An `apps/v1` workload (Deployment, StatefulSet, DaemonSet, ReplicaSet) gets the
        annotation `SPEC_HASH_ANNOTATION`, the hash of its spec, so that its observed copy
        tells whether it carries this spec yet (`WorkloadView.rollout_of`).
        """
        for key in ("apiVersion", "kind"):
            if not isinstance(child.get(key), str):
                raise Retry(f"a desired child has no {key}: {json.dumps(child)[:120]}")
        if options is not None and not isinstance(options, ChildOptions):
            raise TypeError(f"child options must be a ChildOptions, got {type(options).__name__}")
        stamp_spec_hash(child)
        self.children.append(child)
        self.options.append(options or ChildOptions())
        return self

    def options_of(self, index: int) -> ChildOptions:
        """How the host handles the child at `index` of `children`: the defaults for one
        appended to `children` without `child`."""
        return self.options[index] if index < len(self.options) else ChildOptions()

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


def _parse_all(texts: list[str], what: str) -> list[dict]:
    """The objects of the request's JSON texts; `what` names them in the error (`observed
    child #1 is not valid JSON: ...`)."""
    objects = []
    for index, text in enumerate(texts):
        try:
            objects.append(json.loads(text))
        except ValueError as e:
            raise Retry(f"{what} #{index} is not valid JSON: {e}") from None
    return objects


def _decode_related(name: str, as_type: type, obj: dict) -> Any:
    """A related object as the dataclass `as_type`; one that does not fit is a `Retry` naming
    it (the object is not the user's input: it may be fixed by the time of the next call)."""
    try:
        return decode(as_type, obj, "")
    except InvalidSpec as e:
        object_name = (obj.get("metadata") or {}).get("name", "") if isinstance(obj, dict) else ""
        # Decoded from the top (path ""): `.data: ...` names `data`, `: missing ...` the object.
        problem = e.message[1:] if e.message.startswith(".") else e.message.removeprefix(": ")
        raise Retry(
            f"related {name} {debug_str(str(object_name))} does not decode as {as_type.__name__}: {problem}"
        ) from None
