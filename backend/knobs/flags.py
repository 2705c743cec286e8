"""Command-line options derived from knob declarations: each knob with a `cli` flag adds itself to
a verb's parser, and reads itself back from the parsed arguments.

Nested groups lend their knobs' flags (the cuda provider's --nhwc, --no-tf32 ...), or take one
repeatable NAME=VALUE flag over all their knobs (--trt-option fp16=1), by our names or the
runtime's own (trt_fp16_enable=1).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
from typing import Any

from backend.commas import comma_list
from backend.errors import UserError
from backend.knobs import Cli, Knob, by_native, default_of, item_type, knobs, optional_of
from backend.knobs.serialize import from_json

BOOLEANS = {"1": True, "true": True, "on": True, "yes": True}
BOOLEANS |= {"0": False, "false": False, "off": False, "no": False}


def add_knob_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One argument per declared flag of `cls` and of its nested groups."""
    groups: dict[str, Any] = {}
    own = getattr(cls, "__annotations__", {})  # the class's own knobs first, inherited ones after
    for f, k, tp in sorted(_flags(cls), key=lambda found: found[0].name not in own):
        assert k.cli is not None
        cli = k.cli
        if cli.group and cli.group not in groups:
            groups[cli.group] = parser.add_argument_group(cli.group)
        target = groups.get(cli.group, parser)
        words = cli.help or k.help or k.label or None
        if cli.kind in ("flag", "invert"):
            target.add_argument(cli.flag, action="store_true", help=words)
        elif cli.kind in ("pairs", "options"):
            target.add_argument(
                cli.flag,
                action="append",
                default=[],
                metavar=cli.metavar or "NAME=VALUE",
                help=words,
            )
        elif cli.kind == "csv":
            default = cli.default or ",".join(str(getattr(v, "value", v)) for v in default_of(f))
            target.add_argument(cli.flag, default=default, help=words)
        else:
            base, _ = optional_of(tp)
            kind = base if base in (int, float) else str
            default = default_of(f)
            target.add_argument(
                cli.flag,
                type=kind,
                default=getattr(default, "value", default),
                choices=list(cli.choices) or None,
                help=words,
            )


def knob_values(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The field values the parsed flags give `cls`, nested groups built; a value that does not
    read is one UserError sentence naming the flag."""
    values: dict[str, Any] = {}
    for f, k, tp in knobs(cls):
        if k.cli is None and dataclasses.is_dataclass(tp):
            if group := knob_values(tp, args):
                values[f.name] = group
        elif k.cli is not None:
            values[f.name] = _value(f, k, tp, getattr(args, _dest(k.cli)))
    return values


def options_from_pairs(cls: type, pairs: list[str], flag: str) -> Any:
    """A group from repeated NAME=VALUE, by our field name or the runtime's native one."""
    native = by_native(cls)
    declared = {f.name: (k, tp) for f, k, tp in knobs(cls)}
    values: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = (part.strip() for part in pair.partition("="))
        name = native.get(name, name)
        if not sep or name not in declared:
            raise UserError(
                f"{flag} takes NAME=VALUE with NAME one of {', '.join(declared)}, not {pair!r}."
            )
        k, tp = declared[name]
        values[name] = _text_value(f"{flag} {name}", k, tp, text)
    return from_json(cls, values, what=getattr(cls, "WHAT", ""))


def _flags(cls: type) -> list[tuple[dataclasses.Field, Knob, Any]]:
    found = []
    for f, k, tp in knobs(cls):
        if k.cli is not None:
            found.append((f, k, tp))
        elif dataclasses.is_dataclass(tp):
            found += _flags(tp)
    return found


def _dest(cli: Cli) -> str:
    return cli.flag.lstrip("-").replace("-", "_")


def _value(f: dataclasses.Field, k: Knob, tp: Any, given: Any) -> Any:
    assert k.cli is not None
    kind, flag = k.cli.kind, k.cli.flag
    if kind == "flag":
        return bool(given)
    if kind == "invert":
        return not given
    if kind == "options":
        return options_from_pairs(tp, given, flag)
    if kind == "pairs":
        return tuple(pair(flag, text) for text in given)
    if kind == "csv":
        inner = item_type(tp)
        return tuple(_text_value(flag, k, inner, part) for part in comma_list(given))
    return given


def pair(flag: str, text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not value.strip().isdigit():
        raise UserError(f"{flag} takes NAME=VALUE, e.g. {flag} seq=128, not {text!r}.")
    return name.strip(), int(value)


def _text_value(what: str, k: Knob, tp: Any, text: str) -> Any:
    """One value from its text by the knob's type: 1/0 (on/off) flags, whole numbers, enums."""
    if k.parse is not None:
        return k.parse(text)
    if tp is bool:
        if text.lower() not in BOOLEANS:
            raise UserError(f"{what} takes 1 or 0 (on or off), not {text!r}.")
        return BOOLEANS[text.lower()]
    if tp is int:
        if not text.isdigit():
            raise UserError(f"{what} takes a whole number, not {text!r}.")
        return int(text)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        known = [m.value for m in tp]
        if text not in known:
            raise UserError(f"{what} takes one of {', '.join(known)}, not {text!r}.")
        return tp(text)
    return text
