"""Typed specs and statuses: a dataclass is both the CRD's schema and the decoder of the JSON.

A field's JSON name is its Python name in camelCase (`container_port` is `containerPort`),
as kube-rs's `rename_all = "camelCase"`. Types map to OpenAPI as the Rust SDK's do: `int`
is `integer`/`int32` (`Field(format="int64")` for 64 bits), `float` is `number`/`double`,
`str`, `bool`, `list[T]`, `dict[str, T]`, `Optional[T]` (nullable, may be left out), nested
dataclasses, and `dict`/`Any` for a free-form object (`Field(schema=...)` gives its schema).
A field without a default is required.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types as pytypes
import typing
from dataclasses import dataclass
from typing import Any, Optional, Union

from .errors import invalid_at

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Field:
    """What a type cannot say about a field: use as `Annotated[int, Field(minimum=0)]`."""

    description: Optional[str] = None
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    format: Optional[str] = None
    enum: Optional[tuple] = None
    pattern: Optional[str] = None
    #: The field's JSON name when it is not the camelCase of the Python name.
    name: Optional[str] = None
    #: The whole schema of the field (a free-form object such as a Kubernetes type).
    schema: Optional[dict] = None


def json_name(name: str) -> str:
    """`container_port` -> `containerPort`."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _unwrap(tp: Any) -> tuple[Any, Field]:
    """The type inside `Annotated[...]` and its `Field` (an empty one when there is none)."""
    if typing.get_origin(tp) is typing.Annotated:
        base, *extras = typing.get_args(tp)
        found = next((e for e in extras if isinstance(e, Field)), Field())
        return base, found
    return tp, Field()


def _optional_inner(tp: Any) -> Any:
    """`T` of `Optional[T]`, or None when `tp` is not optional."""
    if typing.get_origin(tp) in (Union, pytypes.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


@functools.cache
def _fields(cls: type) -> list[tuple[dataclasses.Field, Any, Field, str]]:
    """Each dataclass field with its resolved type, its `Field` and its JSON name. Cached:
    resolving type hints is the slow part of decoding, and a class's fields never change (the
    CRD of `info`, made at build time, fills the cache in the component's snapshot)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    result = []
    for f in dataclasses.fields(cls):
        tp, meta = _unwrap(hints[f.name])
        result.append((f, tp, meta, meta.name or json_name(f.name)))
    return result


def _has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[misc]


def schema_of(tp: Any, meta: Field = Field()) -> dict:
    """The OpenAPI v3 schema of the type `tp` (a dataclass, or a field's type)."""
    tp, inner_meta = _unwrap(tp)
    meta = meta if meta != Field() else inner_meta
    if (inner := _optional_inner(tp)) is not None:
        schema = schema_of(inner, meta)
        schema["nullable"] = True
        return schema
    if meta.schema is not None:
        schema = dict(meta.schema)
    elif dataclasses.is_dataclass(tp):
        schema = {"type": "object", "properties": {}}
        required = []
        for f, ftp, fmeta, name in _fields(tp):
            schema["properties"][name] = schema_of(ftp, fmeta)
            if _has_default(f):
                default = _default_of(f)
                if default is not None and not dataclasses.is_dataclass(default):
                    schema["properties"][name]["default"] = to_json(default)
            elif _optional_inner(ftp) is None:
                required.append(name)
        if required:
            # Sorted, as schemars writes them.
            schema["required"] = sorted(required)
        if tp.__doc__ and not tp.__doc__.startswith(f"{tp.__name__}("):
            schema.setdefault("description", _first_paragraph(tp.__doc__))
    elif tp is bool:
        schema = {"type": "boolean"}
    elif tp is int:
        schema = {"type": "integer", "format": meta.format or "int32"}
    elif tp is float:
        schema = {"type": "number", "format": meta.format or "double"}
    elif tp is str:
        schema = {"type": "string"}
    elif typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp)
        schema = {"type": "array", "items": schema_of(item)}
    elif typing.get_origin(tp) is dict:
        _, value = typing.get_args(tp)
        schema = {"type": "object", "additionalProperties": schema_of(value)}
    elif tp in (dict, Any):
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    else:
        raise TypeError(f"no schema for the type {tp!r}")
    for key, value in (
        ("description", meta.description),
        # Floats, as schemars writes them (`maximum: 100.0`).
        ("minimum", None if meta.minimum is None else float(meta.minimum)),
        ("maximum", None if meta.maximum is None else float(meta.maximum)),
        ("enum", list(meta.enum) if meta.enum else None),
        ("pattern", meta.pattern),
    ):
        if value is not None:
            schema[key] = value
    return schema


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split())


def _describe(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:80]


def decode(tp: Any, value: Any, path: str) -> Any:
    """`value` (parsed JSON) as the type `tp`; `InvalidSpec` names the path of the first
    value that does not fit (`spec.size: expected an integer, got "three"`)."""
    tp, meta = _unwrap(tp)
    if meta.schema is not None:
        return value
    if (inner := _optional_inner(tp)) is not None:
        return None if value is None else decode(inner, value, path)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise invalid_at(path, f"expected an object, got {_describe(value)}")
        kwargs = {}
        for f, ftp, _, name in _fields(tp):
            if name in value and not (value[name] is None and _has_default(f)):
                kwargs[f.name] = decode(ftp, value[name], f"{path}.{name}")
            elif not _has_default(f) and _optional_inner(ftp) is None:
                raise invalid_at(path, f"missing field `{name}`")
        return tp(**kwargs)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise invalid_at(path, f"expected a boolean, got {_describe(value)}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            low, high = _INT_RANGES.get(meta.format or "int32", _INT_RANGES["int64"])
            if low <= value <= high:
                return value
            raise invalid_at(path, f"expected a {meta.format or 'int32'} integer, got {value}")
        raise invalid_at(path, f"expected an integer, got {_describe(value)}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise invalid_at(path, f"expected a number, got {_describe(value)}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise invalid_at(path, f"expected a string, got {_describe(value)}")
    if typing.get_origin(tp) is list:
        if not isinstance(value, list):
            raise invalid_at(path, f"expected a list, got {_describe(value)}")
        (item,) = typing.get_args(tp)
        return [decode(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if typing.get_origin(tp) is dict:
        if not isinstance(value, dict):
            raise invalid_at(path, f"expected an object, got {_describe(value)}")
        _, item = typing.get_args(tp)
        return {k: decode(item, v, f"{path}[{json.dumps(k)}]") for k, v in value.items()}
    if tp in (dict, Any):
        if tp is dict and not isinstance(value, dict):
            raise invalid_at(path, f"expected an object, got {_describe(value)}")
        return value
    raise TypeError(f"cannot decode the type {tp!r}")


def to_json(value: Any) -> Any:
    """`value` as JSON data: dataclasses as objects with camelCase keys and their `None`
    fields left out, lists and dicts item by item."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            name: to_json(getattr(value, f.name))
            for f, _, _, name in _fields(type(value))
            if getattr(value, f.name) is not None
        }
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value
