"""An operator declared once: the parent kind (its CRD and its typed spec), the child and related kinds, and the handlers."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Optional, TypeVar, Union

from . import log
from .admission import FieldError, FieldErrorType, Validation, merge_apply, merge_diff, _UNCHANGED
from .children import Desired, Observed
from .errors import InvalidSpec, Retry
from .kinds import Kind
from .options import Related
from .schema import decode, schema_of, to_json

SpecT = TypeVar("SpecT")
StatusT = TypeVar("StatusT")


@dataclass(frozen=True)
class PrinterColumn:
    """A column of `kubectl get` (`additionalPrinterColumns`)."""

    name: str
    type: str
    json_path: str
    priority: Optional[int] = None
    description: Optional[str] = None

    def to_json(self) -> dict:
        column: dict = {"jsonPath": self.json_path, "name": self.name, "type": self.type}
        if self.priority is not None:
            column["priority"] = self.priority
        if self.description is not None:
            column["description"] = self.description
        return column


@dataclass(frozen=True)
class CustomResource:
    """The parent kind: its names, its spec and status types (dataclasses), and how
    `kubectl get` shows it. The CRD is made from this, so it always matches the code."""

    group: str
    version: str
    kind: str
    spec: type
    status: Optional[type] = None
    plural: Optional[str] = None
    singular: Optional[str] = None
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    namespaced: bool = True
    printer_columns: tuple[PrinterColumn, ...] = ()

    @property
    def as_kind(self) -> Kind:
        return Kind(
            self.group,
            self.version,
            self.kind,
            self.plural or self.kind.lower() + "s",
            self.namespaced,
        )

    def crd(self) -> dict:
        """The CustomResourceDefinition of this kind, as kube-rs's `CustomResource` derive
        writes it."""
        kind = self.as_kind
        properties: dict = {"spec": schema_of(self.spec)}
        if self.status is not None:
            status = schema_of(self.status)
            status["nullable"] = True
            properties["status"] = status
        version: dict = {
            "additionalPrinterColumns": [c.to_json() for c in self.printer_columns],
            "name": self.version,
            "schema": {
                "openAPIV3Schema": {
                    "description": f"Auto-generated derived type for {self.spec.__name__} via `CustomResource`",
                    "properties": properties,
                    "required": ["spec"],
                    "title": self.kind,
                    "type": "object",
                }
            },
            "served": True,
            "storage": True,
            "subresources": {"status": {}} if self.status is not None else {},
        }
        names: dict = {
            "kind": self.kind,
            "plural": kind.plural,
            "singular": self.singular or self.kind.lower(),
        }
        if self.short_names:
            names["shortNames"] = list(self.short_names)
        if self.categories:
            names["categories"] = list(self.categories)
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.plural}.{self.group}"},
            "spec": {
                "group": self.group,
                "names": names,
                "scope": "Namespaced" if self.namespaced else "Cluster",
                "versions": [version],
            },
        }


class Parent(Generic[SpecT, StatusT]):
    """The parent custom resource: its metadata, its spec decoded as the spec type, and its
    previous status decoded as the status type (None when it has none)."""

    def __init__(self, raw: dict, spec: SpecT, status: Optional[StatusT]) -> None:
        self.raw = raw
        self.spec = spec
        self.status = status

    @property
    def metadata(self) -> dict:
        return self.raw.get("metadata") or {}

    @property
    def name(self) -> str:
        return self.metadata.get("name", "")

    @property
    def name_any(self) -> str:
        """The name, or the `generateName` prefix while there is none yet (a create at
        admission), as kube's `ResourceExt::name_any`."""
        return self.metadata.get("name") or self.metadata.get("generateName") or ""

    @property
    def namespace(self) -> Optional[str]:
        return self.metadata.get("namespace")

    @property
    def generation(self) -> Optional[int]:
        return self.metadata.get("generation")

    @property
    def labels(self) -> dict:
        return self.metadata.get("labels") or {}

    @property
    def annotations(self) -> dict:
        return self.metadata.get("annotations") or {}

    def to_json(self) -> dict:
        """The parent as JSON data: the object as received, with the spec and the status as
        the typed ones say now (what `default` compares before and after)."""
        encoded = copy.deepcopy(self.raw)
        encoded["spec"] = to_json(self.spec)
        if self.status is not None:
            encoded["status"] = to_json(self.status)
        return encoded


