"""Page links derived from knob declarations: every knob with a `url` key reads and writes itself.

A nested group with its own key travels as one JSON value (cuda=, trt=); a group without one
lends its knobs' keys to the link (hint=, streams=). A knob is written when it differs from its
default, or always when declared `url_always` (the keys links have always carried).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
from collections.abc import Mapping
from typing import Any

from backend.errors import UserError
from backend.knobs import (
    Codec,
    Knob,
    default_of,
    hints,
    is_pairs,
    item_type,
    knobs,
    optional_of,
    text_codec,
)
from backend.knobs.serialize import from_json, to_json
from backend.measure_settings import MEASURE_PRESETS, MeasureSettings, preset_name

CUSTOM_MEASURE = "custom"  # the `measure` link value when the m_* values are given one by one


class LinkValueError(ValueError):
    """One link key whose value does not read: the key, its text and what it should hold, so
    a page can drop that key alone and say which it was (backend/forms/optimize.link_start)."""

    def __init__(self, key: str, text: str, expected: str) -> None:
        self.key, self.text, self.expected = key, text, expected
        super().__init__(f"{key}={text[:60]} does not read: {expected}")


def expected_text(tp: Any, why: Exception) -> str:
    """What a link value of type `tp` should look like, in words; for a type without a plain
    description (a nested group's JSON), the reason it did not read (those are sentences)."""
    base, _ = optional_of(tp)
    item = item_type(base)
    if is_pairs(base):
        return "name:number pairs separated by commas, e.g. seq:128"
    if item is int:
        return "whole numbers separated by commas, e.g. 1,8,32"
    if isinstance(item, type) and issubclass(item, enum.Enum):
        return "a comma list of " + ", ".join(str(m.value) for m in item)
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in base)
    if base is int:
        return "a whole number"
    if base is float:
        return "a number, e.g. 0.5"
    return str(why)


def group_codec(cls: type) -> Codec:
    """A nested group as one JSON value; a hand-edited one naming an unknown option, or one of
    the wrong kind, is a ValueError that names it (it must not reach the constructor)."""

    def load(text: str) -> Any:
        value = json.loads(text)
        what = getattr(cls, "WHAT", cls.__name__)
        if not isinstance(value, dict):
            raise ValueError(f"the {what} options are not a set of named values")
        defaults = to_json(cls())
        for name, given in value.items():
            if name not in defaults:
                raise ValueError(f"unknown {what} option {str(name)[:40]!r}")
            if type(given) is not type(defaults[name]):
                raise ValueError(f"{what} option {name!r} has a value of the wrong kind")
        return from_json(cls, value, what=what)

    return Codec(lambda group: json.dumps(to_json(group), sort_keys=True), load)


def to_query(obj: Any) -> dict[str, str]:
    """Link parameters for every declared knob of `obj` (see from_query)."""
    query: dict[str, str] = {}
    for f, k, tp in knobs(type(obj)):
        if k.link is None and k.url is None:
            if dataclasses.is_dataclass(tp):  # a group without its own key lends its knobs'
                query.update(to_query(getattr(obj, f.name)))
        else:
            query.update({key: text for key, text in _written(obj, f, k, tp).items() if text})
    return query


def field_query(cls: type, name: str, value: Any) -> dict[str, str | None]:
    """The link keys one knob of `cls` writes for `value` (the others at their defaults), None
    for a key to remove: what a form widget keeps in step with the link. A nested group without
    its own key writes nothing here (its knobs write theirs)."""
    found = {f.name: (f, k, tp) for f, k, tp in knobs(cls)}
    f, k, tp = found[name]
    if k.link is None and k.url is None:
        return {}
    whole = types.SimpleNamespace(**{g.name: default_of(g) for g, _, _ in found.values()})
    setattr(whole, name, value)
    return _written(whole, f, k, tp)


def _written(obj: Any, f: dataclasses.Field, k: Knob, tp: Any) -> dict[str, str | None]:
    """A knob's keys as text; None (or empty text) where it writes nothing (at its default)."""
    value = getattr(obj, f.name)
    if k.link is not None:
        return dict.fromkeys(k.link.keys) | k.link.write(obj, f.name)
    if k.url_always or value != default_of(f):
        return {k.url: _codec(k, tp).dump(value)}
    return {k.url: None}


def from_query(cls: type, query: Mapping[str, str]) -> dict[str, Any]:
    """The field values a link names for `cls`, by field name; absent or empty keys are left out
    (they take the declared defaults). A value that does not read is a ValueError."""
    values: dict[str, Any] = {}
    for f, k, tp in knobs(cls):
        if k.link is not None:
            values.update(k.link.read(query, f.name))
        elif k.url is None and dataclasses.is_dataclass(tp):
            if group := from_query(tp, query):
                values[f.name] = group
        elif k.url is not None and (text := query.get(k.url)):
            try:
                values[f.name] = _codec(k, tp).load(text)
            except (ValueError, TypeError) as exc:
                raise LinkValueError(k.url, text, expected_text(tp, exc)) from None
    return values


def _codec(k: Knob, tp: Any) -> Codec:
    if k.codec is not None:
        return k.codec
    return group_codec(tp) if dataclasses.is_dataclass(tp) else text_codec(tp)


class MeasureLink:
    """`measure=` names a preset, or `custom` with the settings one by one (m_warmup_runs=...)."""

    keys = ("measure", *(f"m_{f.name}" for f in dataclasses.fields(MeasureSettings)))

    def write(self, spec: Any, name: str) -> dict[str, str]:
        settings = getattr(spec, name)
        preset = preset_name(settings)
        if preset:
            return {"measure": preset}
        values = {
            f"m_{f.name}": str(getattr(settings, f.name)) for f in dataclasses.fields(settings)
        }
        return {"measure": CUSTOM_MEASURE, **values}

    def read(self, query: Mapping[str, str], name: str) -> dict[str, Any]:
        preset = query.get("measure") or "standard"
        if preset in MEASURE_PRESETS:
            return {name: MEASURE_PRESETS[preset]}
        if preset != CUSTOM_MEASURE:
            choices = ", ".join([*MEASURE_PRESETS, CUSTOM_MEASURE])
            raise UserError(f"Unknown measurement {preset!r} in the link; use one of {choices}.")
        types = hints(MeasureSettings)
        values = {}
        for f in dataclasses.fields(MeasureSettings):
            key, text = f"m_{f.name}", query.get(f"m_{f.name}")
            if text is None:
                continue
            try:
                values[f.name] = types[f.name](text)
            except ValueError as exc:
                raise LinkValueError(key, text, expected_text(types[f.name], exc)) from None
        return {name: MeasureSettings(**values)}


class KneeLink:
    """`knee=N`: search the knee up to batch N (find_knee and knee_max_batch in one key)."""

    keys = ("knee",)

    def write(self, spec: Any, name: str) -> dict[str, str]:
        return {"knee": str(spec.knee_max_batch)} if spec.find_knee else {}

    def read(self, query: Mapping[str, str], name: str) -> dict[str, Any]:
        knee = query.get("knee")
        if not knee:
            return {}
        try:
            return {"find_knee": True, "knee_max_batch": int(knee)}
        except ValueError as exc:
            raise LinkValueError("knee", knee, expected_text(int, exc)) from None
