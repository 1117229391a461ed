"""Glue between the componentize-py bindings of the contract and an `Operator`; imported only in a component."""

from __future__ import annotations

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from .errors import InvalidSpec, Retry
from .kinds import Kind
from .operator import Operator, json_text


def _gvk(kind: Kind) -> types.GroupVersionKind:
    return types.GroupVersionKind(kind.group, kind.version, kind.kind, kind.plural, kind.namespaced)


def _error(error: Exception) -> Err:
    if isinstance(error, InvalidSpec):
        return Err(types.ReconcileError_InvalidSpec(error.message))
    return Err(types.ReconcileError_Retry(error.message))


def plugin_class(operator: Operator) -> type:
    """A class implementing the contract's `plugin` interface with `operator`."""

    # Made once, when the module is imported: inside the component that is at build time (the
    # snapshot componentize-py takes holds it), so `info`, which the host calls with a short
    # deadline, only returns it.
    declared = operator.info()
    info = types.PluginInfo(
        name=declared["name"],
        version=declared["version"],
        parent=_gvk(declared["parent"]),
        children=[_gvk(k) for k in declared["children"]],
        needs_finalize=declared["needs_finalize"],
        crd=json_text(declared["crd"]),
    )

    class Plugin(exports.Plugin):
        def info(self) -> types.PluginInfo:
            return info

        def reconcile(self, request: types.ReconcileRequest) -> types.ReconcileResponse:
            try:
                desired = operator.run_reconcile(request.parent, request.observed)
            except (InvalidSpec, Retry) as e:
                raise _error(e) from None
            return types.ReconcileResponse(
                children=[json_text(c) for c in desired.children],
                status=json_text(desired.status),
                requeue_after_ms=desired.requeue_after_ms,
            )

        def finalize(self, request: types.ReconcileRequest) -> types.FinalizeResponse:
            try:
                pending = operator.run_finalize(request.parent, request.observed)
            except (InvalidSpec, Retry) as e:
                raise _error(e) from None
            return types.FinalizeResponse(done=pending is None, requeue_after_ms=pending)

    return Plugin
