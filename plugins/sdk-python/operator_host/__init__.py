"""Write operator-host reconciler plugins in Python: declare an `Operator`, register `@operator.reconcile`.

A plugin is a WebAssembly component of contract 0.3.0 built with componentize-py (`python -m
operator_host.build`): the host watches the cluster and does every API write; the plugin gets
one custom resource (the parent) with the children the host observed and the related objects
it declared, and returns the children it wants and the parent's status. It may also validate
and default the parent at admission and convert it between versions. See the README beside
this package.
"""

from . import kinds, log
from ._fmt import _debug_str as debug_str
from .admission import FieldError, FieldErrorType, Validation
from .children import Desired, Observed, child_meta
from .conditions import Condition, camel_case_reason, conditions_schema
from .errors import Error, InvalidSpec, Retry, invalid_at, invalid_field
from .kinds import Kind
from .labels import app_labels, component_labels
from .operator import CustomResource, Operator, Parent, PrinterColumn, merge_crds
from .options import ChildOptions, DeletePolicy, Readiness, Related, SecretView, UpdateStrategy
from .resources import canonical_quantity, validate_container_resources
from .schema import Field, decode, schema_of, to_json
from .security import restricted_container_security_context, restricted_pod_security_context
from .view import (
    CONTENT_HASH_ANNOTATION,
    SPEC_HASH_ANNOTATION,
    Rollout,
    WorkloadView,
    content_hash,
)

__all__ = [
    "CONTENT_HASH_ANNOTATION",
    "SPEC_HASH_ANNOTATION",
    "ChildOptions",
    "Condition",
    "CustomResource",
    "DeletePolicy",
    "Desired",
    "Error",
    "Field",
    "FieldError",
    "FieldErrorType",
    "InvalidSpec",
    "Kind",
    "Observed",
    "Operator",
    "Parent",
    "PrinterColumn",
    "Readiness",
    "Related",
    "Retry",
    "Rollout",
    "SecretView",
    "UpdateStrategy",
    "Validation",
    "WorkloadView",
    "app_labels",
    "camel_case_reason",
    "canonical_quantity",
    "child_meta",
    "component_labels",
    "conditions_schema",
    "content_hash",
    "debug_str",
    "decode",
    "invalid_at",
    "invalid_field",
    "kinds",
    "log",
    "merge_crds",
    "restricted_container_security_context",
    "restricted_pod_security_context",
    "schema_of",
    "to_json",
    "validate_container_resources",
]
