"""The children a plugin observes (with the related objects it reads) and the children it desires, as JSON objects (dicts)."""

from __future__ import annotations

import copy
import json
from typing import Any, Iterator, Optional

from ._fmt import _debug_str as debug_str
from .errors import InvalidSpec, Retry
from .kinds import JOB, Kind
from .options import ChildOptions
from .schema import decode
from .view import CONTENT_HASH_ANNOTATION, Rollout, WorkloadView, content_hash, stamp_spec_hash


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
        """The observed workload (Deployment, StatefulSet, DaemonSet, Job) of `kind` named
        `name`, as a view of what its rollout status needs (see `WorkloadView.rollout_of`).
        One that does not decode as the view is a `Retry`."""
        found = self.get(kind, name)
        if found is None:
            return None
        try:
            return WorkloadView(found)
        except ValueError as e:
            raise Retry(f"observed {kind.kind} {debug_str(name)} does not decode: {e}") from None

    def rollout_of(self, kind: Kind, name: str, desired: "Desired") -> Rollout:
        """Where the rollout (or, for a Job, the run) of the spec `desired` holds for the
        workload of `kind` named `name` stands: `WorkloadView.rollout_of` of the observed one,
        or pending (reason `NotCreated`) while there is none. `rollout.condition(type,
        generation)` makes it a status condition."""
        workload = self.workload(kind, name)
        if workload is None:
            return Rollout.pending(
                "NotCreated", f"the {kind.kind} {debug_str(name)} is not created yet"
            )
        return workload.rollout_of(desired)

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

        A workload (an `apps/v1` Deployment, StatefulSet, DaemonSet or ReplicaSet, a
        `batch/v1` Job) gets the annotation `SPEC_HASH_ANNOTATION`, the hash of its spec, so
        that its observed copy tells whether it carries this spec yet
        (`WorkloadView.rollout_of`).
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

    def run_once(self, job: dict, inputs: object) -> "Desired":
        """Adds `job` (a `batch/v1` Job; `apiVersion` and `kind` may be left out) as a step
        the children added after it wait for, run once for each distinct `inputs` (JSON data:
        whatever its run depends on, such as the image, the schema version, a config's data).

        The hash of `inputs` (`content_hash`) goes on a copy of the Job's pod template under
        `CONTENT_HASH_ANNOTATION`, so new inputs make a new template, and the host recreates
        the Job (its template is immutable) instead of reporting `ImmutableField`; the same
        inputs leave the completed Job as it is. The barrier is its `Complete` condition;
        `observed.rollout_of(kinds.JOB, name, desired)` says whether the run of *these*
        inputs completed (an old Job's completion is `SpecNotApplied`). `job` itself is not
        changed. Raises `Retry` when `inputs` is not JSON, `TypeError` when `job` is not a Job.
        """
        hash_ = content_hash(inputs)
        if not isinstance(job, dict):
            raise TypeError(f"run_once takes a Job as a dict, got {type(job).__name__}")
        job = copy.deepcopy(job)
        job.setdefault("apiVersion", JOB.api_version)
        job.setdefault("kind", JOB.kind)
        if not JOB.matches(job):
            raise TypeError(
                f"run_once takes a {JOB.api_version} Job, got {job['apiVersion']!r} {job['kind']!r}"
            )
        level, path = job, ""
        for key in ("spec", "template", "metadata", "annotations"):
            path = f"{path}.{key}" if path else key
            # A missing or null level is an empty one, as Rust's `get_or_insert_with(Default)`.
            if level.get(key) is None:
                level[key] = {}
            level = level[key]
            if not isinstance(level, dict):
                raise TypeError(f"a run-once Job's {path} is not an object")
        level[CONTENT_HASH_ANNOTATION] = hash_
        return self.child(job, ChildOptions().recreate().ready_when_condition("Complete"))

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
