"""Knob declarations: one dataclass field per knob, with everything said about it in its metadata.

A knob is declared once, as `name: type = knob(default, label=..., help=..., url=..., cli=...)`
on a specs dataclass (SweepSpec, Configuration or one of the runtime groups nested in them). Its
JSON form, link key, command-line flag, page label, help text and form widget, the runtimes it
applies to, its part of a configuration's key and its results-table column are all read from
that declaration: knobs.serialize (stored JSON), knobs.links (page links), knobs.flags
(argparse) and pages/components/knob_form.py (the Optimize form).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from backend.commas import comma_list
from backend.errors import UserError


@dataclass(frozen=True)
class Codec:
    """How one value reads and writes as text (a link's query value, a NAME=VALUE option)."""

    dump: Callable[[Any], str]
    load: Callable[[str], Any]


@dataclass(frozen=True)
class Cli:
    """A knob's command-line flag.

    kind: "value" (--threads 4), "csv" (--providers cpu,cuda), "flag" (--simplify sets True),
    "invert" (--dynamic sets fixed_shapes False), "pairs" (--dim seq=128, repeatable) or
    "options" (--trt-option NAME=VALUE, repeatable, over a nested group's own knobs).
    """

    flag: str
    kind: str = "value"
    default: str | None = None  # the flag's own default where it differs from the field's
    choices: tuple[str, ...] = ()
    group: str = ""  # the argparse group title; empty: the verb's own options
    metavar: str | None = None
    help: str = ""  # where the flag's syntax needs other words than the knob's help


@dataclass(frozen=True)
class Widget:
    """How the Optimize form draws a knob. Its kind follows from the field's type (a tuple of
    choices: multiselect; choices: select box; bool: toggle; int/float: number; str: text; a
    tuple of names: one per line; name:value pairs: one number per name); these say the rest."""

    key: str  # the widget's key
    choices: tuple[Any, ...] = ()  # the values offered, where the type does not say them
    labels: Any = None  # how a choice reads: a mapping or a function; None: its .label, or itself
    limits: tuple[float, float] | None = None  # a number's range
    step: float | None = None
    format: str | None = None
    scale: int = 1  # shown as value / scale (a byte count as MiB)
    slider: bool = False
    placeholder: str = ""
    start: Any = None  # where the form starts when the link names nothing; None: the default
    expanded: bool = False  # a nested group's expander, open from the start
    within: str = ""  # a nested group's field name: drawn in that group's expander, after it


@dataclass(frozen=True)
class Knob:
    """Everything a field says about itself beyond its name, type and default."""

    label: str = ""  # what the Optimize page and tables call it
    help: str = ""
    widget: Widget | None = None  # how the Optimize form draws it; None: not in the form
    url: str | None = None  # its key in an Optimize-page link; None: not in links
    codec: Codec | None = None  # how it reads and writes in a link; None: by its type
    url_always: bool = False  # written at its default too (links keep the keys they always had)
    link: Any = None  # a multi-key link codec (read/write over the whole query)
    cli: Cli | None = None
    applies: tuple[str, ...] = ()  # "runtime" or "runtime/provider"; empty: everywhere
    key: Callable[[Any], str] | None = None  # its part of a configuration's key, when not default
    column: str | None = None  # its results-table column (frames), when it has one
    native: str = ""  # the runtime's own name for it (an alias on the command line)
    parse: Callable[[str], Any] | None = None  # NAME=VALUE text -> value, where not by type
    was: tuple[str, ...] = ()  # top-level JSON names a nested group's knobs were stored under


def knob(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, **meta: Any):
    """A dataclass field carrying its Knob; `factory` for mutable defaults (nested groups);
    `widget="key"` is short for Widget("key")."""
    if isinstance(meta.get("widget"), str):
        meta["widget"] = Widget(meta["widget"])
    return dataclasses.field(
        default=default, default_factory=factory, metadata={"knob": Knob(**meta)}
    )


def meta(field: dataclasses.Field) -> Knob:
    return field.metadata.get("knob") or Knob()


@cache
def hints(cls: type) -> dict[str, Any]:
    """Field types resolved (the specs modules use postponed annotations)."""
    return typing.get_type_hints(cls)


@cache
def knobs(cls: type) -> tuple[tuple[dataclasses.Field, Knob, Any], ...]:
    """(field, its Knob, its resolved type) for every field of a declared dataclass; cached, as
    the serializer asks it for every stored result it reads."""
    types = hints(cls)
    return tuple((f, meta(f), types[f.name]) for f in dataclasses.fields(cls))


def default_of(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def group_types(cls: type) -> dict[str, type]:
    """The nested typed groups of a declaration (cuda, tensorrt, openvino...) by field name."""
    return {f.name: t for f, _, t in knobs(cls) if dataclasses.is_dataclass(t)}


def applies(knob_: Knob, runtime: str, provider: str) -> bool:
    """Whether a knob means anything on one runtime and provider (its `applies` list)."""
    if not knob_.applies:
        return True
    return runtime in knob_.applies or f"{runtime}/{provider}" in knob_.applies


def key_parts(obj: Any) -> list[str]:
    """The declared key parts of the knobs that are not at their default, in declared order."""
    parts = []
    for f, k, _ in knobs(type(obj)):
        value = getattr(obj, f.name)
        if k.key is not None and value != default_of(f):
            parts.append(k.key(value))
    return parts


@cache
def is_pairs(tp: Any) -> bool:
    """tuple[tuple[str, int], ...]: stored and linked as a mapping."""
    args = typing.get_args(tp)
    return (
        typing.get_origin(tp) is tuple
        and len(args) == 2
        and args[1] is Ellipsis
        and typing.get_origin(args[0]) is tuple
    )


@cache
def item_type(tp: Any) -> Any:
    """The item type of tuple[X, ...] or list[X]; None for other types."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (tuple, list) and args:
        return args[0]
    return None


@cache
def optional_of(tp: Any) -> tuple[Any, bool]:
    """(X, True) for X | None; (tp, False) otherwise."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and (type(None) in args):
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else tp), True
    return tp, False


def scalar(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def text_codec(tp: Any) -> Codec:
    """The default link codec of a type: comma lists for tuples, 1/0 for flags, str otherwise."""
    inner = item_type(tp)
    if is_pairs(tp):
        return Codec(
            lambda v: ",".join(f"{k}:{n}" for k, n in v),
            lambda t: tuple(
                (name, int(n)) for name, n in (p.split(":", 1) for p in comma_list(t) if ":" in p)
            ),
        )
    if inner is not None:  # enum items read as their enum: the link's "fp32" is Precision.FP32
        is_enum = isinstance(inner, type) and issubclass(inner, enum.Enum)
        load_item = int if inner is int else inner if is_enum else str
        return Codec(
            lambda v: ",".join(str(scalar(x)) for x in v),
            lambda t: tuple(load_item(p) for p in comma_list(t)),
        )
    base, _ = optional_of(tp)
    if base is bool:
        return Codec(lambda v: "1" if v else "0", lambda t: t == "1")
    if base in (int, float):
        return Codec(str, base)
    return Codec(lambda v: str(scalar(v)), str)


def as_member(obj: Any, name: str, what: str) -> None:
    """A frozen declared dataclass's enum field given as text, turned into its member in place
    (links, flags and stored JSON hand over text); an unknown value is one sentence."""
    kind, value = hints(type(obj))[name], getattr(obj, name)
    try:
        object.__setattr__(obj, name, kind(value))
    except ValueError:
        choices = ", ".join(str(member.value) for member in kind)
        raise UserError(f"Unknown {what} {value!r}; choose one of {choices}.") from None


def by_native(cls: type) -> Mapping[str, str]:
    """A group's runtime-native knob names (e.g. trt_fp16_enable) -> our field names."""
    return {k.native: f.name for f, k, _ in knobs(cls) if k.native}


def columns(obj: Any) -> dict[str, Any]:
    """The results-table columns the knobs of `obj` declare (nested groups included), each as
    its plain value (an enum's value)."""
    found: dict[str, Any] = {}
    for f, k, tp in knobs(type(obj)):
        value = getattr(obj, f.name)
        if k.column:
            found[k.column] = scalar(value)
        elif dataclasses.is_dataclass(tp):
            found |= columns(value)
    return found


def declared_columns(cls: type) -> list[str]:
    """The column names `columns` gives for instances of `cls`, in declared order."""
    found: list[str] = []
    for _field, k, tp in knobs(cls):
        if k.column:
            found.append(k.column)
        elif dataclasses.is_dataclass(tp):
            found += declared_columns(tp)
    return found
