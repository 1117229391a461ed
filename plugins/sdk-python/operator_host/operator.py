"""An operator declared once: the parent kind (its CRD and its typed spec), the child kinds, and the handlers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Optional, TypeVar, Union

from . import log
from .children import Desired, Observed
from .errors import InvalidSpec, Retry
from .kinds import Kind
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


Reconcile = Callable[[Parent, Observed], Desired]
#: `True` when clean-up is done; `False` or a number of milliseconds to be called again.
Finalize = Callable[[Parent, Observed], Union[bool, int]]

#: How long a pending `finalize` waits by default before the next call.
FINALIZE_RETRY_MS = 5000


@dataclass
class Operator:
    """A plugin: its name (a DNS-1123 label, unique among a host's plugins), its version,
    the parent kind and every kind it may return. Register the handlers with the
    decorators `@operator.reconcile` and, for clean-up before deletion, `@operator.finalize`.
    """

    name: str
    version: str
    parent: CustomResource
    children: list[Kind] = field(default_factory=list)
    reconcile_handler: Optional[Reconcile] = None
    finalize_handler: Optional[Finalize] = None

    def reconcile(self, handler: Reconcile) -> Reconcile:
        """Registers the reconcile handler: `(parent, observed) -> Desired`."""
        self.reconcile_handler = handler
        return handler

    def finalize(self, handler: Finalize) -> Finalize:
        """Registers the finalize handler; the host then puts a finalizer on every parent."""
        self.finalize_handler = handler
        return handler

    def decode_parent(self, raw: Any) -> Parent:
        """The parent JSON as a `Parent`. Its status is the plugin's own earlier output: one
        that no longer decodes (a phase renamed in a new version) is dropped with a warning,
        so the parent gets a new status instead of failing until someone edits it."""
        kind = self.parent.kind
        if not isinstance(raw, dict):
            raise InvalidSpec(f"the {kind} is not a JSON object")
        try:
            spec = decode(self.parent.spec, raw.get("spec"), "spec")
        except InvalidSpec as e:
            raise InvalidSpec(f"the {kind} does not match its schema: {e.message}") from None
        status = None
        if self.parent.status is not None and raw.get("status") is not None:
            try:
                status = decode(self.parent.status, raw["status"], "status")
            except InvalidSpec as e:
                log.warn(
                    f"the {kind}'s previous status does not decode ({e.message}); reconciling it as if it had none"
                )
        return Parent(raw, spec, status)

    def run_reconcile(self, parent_json: str, observed_json: list[str]) -> Desired:
        """`reconcile` as the host calls it: decode, call the handler, check its answer."""
        if self.reconcile_handler is None:
            raise Retry(f"the operator {self.name} has no reconcile handler")
        parent, observed = self._decode_request(parent_json, observed_json)
        desired = self.reconcile_handler(parent, observed)
        if not isinstance(desired, Desired):
            raise Retry(f"reconcile returned {type(desired).__name__}, expected a Desired")
        return desired

    def run_finalize(self, parent_json: str, observed_json: list[str]) -> Optional[int]:
        """`finalize` as the host calls it: None when done, else milliseconds to wait."""
        if self.finalize_handler is None:
            return None
        parent, observed = self._decode_request(parent_json, observed_json)
        outcome = self.finalize_handler(parent, observed)
        if outcome is True:
            return None
        return FINALIZE_RETRY_MS if outcome is False else int(outcome)

    def _decode_request(self, parent_json: str, observed_json: list[str]) -> tuple[Parent, Observed]:
        try:
            raw = json.loads(parent_json)
        except ValueError as e:
            raise Retry(f"the parent is not valid JSON: {e}") from None
        return self.decode_parent(raw), Observed.from_json(observed_json)

    def info(self) -> dict:
        """What the plugin declares (the contract's `plugin-info`), as JSON data."""
        return {
            "name": self.name,
            "version": self.version,
            "parent": self.parent.as_kind,
            "children": list(self.children),
            "needs_finalize": self.finalize_handler is not None,
            "crd": self.parent.crd(),
        }

    def export(self) -> type:
        """The class componentize-py exports as the contract's `plugin` interface; only
        importable inside a component build (see `operator_host.build`)."""
        from ._guest import plugin_class

        return plugin_class(self)


def json_text(value: Any) -> str:
    """A child or a status (a dataclass or JSON data) as the compact JSON text of the contract."""
    return json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))
