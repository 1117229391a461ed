"""Glue between the componentize-py bindings of the contract and an `Operator`; imported only in a component."""

from __future__ import annotations

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from .admission import FieldErrorType, Validation
from .errors import Error, InvalidSpec, Retry
from .kinds import Kind
from .operator import Operator, json_text
from .options import ChildOptions, DeletePolicy, Related, SecretView, UpdateStrategy

_UPDATE = {
    UpdateStrategy.IN_PLACE: types.UpdateStrategy.IN_PLACE,
    UpdateStrategy.RECREATE: types.UpdateStrategy.RECREATE,
    UpdateStrategy.CREATE_ONLY: types.UpdateStrategy.CREATE_ONLY,
}
_ON_PRUNE = {DeletePolicy.DELETE: types.DeletePolicy.DELETE, DeletePolicy.ORPHAN: types.DeletePolicy.ORPHAN}
_SECRET_VIEW = {SecretView.DATA_HASH: types.SecretView.DATA_HASH, SecretView.FULL: types.SecretView.FULL}
_CAPABILITY = {
    "validate": types.Capabilities.VALIDATE,
    "validate-delete": types.Capabilities.VALIDATE_DELETE,
    "default": types.Capabilities.DEFAULT,
    "convert": types.Capabilities.CONVERT,
}
_OPERATION = {
    types.Operation.CREATE: "create",
    types.Operation.UPDATE: "update",
    types.Operation.DELETE: "delete",
}
_FIELD_ERROR_TYPE = {
    FieldErrorType.REQUIRED: types.FieldErrorType.REQUIRED,
    FieldErrorType.INVALID: types.FieldErrorType.INVALID,
    FieldErrorType.FORBIDDEN: types.FieldErrorType.FORBIDDEN,
    FieldErrorType.NOT_SUPPORTED: types.FieldErrorType.NOT_SUPPORTED,
    FieldErrorType.DUPLICATE: types.FieldErrorType.DUPLICATE,
    FieldErrorType.TOO_LONG: types.FieldErrorType.TOO_LONG,
    FieldErrorType.TOO_MANY: types.FieldErrorType.TOO_MANY,
    FieldErrorType.NOT_FOUND: types.FieldErrorType.NOT_FOUND,
}


def _gvk(kind: Kind) -> types.GroupVersionKind:
    return types.GroupVersionKind(kind.group, kind.version, kind.kind, kind.plural, kind.namespaced)


def _related(related: Related) -> types.RelatedResource:
    selector: types.RelatedSelector = (
        types.RelatedSelector_NameFromPath(related.name_from_path)
        if related.name_from_path is not None
        else types.RelatedSelector_LabelSelector(related.label_selector or "")
    )
    return types.RelatedResource(related.name, _gvk(related.kind), selector, _SECRET_VIEW[related.secret_view])


def _capabilities(names: list[str]) -> types.Capabilities:
    capabilities = types.Capabilities(0)
    for name in names:
        capabilities |= _CAPABILITY[name]
    return capabilities


def _child(child: dict, options: ChildOptions) -> types.Child:
    readiness = options.ready_when
    ready_when: types.Readiness | None = None
    if readiness is not None and readiness.condition_type is not None:
        ready_when = types.Readiness_Condition(readiness.condition_type)
    elif readiness is not None:
        ready_when = types.Readiness_FieldEquals(types.FieldValue(readiness.path or "", readiness.value or "null"))
    return types.Child(json_text(child), _UPDATE[options.update], _ON_PRUNE[options.on_prune], ready_when)


def _validation(validation: Validation) -> types.Validation:
    return types.Validation(
        errors=[
            types.FieldError(_FIELD_ERROR_TYPE[e.reason], e.field, e.value, e.detail)
            for e in validation.errors
        ],
        warnings=list(validation.warnings),
    )


def _error(error: Exception) -> Err:
    if isinstance(error, InvalidSpec):
        return Err(types.ReconcileError_InvalidSpec(error.message))
    return Err(types.ReconcileError_Retry(error.message))


def _related_texts(request: types.ReconcileRequest) -> list[tuple[str, list[str]]]:
    return [(r.name, r.objects) for r in request.related]


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
        related=[_related(r) for r in declared["related"]],
        implements=_capabilities(declared["implements"]),
    )

    class Plugin(exports.Plugin):
        def info(self) -> types.PluginInfo:
            return info

        def reconcile(self, request: types.ReconcileRequest) -> types.ReconcileResponse:
            try:
                desired = operator.run_reconcile(request.parent, request.observed, _related_texts(request))
            except (InvalidSpec, Retry) as e:
                raise _error(e) from None
            return types.ReconcileResponse(
                children=[_child(c, desired.options_of(i)) for i, c in enumerate(desired.children)],
                status=json_text(desired.status),
                requeue_after_ms=desired.requeue_after_ms,
            )

        def finalize(self, request: types.ReconcileRequest) -> types.FinalizeResponse:
            try:
                pending = operator.run_finalize(request.parent, request.observed, _related_texts(request))
            except (InvalidSpec, Retry) as e:
                raise _error(e) from None
            return types.FinalizeResponse(done=pending is None, requeue_after_ms=pending)

        def validate(self, request: types.AdmissionRequest) -> types.Validation:
            return _validation(
                operator.run_validate(_OPERATION[request.operation], request.object, request.old_object)
            )

        def default(self, object: str) -> str:
            try:
                return operator.run_default(object)
            except Error as e:
                raise Err(e.message) from None

        def convert(self, object: str, to_version: str) -> str:
            try:
                return operator.run_convert(object, to_version)
            except Error as e:
                raise Err(e.message) from None

    return Plugin
