"""The errors a plugin raises: an invalid spec (not retried) or a transient failure (retried)."""

from __future__ import annotations


from typing import Optional


class Error(Exception):
    """Why a reconcile or finalize did not succeed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidSpec(Error):
    """The parent's spec is invalid; the message names the field and what was expected.

    The host waits for the parent to change before calling again. Made by `invalid_at`, it
    also carries the field's path and the detail apart (`Validation.check` reads them).
    """

    def __init__(self, message: str, field: Optional[str] = None, detail: Optional[str] = None) -> None:
        super().__init__(message)
        self.field = field
        self.detail = detail

    def __str__(self) -> str:
        return f"invalid spec: {self.message}"


class Retry(Error):
    """A transient problem; the host retries with exponential backoff."""

    def __str__(self) -> str:
        return f"retry: {self.message}"


def invalid_field(field: str, expected: object) -> InvalidSpec:
    """An invalid-spec error for `field` of the parent's spec (`size` names `spec.size`)."""
    return invalid_at(f"spec.{field}", expected)


def invalid_at(path: str, expected: object) -> InvalidSpec:
    """An invalid-spec error for the field at `path` of the parent, from its top
    (`metadata.name`, `spec.template.image`), saying what was expected."""
    return InvalidSpec(f"{path}: {expected}", field=path, detail=str(expected))
