"""Small parsers for the CLI: NAME=VALUE dimensions, the measurement preset, TensorRT options.

The sweep's own knobs (CUDA and TensorRT options included) are read by backend.knobs.flags from
their declarations; what stays here is shared with verbs that have no SweepSpec (serving, mixed).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from backend.knobs.flags import options_from_pairs, pair
from backend.measure_settings import MEASURE_PRESETS, MeasureSettings
from backend.trtoptions import TrtOptions


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
