"""Turning ORM objects into the frozen row dataclasses that leave storage."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def row_of(cls: type[T], obj: object, **converters: Any) -> T:
    """Copy the dataclass's fields from obj; converters turn stored strings into enums."""
    values = {name: getattr(obj, name) for name in cls.__dataclass_fields__}  # type: ignore[attr-defined]
    for name, convert in converters.items():
        values[name] = convert(values[name])
    return cls(**values)
