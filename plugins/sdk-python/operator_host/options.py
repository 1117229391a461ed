"""How the host applies and prunes a child (`ChildOptions`), and the other objects a plugin reads (`Related`)."""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass
from typing import Any, Optional

from .errors import Retry
from .kinds import Kind
from .schema import to_json


class UpdateStrategy(enum.Enum):
    """How the host brings an existing child to what the plugin returned."""

    #: Server-side apply in place (the default). A change the API server refuses as
    #: immutable is reported on the parent and not retried until the child changes again.
    IN_PLACE = "in-place"
    #: In place, but delete and create again when the API server refuses the change as
    #: immutable (a Job's template, for example).
    RECREATE = "recreate"
    #: Created when absent, never updated afterwards.
    CREATE_ONLY = "create-only"


class DeletePolicy(enum.Enum):
    """What the host does with a child the plugin no longer returns."""

    #: Delete it (the default).
    DELETE = "delete"
    #: Keep it, without the host's owner reference and labels.
    ORPHAN = "orphan"


@dataclass(frozen=True)
class Readiness:
    """When a child counts as ready, for a barrier: `Readiness.condition("Complete")` or
    `Readiness.field_equals("status.readyReplicas", 3)`."""

    #: `status.conditions` holds this type with status `True`; None for a field check.
    condition_type: Optional[str] = None
    #: The dotted path of the field that must hold `value`; None for a condition.
    path: Optional[str] = None
    #: The value the field must hold, as JSON text (`3`, `"Running"`).
    value: Optional[str] = None

    def __post_init__(self) -> None:
        if (self.condition_type is None) == (self.path is None) or (self.path is None) != (self.value is None):
            raise ValueError(
                "a readiness is a condition type, or a field path with its value: use "
                "Readiness.condition or Readiness.field_equals"
            )

    @classmethod
    def condition(cls, condition_type: str) -> "Readiness":
        """Ready once `status.conditions` has `condition_type` with status `True`."""
        return cls(condition_type=condition_type)

    @classmethod
    def field_equals(cls, path: str, value: Any) -> "Readiness":
        """Ready once the field at the dotted `path` (`status.readyReplicas`) equals `value`
        (JSON data: a number, a string, ...)."""
        try:
            text = json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise Retry(f"cannot serialize the readiness value of {path}: {e}") from None
        return cls(path=path, value=text)


@dataclass(frozen=True)
class ChildOptions:
    """How the host handles one child (see `Desired.child`). Each method returns a new
    `ChildOptions`, so they chain: `ChildOptions().recreate().ready_when_condition("Complete")`."""

    #: How an existing child is updated.
    update: UpdateStrategy = UpdateStrategy.IN_PLACE
    #: What happens once the plugin stops returning it.
    on_prune: DeletePolicy = DeletePolicy.DELETE
    #: A barrier: the children added after this one are applied only once it is ready.
    ready_when: Optional[Readiness] = None

    def recreate(self) -> "ChildOptions":
        """Delete and create again when the API server refuses an update as immutable."""
        return dataclasses.replace(self, update=UpdateStrategy.RECREATE)

    def create_only(self) -> "ChildOptions":
        """Create when absent, never update."""
        return dataclasses.replace(self, update=UpdateStrategy.CREATE_ONLY)

    def orphan_on_prune(self) -> "ChildOptions":
        """Keep the object, without the host's owner reference and labels, once it is no
        longer returned."""
        return dataclasses.replace(self, on_prune=DeletePolicy.ORPHAN)

    def ready_when_condition(self, condition_type: str) -> "ChildOptions":
        """A barrier: the children after this one wait until its `status.conditions` has
        `condition_type` with status `True` (a Job's `Complete`)."""
        return dataclasses.replace(self, ready_when=Readiness.condition(condition_type))

    def ready_when_field(self, path: str, value: Any) -> "ChildOptions":
        """A barrier: the children after this one wait until the field at the dotted `path`
        (`status.readyReplicas`) equals `value`."""
        return dataclasses.replace(self, ready_when=Readiness.field_equals(path, value))


class SecretView(enum.Enum):
    """What of a related Secret's data the plugin sees."""

    #: Each value of `data` replaced by the hex SHA-256 of its bytes (the default).
    DATA_HASH = "data-hash"
    #: The Secret as stored; the host's policy must allow it (`allowSecretData`).
    FULL = "full"


@dataclass(frozen=True)
class Related:
    """Another kind of object a plugin reads: declared in `Operator(related=[...])`, read with
    `Observed.related(name)`. Exactly one of `name_from_path` and `label_selector` is set:
    use `Related.by_name_at` or `Related.by_labels`."""

    #: The key the objects come under (a DNS-1123 label, unique within the plugin).
    name: str
    #: Their kind.
    kind: Kind
    #: The dotted path of the parent holding the name of the one object (`spec.tls.secretName`).
    name_from_path: Optional[str] = None
    #: The label selector the objects match (`app=web,tier in (a,b)`).
    label_selector: Optional[str] = None
    #: For Secrets: what of their data the plugin sees.
    secret_view: SecretView = SecretView.DATA_HASH

    def __post_init__(self) -> None:
        if (self.name_from_path is None) == (self.label_selector is None):
            raise ValueError(
                f"related {self.name!r}: expected exactly one of name_from_path and label_selector"
            )

    @classmethod
    def by_name_at(cls, name: str, kind: Kind, path: str) -> "Related":
        """The object of `kind` named by the string at `path` in the parent (`spec.configMapName`)."""
        return cls(name, kind, name_from_path=path)

    @classmethod
    def by_labels(cls, name: str, kind: Kind, selector: str) -> "Related":
        """Every object of `kind` matching the label `selector`."""
        return cls(name, kind, label_selector=selector)

    def with_secret_data(self) -> "Related":
        """For a Secret: see its data in clear (the host's policy must allow it; the default
        is a hash of each value)."""
        return dataclasses.replace(self, secret_view=SecretView.FULL)
