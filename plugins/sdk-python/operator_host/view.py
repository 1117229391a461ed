"""Views of observed workloads, and the spec hash that tells whether they carry the desired spec."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from ._fmt import _debug_str, _invalid_type, _json_float, _json_number
from .conditions import Condition
from .errors import Retry

SPEC_HASH_ANNOTATION = "sdk.operator-host.dev/spec-hash"
"""The annotation the SDK puts on every workload a plugin returns: the SHA-256 (hex) of its
`spec` as the plugin wrote it. See `stamp_spec_hash` for why."""

CONTENT_HASH_ANNOTATION = "sdk.operator-host.dev/content-hash"
"""The annotation for a pod template that must change, and so roll the pods, when content
they read but do not embed changes (a ConfigMap's data, say): set it to `content_hash` of
that content."""

# The kinds whose children get SPEC_HASH_ANNOTATION (`apiVersion`, `kind`): those that roll
# pods out, and the Job, whose run is of one spec.
_WORKLOAD_KINDS = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
)


def stamp_spec_hash(child: dict) -> None:
    """Marks `child` (a JSON object with `apiVersion`, `kind`, `metadata`) with the hash of
    its `spec` when it is a workload with a spec: an `apps/v1` Deployment, StatefulSet,
    DaemonSet or ReplicaSet, or a `batch/v1` Job.

    Why: a plugin sees its children as they were *before* the host applies its answer, so
    one that has just changed a pod template observes the old workload, fully rolled out, and
    must not call that "ready" for the new generation; the workload's own
    `metadata.generation` cannot tell it (the API server assigns it only once the new spec
    is applied). The annotation, applied with the spec, changes exactly when the desired spec
    does; a hash of what the plugin wrote is immune to the API server's defaulting and covers
    every field. It goes on the workload, not its pod template, so it never rolls the pods.
    For a Job it tells the completion of this spec's run from that of an older Job of the same
    name (see `Desired.run_once`).
    """
    if not isinstance(child, dict):
        return
    is_workload = (child.get("apiVersion"), child.get("kind")) in _WORKLOAD_KINDS
    # A `spec` key holding null counts as a spec (its hash is that of `null`), as in Rust.
    if not is_workload or "spec" not in child:
        return
    hash_ = spec_hash(child["spec"])
    metadata = child.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return
    annotations = metadata.setdefault("annotations", {})
    if isinstance(annotations, dict):
        annotations[SPEC_HASH_ANNOTATION] = hash_


def spec_hash(spec: object) -> str:
    """SHA-256 (hex) of `spec`'s canonical JSON text: what serde_json writes with its maps
    sorted by key, so equal values give equal texts and the Rust SDK's hashes.

    Raises `ValueError` for what is not JSON (a set, an integer beyond 64 bits, ...).
    """
    return hashlib.sha256(_canonical_json(spec).encode("utf-8")).hexdigest()


def content_hash(content: object) -> str:
    """A stable hash of `content` (JSON data: dicts, lists, strings, numbers, booleans,
    None): SHA-256 (hex) of its canonical JSON (maps sorted by key), the same for equal values
    on every build and in the Rust SDK. For `CONTENT_HASH_ANNOTATION`.

    Raises `Retry` when `content` is not JSON, as the Rust SDK does when it cannot serialize it.
    """
    try:
        return spec_hash(content)
    except ValueError as e:
        raise Retry(f"cannot serialize the hashed content: {e}") from None


def _canonical_json(value: object) -> str:
    """`value` as serde_json writes the `Value` it makes of it (`to_value`, then `to_string`)."""
    out: list[str] = []
    _write_json(value, out)
    text = "".join(out)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: no Rust string holds one.
        raise ValueError("a string is not valid Unicode") from None
    return text


def _write_json(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise ValueError("number out of range")  # serde_json's words
        out.append(str(int(value)))
    elif isinstance(value, float):
        # serde_json turns a NaN or infinite f64 into null.
        out.append(_json_float(value) if math.isfinite(value) else "null")
    elif isinstance(value, str):
        # serde_json escapes exactly what json.dumps does without ensure_ascii: `"`, `\`,
        # \b \f \n \r \t, other controls as \u00xx (lowercase); `/` and non-ASCII as they are.
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write_json(item, out)
        out.append("]")
    elif isinstance(value, dict):
        # serde_json's map keys: strings, or numbers and booleans written as strings; a later
        # duplicate replaces an earlier one, and the map is sorted (a BTreeMap).
        entries = {_json_key(key): item for key, item in value.items()}
        out.append("{")
        for index, key in enumerate(sorted(entries)):
            if index:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write_json(entries[key], out)
        out.append("}")
    else:
        raise ValueError(f"a {type(value).__name__} is not JSON")


def _json_key(key: object) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float):
        if not math.isfinite(key):
            raise ValueError("float key must be finite (got NaN or +/-inf)")
        return _json_float(key)
    raise ValueError("key must be a string")


# Decoding: what serde's derived `Deserialize` does with the Rust views, over JSON values.
# Missing fields take their defaults (`#[serde(default)]`), unknown ones are ignored, and a
# value of the wrong type raises `ValueError` with serde_json's message for it.

_Decoder = Callable[[object], Any]


def _borrowed_str(value: object) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(_invalid_type(value, "a borrowed string"))


def _integer(name: str, bits: int) -> _Decoder:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def decode(value: object) -> int:
        number = value
        if isinstance(value, int) and not isinstance(value, bool):
            number = _json_number(value)
        if not isinstance(number, int) or isinstance(number, bool):
            raise ValueError(_invalid_type(number, name))
        if not low <= number <= high:
            raise ValueError(f"invalid value: integer `{number}`, expected {name}")
        return number

    return decode


def _optional(decode: _Decoder) -> _Decoder:
    return lambda value: None if value is None else decode(value)


def _sequence(decode: _Decoder) -> _Decoder:
    def decode_all(value: object) -> tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(_invalid_type(value, "a sequence"))
        return tuple(decode(item) for item in value)

    return decode_all


def _struct(cls: type, name: str, schema: tuple[tuple[str, str, _Decoder], ...]) -> _Decoder:
    """A decoder of `cls` from a JSON object (`schema`: JSON key, attribute, decoder, in the
    Rust field order) or, as serde allows, from an array of the fields in that order."""
    by_key = {key: (attribute, decode) for key, attribute, decode in schema}

    def decode(value: object) -> Any:
        found: dict[str, Any] = {}
        if isinstance(value, dict):
            # serde_json's maps are sorted: the first bad field in key order is reported.
            for key in sorted(k for k in value if isinstance(k, str)):
                if key in by_key:
                    attribute, decode_field = by_key[key]
                    found[attribute] = decode_field(value[key])
        elif isinstance(value, (list, tuple)):
            for item, (_, attribute, decode_field) in zip(value, schema):
                found[attribute] = decode_field(item)
            if len(value) > len(schema):
                raise ValueError(f"invalid length {len(value)}, expected fewer elements in array")
        else:
            raise ValueError(_invalid_type(value, f"struct {name}"))
        return cls._decoded(found)

    return decode


class _View:
    """A frozen view built from the decoded fields, the others at their defaults."""

    @classmethod
    def _decoded(cls, found: dict[str, Any]) -> Any:
        return cls(**found)


@dataclass(frozen=True)
class RollingUpdateView(_View):
    """A StatefulSet's `spec.updateStrategy.rollingUpdate`."""

    partition: Optional[int] = None
    """Pods with an ordinal below this keep the old revision."""


@dataclass(frozen=True)
class UpdateStrategyView(_View):
    """A StatefulSet's `spec.updateStrategy`."""

    type_: Optional[str] = None
    """`RollingUpdate` (the default) or `OnDelete`."""
    rolling_update: Optional[RollingUpdateView] = None
    """Present for `RollingUpdate` (the API server defaults it to `{partition: 0}`)."""


@dataclass(frozen=True)
class WorkloadSpecView(_View):
    """`spec` of an observed workload."""

    replicas: Optional[int] = None
    """The desired number of pods."""
    update_strategy: UpdateStrategyView = field(default_factory=UpdateStrategyView)
    """A StatefulSet's `updateStrategy` (Deployments call theirs `strategy`: not needed)."""


@dataclass(frozen=True)
class SpecHashView(_View):
    """The one annotation of `MetadataView` the SDK reads."""

    spec_hash: Optional[str] = None
    """`SPEC_HASH_ANNOTATION`."""


@dataclass(frozen=True)
class MetadataView(_View):
    """`metadata` of an observed workload: what identifies it and the spec it carries."""

    name: str = ""
    generation: Optional[int] = None
    """Incremented by the API server on every change of `spec`."""
    annotations: SpecHashView = field(default_factory=SpecHashView)
    """Only the annotation the SDK stamps."""


@dataclass(frozen=True)
class WorkloadConditionView(_View):
    """One of a workload's `status.conditions`: type, status and reason."""

    type_: str = ""
    """E.g. `Progressing`, `Available`, `Complete`."""
    status: str = ""
    """`True`, `False` or `Unknown`."""
    reason: Optional[str] = None
    """E.g. `ProgressDeadlineExceeded`."""


@dataclass(frozen=True)
class WorkloadStatusView(_View):
    """The status of an observed workload (the fields of each kind it has)."""

    replicas: Optional[int] = None
    """Pods created by the controller."""
    ready_replicas: Optional[int] = None
    updated_replicas: Optional[int] = None
    """Pods of the current revision."""
    available_replicas: Optional[int] = None
    """Pods ready for at least `minReadySeconds`."""
    observed_generation: Optional[int] = None
    """The generation the controller has acted on."""
    current_revision: Optional[str] = None
    """A StatefulSet's revision of the pods it has not updated yet."""
    update_revision: Optional[str] = None
    """A StatefulSet's revision of its current spec."""
    desired_number_scheduled: Optional[int] = None
    """A DaemonSet's nodes that should run its pod."""
    updated_number_scheduled: Optional[int] = None
    """A DaemonSet's nodes running its current pod template."""
    number_available: Optional[int] = None
    """A DaemonSet's nodes whose pod is available."""
    conditions: tuple[WorkloadConditionView, ...] = ()
    """A Deployment's conditions (`Progressing` says when its progress deadline passed), a
    Job's (`Complete`, `Failed`)."""


_I32 = _integer("i32", 32)
_I64 = _integer("i64", 64)
_OPTIONAL_STR = _optional(_borrowed_str)

_ROLLING_UPDATE = _struct(
    RollingUpdateView, "RollingUpdateView", (("partition", "partition", _optional(_I32)),)
)
_UPDATE_STRATEGY = _struct(
    UpdateStrategyView,
    "UpdateStrategyView",
    (
        ("type", "type_", _OPTIONAL_STR),
        ("rollingUpdate", "rolling_update", _optional(_ROLLING_UPDATE)),
    ),
)
_SPEC = _struct(
    WorkloadSpecView,
    "WorkloadSpecView",
    (
        ("replicas", "replicas", _optional(_I32)),
        ("updateStrategy", "update_strategy", _UPDATE_STRATEGY),
    ),
)
_SPEC_HASH = _struct(
    SpecHashView, "SpecHashView", ((SPEC_HASH_ANNOTATION, "spec_hash", _OPTIONAL_STR),)
)
_METADATA = _struct(
    MetadataView,
    "MetadataView",
    (
        ("name", "name", _borrowed_str),
        ("generation", "generation", _optional(_I64)),
        ("annotations", "annotations", _SPEC_HASH),
    ),
)
_CONDITION = _struct(
    WorkloadConditionView,
    "WorkloadConditionView",
    (
        ("type", "type_", _borrowed_str),
        ("status", "status", _borrowed_str),
        ("reason", "reason", _OPTIONAL_STR),
    ),
)
_STATUS = _struct(
    WorkloadStatusView,
    "WorkloadStatusView",
    (
        ("replicas", "replicas", _optional(_I32)),
        ("readyReplicas", "ready_replicas", _optional(_I32)),
        ("updatedReplicas", "updated_replicas", _optional(_I32)),
        ("availableReplicas", "available_replicas", _optional(_I32)),
        ("observedGeneration", "observed_generation", _optional(_I64)),
        ("currentRevision", "current_revision", _OPTIONAL_STR),
        ("updateRevision", "update_revision", _OPTIONAL_STR),
        ("desiredNumberScheduled", "desired_number_scheduled", _optional(_I32)),
        ("updatedNumberScheduled", "updated_number_scheduled", _optional(_I32)),
        ("numberAvailable", "number_available", _optional(_I32)),
        ("conditions", "conditions", _sequence(_CONDITION)),
    ),
)


def _wrapping_i32(value: int) -> int:
    # The Rust SDK subtracts i32 counters; plugins are built without overflow checks.
    return (value + 2**31) % 2**32 - 2**31


class Rollout:
    """Where the rollout of a workload stands, by `kubectl rollout status`'s rules (or, for a
    Job, its run): complete, pending (not yet: the reason is CamelCase, for a condition, and
    the message says what is awaited) or failed (it will not complete by itself: the
    Deployment's progress deadline passed, the Job failed, or the kind has no rollout rules
    here)."""

    COMPLETE = "complete"
    PENDING = "pending"
    FAILED = "failed"

    __slots__ = ("state", "_reason", "_message")

    def __init__(
        self, state: str, reason: str = "RolloutComplete", message: str = "rolled out"
    ) -> None:
        if state not in (self.COMPLETE, self.PENDING, self.FAILED):
            raise ValueError(f"not a rollout state: {state!r}")
        self.state = state
        self._reason = "RolloutComplete" if state == self.COMPLETE else reason
        self._message = "rolled out" if state == self.COMPLETE else message

    @classmethod
    def complete(cls) -> "Rollout":
        """Every pod runs the workload's current spec and is ready (available, for Deployments)."""
        return cls(cls.COMPLETE)

    @classmethod
    def pending(cls, reason: str, message: str) -> "Rollout":
        """Not yet: `reason` is CamelCase (e.g. `RolloutInProgress`), `message` says what
        is awaited."""
        return cls(cls.PENDING, reason, message)

    @classmethod
    def failed(cls, reason: str, message: str) -> "Rollout":
        """It will not complete by itself: `reason` is CamelCase (e.g.
        `ProgressDeadlineExceeded`), `message` says why."""
        return cls(cls.FAILED, reason, message)

    def is_complete(self) -> bool:
        """Whether the rollout is complete."""
        return self.state == self.COMPLETE

    def reason(self) -> str:
        """A CamelCase reason: `RolloutComplete`, or the pending or failed reason."""
        return self._reason

    def message(self) -> str:
        """What is awaited, or why it failed; `rolled out` when complete."""
        return self._message

    def condition(self, type: str, generation: Optional[int]) -> Condition:
        """The condition `type` (`Available`, `MigrationComplete`, ...) of this rollout, of
        the parent's `generation`: `True` when complete, with the rollout's reason and
        message."""
        return Condition.new(type, self.is_complete(), self.reason(), self.message(), generation)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Rollout):
            return NotImplemented
        return (self.state, self._reason, self._message) == (
            other.state,
            other._reason,
            other._message,
        )

    def __hash__(self) -> int:
        return hash((self.state, self._reason, self._message))

    def __repr__(self) -> str:
        if self.is_complete():
            return "Rollout.complete()"
        return f"Rollout.{self.state}({self._reason!r}, {self._message!r})"


