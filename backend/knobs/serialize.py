"""The one JSON serializer of declared dataclasses: sweeps, configurations, their runtime groups and
results are written and read by walking their fields and types, nested groups included.

Written forms are those of the field-by-field to_dict/from_dict pairs they replace (enums as their
values, symbolic dimensions as a mapping), so stored jobs and results keep loading; a knob moved
into a nested group names its old top-level key in `was` and is read from there too.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from backend.errors import UserError
from backend.knobs import default_of, hints, is_pairs, item_type, knobs, optional_of


def to_json(obj: Any, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A declared dataclass as plain JSON values, field by field (`drop` leaves some out)."""
    types = hints(type(obj))
    return {
        f.name: _dump(getattr(obj, f.name), types[f.name])
        for f in dataclasses.fields(obj)
        if f.name not in drop
    }


def _dump(value: Any, tp: Any) -> Any:
    if value is None:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    if isinstance(value, enum.Enum):
        return value.value
    if is_pairs(tp):
        return {str(k): _dump(v, Any) for k, v in value}
    if isinstance(value, (tuple, list)):
        inner = item_type(tp) or Any
        return [_dump(v, inner) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v, Any) for k, v in value.items()}
    return value


def from_json(cls: type, data: Any, strict: bool = True, what: str = "") -> Any:
    """A declared dataclass from what to_json wrote (or an instance, kept as it is).

    Missing names and nulls where the type takes none keep the field's default; unknown names
    are refused in one sentence when `strict` (a hand-edited link or option), dropped otherwise
    (results written by newer code). Enum values are checked by the class itself.
    """
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"The {what or cls.__name__} options are not a set of named values.")
    data = _moved_in(cls, dict(data))
    types = hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown and strict:
        raise UserError(
            f"Unknown {what or cls.__name__} option {unknown[0]!r}; choose from "
            f"{', '.join(sorted(known))}."
        )
    values = {}
    for name in known & set(data):
        value = data[name]
        base, optional = optional_of(types[name])
        if value is None and not optional:
            continue  # a stored null where the field takes none: its default, as before
        values[name] = _load(value, base)
    return cls(**values)


def field_from_json(cls: type, data: Any, name: str) -> Any:
    """One field of what to_json wrote for `cls`, read as from_json reads it (an old top-level
    name included; absent or null where the type takes none: the field's default), without
    building the rest: a reader that wants one figure of a stored sweep checks nothing else."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    data = _moved_in(cls, dict(data)) if isinstance(data, dict) else {}
    base, optional = optional_of(hints(cls)[name])
    value = data.get(name)
    if value is None and not optional:
        return default_of(f)
    return _load(value, base)


def _moved_in(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """Old top-level names of knobs now in a nested group, moved into that group's dict."""
    for f, k, tp in knobs(cls):
        old = {name: data.pop(name) for name in k.was if name in data}
        if old and dataclasses.is_dataclass(tp):
            group = data.get(f.name)
            data[f.name] = {**old, **(group if isinstance(group, dict) else {})}
    return data


def _load(value: Any, tp: Any) -> Any:
    if value is None:
        return None
    if dataclasses.is_dataclass(tp):
        return from_json(tp, value, strict=True, what=getattr(tp, "WHAT", ""))
    if is_pairs(tp):
        pairs = value.items() if isinstance(value, dict) else value
        return tuple((k, v) for k, v in pairs)
    inner = item_type(tp)
    if inner is not None and isinstance(value, (list, tuple)):
        loaded = [_load(v, inner) for v in value]
        return loaded if getattr(tp, "__origin__", None) is list else tuple(loaded)
    return value
