"""Small parsers for the CLI: NAME=VALUE dimensions, the measurement preset, TensorRT options,
the files its -o/--output options write.

The sweep's own knobs (CUDA and TensorRT options included) are read by backend.knobs.flags from
their declarations; what stays here is shared with verbs that have no SweepSpec (serving, mixed).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from backend.commas import comma_list
from backend.errors import UserError
from backend.knobs.flags import options_from_pairs, pair
from backend.measure_settings import MEASURE_PRESETS, MeasureSettings
from backend.trtoptions import TrtOptions

N = TypeVar("N", int, float)


def dims_from_pairs(pairs: list[str]) -> dict[str, int]:
    return dict(pair("--dim", text) for text in pairs)


def measure_from(args: Any) -> MeasureSettings:
    """The chosen preset (the same presets as the Optimize page), with --max-seconds on top."""
    settings = MEASURE_PRESETS["quick" if args.quick else args.preset]
    if args.max_seconds is not None:
        settings = replace(settings, max_seconds=args.max_seconds)
    return settings


def trt_options_from_pairs(pairs: list[str]) -> TrtOptions:
    """--trt-option NAME=VALUE, by our field name or ONNX Runtime's (trt_fp16_enable=1)."""
    return options_from_pairs(TrtOptions, pairs, "--trt-option")


def output_path(text: str) -> Path:
    """An -o/--output file, checked before any work: not a folder; its folder is made if it is
    missing (as `serve export` always did); one that cannot be is a sentence, not a traceback."""
    path = Path(text)
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a file to write, such as {path / 'out'}.")
    for folder in path.parents:
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{folder} is a file, not a folder; give another path to write.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"Cannot make the folder {path.parent} ({exc.strerror}).") from None
    return path


def write_output(path: Path, data: bytes) -> Path:
    """`data` written to an -o/--output file output_path checked before the work; a write the
    system refuses (permissions, a full disk) is one sentence."""
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise UserError(f"Cannot write {path} ({exc.strerror}).") from None
    return path


def positive(kind: Callable[[str], N]) -> Callable[[str], N]:
    """An argparse type: a number of `kind` above 0, else argparse's own one-line error (exit 2)."""

    def parse(text: str) -> N:
        value = kind(text)  # ValueError: argparse says "invalid int value"
        if not value > 0:
            raise argparse.ArgumentTypeError(f"takes a number above 0, not {text}")
        return value

    parse.__name__ = getattr(kind, "__name__", "number")
    return parse


def job_list(text: str) -> list[int]:
    """An argparse type for one of several job arguments: `7` or `7,8` (the pages' links and the
    other list flags take commas, so `compare 7,8` is what people type)."""
    parts = comma_list(text)
    if not parts or not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"takes job numbers such as 7 or 7,8, not {text!r}")
    return [int(part) for part in parts]


class JobNumbers(argparse.Action):
    """The job lists of several arguments as one list, each job once, in the order given."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, list(dict.fromkeys(i for ids in values for i in ids)))