_NO_OBJECT: Any = object()


@dataclass(frozen=True, init=False)
class WorkloadView(_View):
    """An observed Deployment, StatefulSet, DaemonSet or Job, reduced to what a status needs:
    its replica counts, and whether the spec the plugin desires is rolled out (or, for a Job,
    has run to completion; see `stamp_spec_hash`).

    An observed workload whose `SPEC_HASH_ANNOTATION` equals the hash the plugin desires
    carries the desired spec, and its `metadata.generation` is that spec's: `rollout_of`
    applies `kubectl rollout status`'s rules to it. One applied before the SDK stamped it
    reads as not current until the next apply adds the annotation (one reconcile later).

    `WorkloadView(obj)` reads the observed object `obj` (its JSON, a dict) the way the Rust
    SDK decodes its view: missing fields read as None (counts, generations, revisions) or ""
    (kind, name); a field of the wrong type raises `ValueError` with serde_json's message.
    `WorkloadView()` is the empty view.
    """

    api_version: str
    """`apiVersion`, e.g. `apps/v1`."""
    kind: str
    """`kind`: which rollout rules apply."""
    metadata: MetadataView
    """`metadata`: name, generation, and the SDK's spec hash."""
    spec: WorkloadSpecView
    """`spec`: the replica count and the update strategy."""
    status: WorkloadStatusView
    """`status`: the counters, revisions and conditions, and the generation they describe."""

    def __init__(self, obj: object = _NO_OBJECT, **decoded: Any) -> None:
        if obj is not _NO_OBJECT:
            view = _WORKLOAD(obj)
            decoded = {f.name: getattr(view, f.name) for f in fields(self)}
        defaults = {
            "api_version": "",
            "kind": "",
            "metadata": MetadataView(),
            "spec": WorkloadSpecView(),
            "status": WorkloadStatusView(),
        }
        for name, default in defaults.items():
            object.__setattr__(self, name, decoded.pop(name, default))
        if decoded:
            raise TypeError(f"unexpected WorkloadView fields: {sorted(decoded)}")

    @classmethod
    def _decoded(cls, found: dict[str, Any]) -> "WorkloadView":
        return cls(**found)

    def spec_hash(self) -> Optional[str]:
        """The spec hash the SDK stamped on this workload when the plugin returned it, if any."""
        return self.metadata.annotations.spec_hash

    def is_current(self, desired: Any) -> bool:
        """Whether this observed workload carries the spec that `desired` (a `Desired`, or its
        list of children) holds for it (the child of the same kind and name): false when the
        plugin just changed it, until the host has applied it. See `stamp_spec_hash`."""
        children = desired.children if hasattr(desired, "children") else desired
        for child in children:
            if (
                _at(child, "apiVersion") == self.api_version
                and _at(child, "kind") == self.kind
                and _at(child, "metadata", "name") == self.metadata.name
            ):
                wanted = _at(child, "metadata", "annotations", SPEC_HASH_ANNOTATION)
                return isinstance(wanted, str) and wanted == self.spec_hash()
        return False

    def rollout_of(self, desired: Any) -> Rollout:
        """The rollout of the spec `desired` holds for this workload: pending with reason
        `SpecNotApplied` while the observed workload carries another spec (see `is_current`),
        else `rollout()`. A status that says "ready" only when this is complete tells the
        truth about the parent's generation."""
        if self.is_current(desired):
            return self.rollout()
        return Rollout.pending(
            "SpecNotApplied", f"the {self._kind_name()} does not carry the desired spec yet"
        )

    def rollout(self) -> Rollout:
        """The rollout of this workload's own current spec, by `kubectl rollout status`'s rules
        for its kind (Deployment, StatefulSet, DaemonSet), or for a Job its run: complete once
        its `Complete` condition holds, failed once its `Failed` one does. It knows nothing of
        what the plugin desires: see `rollout_of`."""
        if self.kind == "Deployment":
            return self._deployment_rollout()
        if self.kind == "StatefulSet":
            return self._stateful_set_rollout()
        if self.kind == "DaemonSet":
            return self._daemon_set_rollout()
        if self.kind == "Job":
            return self._job_run()
        return Rollout.failed(
            "UnsupportedKind", f"no rollout rules for kind {_debug_str(self.kind)}"
        )

    def _kind_name(self) -> str:
        return f"{self.kind} {_debug_str(self.metadata.name)}"

    def _spec_observed(self) -> bool:
        """Whether the controller has acted on the current spec."""
        observed = self.status.observed_generation or 0
        generation = self.metadata.generation
        return observed > 0 and generation is not None and generation <= observed

    def _not_observed(self) -> Rollout:
        return Rollout.pending(
            "SpecNotObserved", f"waiting for the {self.kind} controller to observe its spec"
        )

    def _deployment_rollout(self) -> Rollout:
        """kubectl's `DeploymentStatusViewer`."""
        if not self._spec_observed():
            return self._not_observed()
        status = self.status
        progressing = next((c for c in status.conditions if c.type_ == "Progressing"), None)
        if progressing is not None and progressing.reason == "ProgressDeadlineExceeded":
            return Rollout.failed(
                "ProgressDeadlineExceeded", f"{self._kind_name()} exceeded its progress deadline"
            )
        updated = status.updated_replicas or 0
        total = status.replicas or 0
        available = status.available_replicas or 0
        wanted = self.spec.replicas
        if wanted is not None and updated < wanted:
            return Rollout.pending(
                "RolloutInProgress", f"{updated} of {wanted} new replicas have been updated"
            )
        if total > updated:
            return Rollout.pending(
                "RolloutInProgress",
                f"{_wrapping_i32(total - updated)} old replicas are pending termination",
            )
        if available < updated:
            return Rollout.pending(
                "RolloutInProgress", f"{available} of {updated} updated replicas are available"
            )
        return Rollout.complete()

    def _daemon_set_rollout(self) -> Rollout:
        """kubectl's `DaemonSetStatusViewer`."""
        if not self._spec_observed():
            return self._not_observed()
        status = self.status
        wanted = status.desired_number_scheduled or 0
        updated = status.updated_number_scheduled or 0
        available = status.number_available or 0
        if updated < wanted:
            return Rollout.pending(
                "RolloutInProgress", f"{updated} of {wanted} new pods have been updated"
            )
        if available < wanted:
            return Rollout.pending(
                "RolloutInProgress", f"{available} of {wanted} updated pods are available"
            )
        return Rollout.complete()

    def _job_run(self) -> Rollout:
        """A Job's run (a Job has no observed generation: its spec cannot change once
        created)."""

        def holds(type_: str) -> Optional[WorkloadConditionView]:
            return next(
                (c for c in self.status.conditions if c.type_ == type_ and c.status == "True"),
                None,
            )

        if holds("Complete") is not None:
            return Rollout.complete()
        failed = holds("Failed")
        if failed is not None:
            reason = failed.reason if failed.reason is not None else "no reason given"
            return Rollout.failed("JobFailed", f"{self._kind_name()} failed ({reason})")
        return Rollout.pending("JobRunning", f"waiting for {self._kind_name()} to complete")

    def _stateful_set_rollout(self) -> Rollout:
        """kubectl's `StatefulSetStatusViewer`, with a missing partition read as 0 (the API
        server's default) and, for `OnDelete` (where kubectl has no rule), the same as an
        unpartitioned rolling update: every pod updated and ready."""
        if not self._spec_observed():
            return self._not_observed()
        status = self.status
        ready = status.ready_replicas or 0
        updated = status.updated_replicas or 0
        wanted = self.spec.replicas
        if wanted is not None and ready < wanted:
            return Rollout.pending(
                "RolloutInProgress", f"waiting for {_wrapping_i32(wanted - ready)} pods to be ready"
            )
        strategy = self.spec.update_strategy
        partition: Optional[int]
        if strategy.type_ == "OnDelete":
            partition = 0
        elif strategy.rolling_update is not None:
            partition = strategy.rolling_update.partition or 0
        else:
            partition = None
        if partition is not None:
            if wanted is not None and updated < _wrapping_i32(wanted - partition):
                return Rollout.pending(
                    "RolloutInProgress",
                    f"{updated} of {_wrapping_i32(wanted - partition)} new pods have been updated",
                )
            return Rollout.complete()
        if status.update_revision != status.current_revision:
            return Rollout.pending(
                "RolloutInProgress",
                "waiting for the rolling update to revision"
                f" {status.update_revision or ''} ({updated} pods updated)",
            )
        return Rollout.complete()


_WORKLOAD = _struct(
    WorkloadView,
    "WorkloadView",
    (
        ("apiVersion", "api_version", _borrowed_str),
        ("kind", "kind", _borrowed_str),
        ("metadata", "metadata", _METADATA),
        ("spec", "spec", _SPEC),
        ("status", "status", _STATUS),
    ),
)


def _at(value: object, *keys: str) -> object:
    """`value[k1][k2]...` as serde_json's `Value` indexing reads it: None where a key is
    missing or a value is not an object."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value
