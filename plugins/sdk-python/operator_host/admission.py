"""What a plugin answers at admission: field errors and warnings (`Validation`), in the API server's own terms."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, TypeVar

from ._fmt import _debug_str as debug_str
from .errors import InvalidSpec, Retry
from .schema import to_json

T = TypeVar("T")


class FieldErrorType(enum.Enum):
    """Why a field is refused; the value is how the API server prints it."""

    REQUIRED = "Required value"
    INVALID = "Invalid value"
    FORBIDDEN = "Forbidden"
    NOT_SUPPORTED = "Unsupported value"
    DUPLICATE = "Duplicate value"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    NOT_FOUND = "Not found"

    @property
    def shows_value(self) -> bool:
        return self in (FieldErrorType.INVALID, FieldErrorType.NOT_SUPPORTED, FieldErrorType.DUPLICATE)


def json_value(value: Any) -> str:
    """`value` (JSON data or a dataclass) as compact JSON text, as the contract carries values."""
    return json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One refused field: `spec.size: Invalid value: 0: must be between 1 and 10`."""

    reason: FieldErrorType
    #: The field's path from the top of the object: `spec.size`, `spec.tls.secretName`.
    field: str
    #: The refused value as JSON text, or None.
    value: Optional[str]
    #: What was expected.
    detail: str

    def __str__(self) -> str:
        text = f"{self.field}: {self.reason.value}"
        if self.value is not None and self.reason.shows_value:
            text += f": {self.value}"
        if self.detail:
            text += f": {self.detail}"
        return text


class Validation:
    """What `validate` returns: the request is refused when it holds an error; warnings are
    shown either way (`kubectl` prints `Warning: ...`). Each method returns the validation,
    so they chain."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.warnings: list[str] = []

    def error(self, error: FieldError) -> "Validation":
        """Adds a field error."""
        self.errors.append(error)
        return self

    def _push(self, reason: FieldErrorType, field: str, value: Optional[str], detail: object) -> "Validation":
        return self.error(FieldError(reason, field, value, str(detail)))

    def invalid(self, field: str, value: Any, detail: object) -> "Validation":
        """`field: Invalid value: <value>: <detail>`."""
        return self._push(FieldErrorType.INVALID, field, json_value(value), detail)

    def required(self, field: str, detail: object) -> "Validation":
        """`field: Required value: <detail>`."""
        return self._push(FieldErrorType.REQUIRED, field, None, detail)

    def forbidden(self, field: str, detail: object) -> "Validation":
        """`field: Forbidden: <detail>`."""
        return self._push(FieldErrorType.FORBIDDEN, field, None, detail)

    def not_supported(self, field: str, value: Any, supported: Iterable[str]) -> "Validation":
        """`field: Unsupported value: <value>: supported values: "a", "b"`."""
        listed = ", ".join(debug_str(s) for s in supported)
        return self._push(
            FieldErrorType.NOT_SUPPORTED, field, json_value(value), f"supported values: {listed}"
        )

    def immutable(self, field: str, value: Any) -> "Validation":
        """`field: Invalid value: <value>: field is immutable`, the API server's words for a
        field an update may not change."""
        return self.invalid(field, value, "field is immutable")

    def check(self, checker: Callable[..., T], *args: Any, **kwargs: Any) -> Optional[T]:
        """Calls `checker(*args, **kwargs)` and returns what it returns; when it raises the
        SDK's invalid-spec error of the form `path: detail` (what `invalid_field` and
        `invalid_at` make), adds that field error instead and returns None. So the checks a
        `reconcile` makes refuse the same spec at admission. A `Retry` is not a spec problem
        and is ignored; any other exception is a bug and propagates."""
        try:
            return checker(*args, **kwargs)
        except InvalidSpec as e:
            self.add_invalid_spec(e)
        except Retry:
            pass
        return None

    def add_invalid_spec(self, error: InvalidSpec) -> "Validation":
        """Adds the field error of the SDK's invalid-spec error `error`, as `check` does."""
        if error.field is not None and error.detail is not None:
            field, detail = error.field, error.detail
        else:
            # Made by hand: split as the Rust SDK does, the whole message on `spec` else.
            field, separator, detail = error.message.partition(": ")
            if not separator:
                field, detail = "spec", error.message
        return self._push(FieldErrorType.INVALID, field, None, detail)

    def warn(self, message: object) -> "Validation":
        """Adds a warning, shown by kubectl as `Warning: <message>`."""
        self.warnings.append(str(message))
        return self

    @property
    def is_valid(self) -> bool:
        """Whether nothing is refused."""
        return not self.errors

    def raise_if_invalid(self) -> None:
        """Raises the errors as one `InvalidSpec` (`spec.a: ..., spec.b: ...`), for a
        `reconcile` that checks what `validate` checks; does nothing when nothing is refused."""
        if self.errors:
            raise InvalidSpec(", ".join(str(e) for e in self.errors))

    def __repr__(self) -> str:
        return f"Validation(errors={[str(e) for e in self.errors]!r}, warnings={self.warnings!r})"


def merge_diff(before: Any, after: Any) -> Any:
    """The RFC 7386 merge patch that turns the JSON data `before` into `after` (`None` removes
    a key); `_UNCHANGED` when they are equal."""
    if isinstance(before, dict) and isinstance(after, dict):
        patch = {}
        for key, new in after.items():
            if key in before:
                change = merge_diff(before[key], new)
                if change is not _UNCHANGED:
                    patch[key] = change
            else:
                patch[key] = new
        for key in before:
            if key not in after:
                patch[key] = None
        return patch if patch else _UNCHANGED
    # Compared as JSON text: in Python `True == 1 == 1.0`, in JSON they are three values.
    if _canonical(before) == _canonical(after):
        return _UNCHANGED
    return after


def merge_apply(target: Any, patch: Any) -> Any:
    """`target` with the RFC 7386 merge `patch` applied (dicts are changed in place)."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_apply(target.get(key), value)
    return target


class _Unchanged:
    """What `merge_diff` returns for equal values (`None` is a patch: it removes a key)."""

    def __repr__(self) -> str:
        return "UNCHANGED"


_UNCHANGED = _Unchanged()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