Reconcile = Callable[[Parent, Observed], Desired]
#: `True` when clean-up is done; `False` or a number of milliseconds to be called again.
Finalize = Callable[[Parent, Observed], Union[bool, int]]
#: `(parent, old)`: `old` is None for a create.
Validate = Callable[[Parent, Optional[Parent]], Validation]
ValidateDelete = Callable[[Parent], Validation]
#: Changes the parent in place (or returns the changed one).
Default = Callable[[Parent], Optional[Parent]]
#: `(object, to_version) -> object`: JSON data, `apiVersion` included.
Convert = Callable[[dict, str], dict]

#: The operations of an admission request, as `run_validate` takes them.
OPERATIONS = ("create", "update", "delete")

#: How long a pending `finalize` waits by default before the next call.
FINALIZE_RETRY_MS = 5000


@dataclass
class Operator:
    """A plugin: its name (a DNS-1123 label, unique among a host's plugins), its version,
    the parent kind, every kind it may return and the other objects it reads (`related`).
    `crd` replaces the parent's CRD when it serves several versions (`merge_crds`).

    Register the handlers with the decorators `@operator.reconcile` and, for clean-up before
    deletion, `@operator.finalize`; at admission `@operator.validate`,
    `@operator.validate_delete` and `@operator.default`, and `@operator.convert` between the
    CRD's versions. Registering one is what tells the host to call it (`implements`).
    """

    name: str
    version: str
    parent: CustomResource
    children: list[Kind] = field(default_factory=list)
    related: list[Related] = field(default_factory=list)
    crd: Optional[dict] = None
    reconcile_handler: Optional[Reconcile] = None
    finalize_handler: Optional[Finalize] = None
    validate_handler: Optional[Validate] = None
    validate_delete_handler: Optional[ValidateDelete] = None
    default_handler: Optional[Default] = None
    convert_handler: Optional[Convert] = None

    def reconcile(self, handler: Reconcile) -> Reconcile:
        """Registers the reconcile handler: `(parent, observed) -> Desired`."""
        self.reconcile_handler = handler
        return handler

    def finalize(self, handler: Finalize) -> Finalize:
        """Registers the finalize handler; the host then puts a finalizer on every parent."""
        self.finalize_handler = handler
        return handler

    def validate(self, handler: Validate) -> Validate:
        """Registers the admission check of creates and updates: `(parent, old) ->
        Validation`, `old` None for a create. A parent whose spec does not decode is refused
        with the field that does not before the handler is called."""
        self.validate_handler = handler
        return handler

    def validate_delete(self, handler: ValidateDelete) -> ValidateDelete:
        """Registers the admission check of deletes: `(parent) -> Validation`."""
        self.validate_delete_handler = handler
        return handler

    def default(self, handler: Default) -> Default:
        """Registers the defaulting of creates and updates, called before `validate`: it
        changes the parent (its spec, labels, annotations) in place. Only the fields it
        changes change in the stored object; it must be idempotent."""
        self.default_handler = handler
        return handler

    def convert(self, handler: Convert) -> Convert:
        """Registers the conversion between the versions the CRD serves: `(object,
        to_version) -> object`, JSON data of any served version, `apiVersion` included.
        Converting to the object's own version must give it back unchanged."""
        self.convert_handler = handler
        return handler

    @property
    def implements(self) -> list[str]:
        """Which of the contract's `validate`, `default` and `convert` the host calls (its
        `capabilities` flags): the handlers registered."""
        return [
            capability
            for capability, handler in (
                ("validate", self.validate_handler),
                ("validate-delete", self.validate_delete_handler),
                ("default", self.default_handler),
                ("convert", self.convert_handler),
            )
            if handler is not None
        ]

    def decode_parent(self, raw: Any) -> Parent:
        """The parent JSON as a `Parent`. Its status is the plugin's own earlier output: one
        that no longer decodes (a phase renamed in a new version) is dropped with a warning,
        so the parent gets a new status instead of failing until someone edits it."""
        kind = self.parent.kind
        try:
            return self._decode_parent(raw)
        except InvalidSpec as e:
            raise InvalidSpec(f"the {kind} does not match its schema: {e.message}") from None

    def _decode_parent(self, raw: Any) -> Parent:
        """`decode_parent` with the error of the field that does not decode as it is
        (`spec.size: expected an integer, got "3"`, its field and detail apart)."""
        kind = self.parent.kind
        if not isinstance(raw, dict):
            raise InvalidSpec(f"the {kind} is not a JSON object")
        spec = decode(self.parent.spec, raw.get("spec"), "spec")
        status = None
        if self.parent.status is not None and raw.get("status") is not None:
            try:
                status = decode(self.parent.status, raw["status"], "status")
            except InvalidSpec as e:
                log.warn(
                    f"the {kind}'s previous status does not decode ({e.message}); reconciling it as if it had none"
                )
        return Parent(raw, spec, status)

    def run_reconcile(
        self,
        parent_json: str,
        observed_json: list[str],
        related: Optional[list[tuple[str, list[str]]]] = None,
    ) -> Desired:
        """`reconcile` as the host calls it: decode, call the handler, check its answer.
        `related` holds the request's related objects as (declaration name, JSON texts)."""
        if self.reconcile_handler is None:
            raise Retry(f"the operator {self.name} has no reconcile handler")
        parent, observed = self._decode_request(parent_json, observed_json, related)
        desired = self.reconcile_handler(parent, observed)
        if not isinstance(desired, Desired):
            raise Retry(f"reconcile returned {type(desired).__name__}, expected a Desired")
        return desired

    def run_finalize(
        self,
        parent_json: str,
        observed_json: list[str],
        related: Optional[list[tuple[str, list[str]]]] = None,
    ) -> Optional[int]:
        """`finalize` as the host calls it: None when done, else milliseconds to wait."""
        if self.finalize_handler is None:
            return None
        parent, observed = self._decode_request(parent_json, observed_json, related)
        outcome = self.finalize_handler(parent, observed)
        if outcome is True:
            return None
        return FINALIZE_RETRY_MS if outcome is False else int(outcome)

    def _decode_request(
        self,
        parent_json: str,
        observed_json: list[str],
        related: Optional[list[tuple[str, list[str]]]],
    ) -> tuple[Parent, Observed]:
        try:
            raw = json.loads(parent_json)
        except ValueError as e:
            raise Retry(f"the parent is not valid JSON: {e}") from None
        observed = Observed.from_json(observed_json, related)
        return self.decode_parent(raw), observed

    def _decode_for_admission(self, text: str, validation: Validation) -> Optional[Parent]:
        """The parent of an admission request, or None with the field error of what does
        not decode added to `validation` (`spec.size: Invalid value: expected an integer,
        got "x"`)."""
        try:
            raw = json.loads(text)
        except ValueError as e:
            validation.invalid("", None, f"not JSON: {e}")
            return None
        try:
            return self._decode_parent(raw)
        except InvalidSpec as e:
            field_path = e.field if e.field is not None else ""
            detail = e.detail if e.detail is not None else e.message
            validation.error(FieldError(FieldErrorType.INVALID, field_path, None, detail))
            return None

    def run_validate(
        self, operation: str, object_json: Optional[str], old_json: Optional[str]
    ) -> Validation:
        """`validate` as the host calls it: `operation` is `create`, `update` or `delete`;
        `object_json` the parent as it would be stored (none for a delete), `old_json` as it
        was (updates and deletes). Without the handler for the operation, nothing is refused
        but a parent that does not decode (the host does not call it then)."""
        if operation not in OPERATIONS:
            raise ValueError(f"unknown admission operation {operation!r}: expected one of {OPERATIONS}")
        validation = Validation()
        if operation == "delete":
            # An old object that no longer decodes (a schema that changed since) is no
            # reason to keep it: only one that decodes is the handler's.
            old = self._decode_for_admission(old_json, Validation()) if old_json else None
            if old is not None and self.validate_delete_handler is not None:
                validation = _validation_of(lambda: self.validate_delete_handler(old), "validate_delete")
            return validation
        parent = self._decode_for_admission(object_json, validation) if object_json else None
        # An old object that no longer decodes is no reason to refuse the new one: it is
        # validated as a create.
        old = self._decode_for_admission(old_json, Validation()) if old_json else None
        if parent is not None and self.validate_handler is not None:
            validation = _validation_of(lambda: self.validate_handler(parent, old), "validate")
        return validation

    def run_default(self, object_json: str) -> str:
        """`default` as the host calls it: the object with only the fields the handler
        changed changed, so what the typed spec does not model (or models with other
        defaults) stays as the user wrote it. An object that does not decode is returned as
        it is, for `validate` to refuse. Raises an `Error` whose message refuses the request."""
        try:
            received = json.loads(object_json)
        except ValueError as e:
            raise InvalidSpec(f"the object is not JSON: {e}") from None
        if self.default_handler is None:
            return object_json
        try:
            parent = self._decode_parent(received)
        except InvalidSpec:
            return object_json
        before = parent.to_json()
        returned = self.default_handler(parent)
        if isinstance(returned, Parent):
            parent = returned
        elif returned is not None:
            raise TypeError(
                f"default returned {type(returned).__name__}, expected None (the parent changed in place) or a Parent"
            )
        patch = merge_diff(before, parent.to_json())
        if patch is _UNCHANGED:
            return object_json
        return json_text(merge_apply(received, patch))

    def run_convert(self, object_json: str, to_version: str) -> str:
        """`convert` as the host calls it: the object as `to_version`. Raises an `Error`
        whose message refuses the read or write."""
        try:
            received = json.loads(object_json)
        except ValueError as e:
            raise InvalidSpec(f"the object is not JSON: {e}") from None
        if self.convert_handler is None:
            raise InvalidSpec(
                f"this plugin does not convert between versions (asked for {to_version})"
            )
        converted = self.convert_handler(received, to_version)
        if not isinstance(converted, dict):
            raise InvalidSpec(
                f"convert to {to_version} returned {type(converted).__name__}, expected the object as a dict"
            )
        return json_text(converted)

    def custom_resource_definition(self) -> dict:
        """The parent kind's CRD: `crd` when given (several versions), else the parent's."""
        return self.crd if self.crd is not None else self.parent.crd()

    def info(self) -> dict:
        """What the plugin declares (the contract's `plugin-info`), as JSON data. A CRD that
        serves several versions needs a convert handler: without one, this raises (as the host
        would refuse the plugin at load)."""
        crd = self.custom_resource_definition()
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]
        if len(served) > 1 and self.convert_handler is None:
            raise ValueError(
                f"plugin {self.name}: its CRD serves {', '.join(served)}, so it needs a convert"
                " handler (@operator.convert)"
            )
        return {
            "name": self.name,
            "version": self.version,
            "parent": self.parent.as_kind,
            "children": list(self.children),
            "needs_finalize": self.finalize_handler is not None,
            "crd": crd,
            "related": list(self.related),
            "implements": self.implements,
        }

    def export(self) -> type:
        """The class componentize-py exports as the contract's `plugin` interface; only
        importable inside a component build (see `operator_host.build`)."""
        from ._guest import plugin_class

        return plugin_class(self)


def _validation_of(call: Callable[[], Any], handler: str) -> Validation:
    """What a validate handler returned, when it is a `Validation` (anything else is a bug).
    An `InvalidSpec` it raises (a `reconcile` check called without `Validation.check`) is its
    field error, as `check` makes it."""
    try:
        returned = call()
    except InvalidSpec as e:
        return Validation().add_invalid_spec(e)
    if not isinstance(returned, Validation):
        raise TypeError(f"{handler} returned {type(returned).__name__}, expected a Validation")
    return returned


def merge_crds(crds: list[dict], storage_version: str) -> dict:
    """One CRD serving every version of `crds` (each the CRD of one version of the same kind,
    `CustomResource.crd()`), stored as `storage_version`: kube's `merge_crds`, for
    `Operator(crd=...)` with `@operator.convert`."""
    if not crds:
        raise ValueError("merge_crds: expected at least one CRD")
    for crd in crds:
        versions = crd["spec"]["versions"]
        if len(versions) != 1:
            raise ValueError(
                f"merge_crds: {crd['metadata']['name']} serves {len(versions)} versions, expected one"
            )
    stored = [crd for crd in crds if crd["spec"]["versions"][0]["name"] == storage_version]
    if len(stored) != 1:
        raise ValueError(
            f"merge_crds: expected exactly one CRD of the storage version {storage_version}, found {len(stored)}"
        )
    merged = copy.deepcopy(stored[0])
    # What kube's merge_crds compares; the other names (plural, short names) are the stored
    # version's.
    for field, of in (("group", lambda spec: spec["group"]), ("kind", lambda spec: spec["names"]["kind"]),
                      ("scope", lambda spec: spec["scope"])):
        for crd in crds:
            if of(crd["spec"]) != of(merged["spec"]):
                raise ValueError(
                    f"merge_crds: the versions differ in {field}: {of(crd['spec'])!r} and {of(merged['spec'])!r}"
                )
    names = [crd["spec"]["versions"][0]["name"] for crd in crds]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"merge_crds: expected each version once, got {', '.join(repeated)} more than once")
    merged["spec"]["versions"][0]["storage"] = True
    # As kube: the other versions taken from the end of the list, so the CRD equals the Rust
    # SDK's (and the JavaScript and Go SDKs').
    for crd in reversed(crds):
        if crd is not stored[0]:
            version = copy.deepcopy(crd["spec"]["versions"][0])
            version["storage"] = False
            merged["spec"]["versions"].append(version)
    return merged


def json_text(value: Any) -> str:
    """A child or a status (a dataclass or JSON data) as the compact JSON text of the contract."""
    return json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))
