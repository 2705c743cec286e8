"""Small parsers for the CLI's comma lists, NAME=VALUE dimensions, CUDA and TensorRT options."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from typing import Any

from backend.commas import comma_list
from backend.cudaoptions import ConvAlgoSearch, CudaOptions, IoMode
from backend.errors import UserError
from backend.measure_settings import MEASURE_PRESETS, MeasureSettings
from backend.trtoptions import ORT_NAMES, TrtOptions

csv_list = comma_list  # the name cli.py imports


def dims_from_pairs(pairs: list[str]) -> dict[str, int]:
    dims = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not value.strip().isdigit():
            raise UserError(f"--dim takes NAME=VALUE, e.g. --dim seq=128, not {pair!r}.")
        dims[name.strip()] = int(value)
    return dims


def measure_from(args: Any) -> MeasureSettings:
    """The chosen preset (the same presets as the Optimize page), with --max-seconds on top."""
    settings = MEASURE_PRESETS["quick" if args.quick else args.preset]
    if args.max_seconds is not None:
        settings = replace(settings, max_seconds=args.max_seconds)
    return settings


SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
}
BOOLEANS = {
    "1": True,
    "true": True,
    "on": True,
    "yes": True,
    "0": False,
    "false": False,
    "off": False,
    "no": False,
}


def _bytes(text: str) -> int:
    """'4GiB', '512MiB' or plain bytes: TensorRT's workspace is a byte count."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in SIZE_UNITS:
        raise UserError(f"Write a size as bytes or with GiB, MiB, KiB, GB or MB, not {text!r}.")
    return int(match.group(1)) * SIZE_UNITS[match.group(2).lower()]


def trt_options_from_pairs(pairs: list[str]) -> TrtOptions:
    """--trt-option NAME=VALUE, by our field name or ONNX Runtime's (trt_fp16_enable=1)."""
    by_ort = {ort: ours for ours, ort in ORT_NAMES.items()}
    kinds = {f.name: f.type for f in fields(TrtOptions)}
    values: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = (part.strip() for part in pair.partition("="))
        name = by_ort.get(name, name)
        if not sep or name not in kinds:
            raise UserError(
                f"--trt-option takes NAME=VALUE with NAME one of {', '.join(kinds)}, not {pair!r}."
            )
        if kinds[name] == "bool":
            if value.lower() not in BOOLEANS:
                raise UserError(f"--trt-option {name} takes 1 or 0 (on or off), not {value!r}.")
            values[name] = BOOLEANS[value.lower()]
        elif name == "max_workspace_size":
            values[name] = _bytes(value)
        elif kinds[name] == "int":
            if not value.isdigit():
                raise UserError(f"--trt-option {name} takes a whole number, not {value!r}.")
            values[name] = int(value)
        else:
            values[name] = value
    return TrtOptions.from_value(values)


def add_trt_option(group: Any) -> None:
    """`--trt-option NAME=VALUE` on the run verb's GPU group (parsed by trt_options_from_pairs)."""
    group.add_argument(
        "--trt-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="tensorrt provider, repeatable: fp16=1 int8=1 int8_calibration_table=FILE "
        "timing_cache=1 engine_cache=1 engine_cache_path=DIR max_workspace_size=4GiB "
        "builder_optimization_level=0..5 (or ORT's trt_* names)",
    )


def add_gpu_options(parser: Any) -> None:
    """The cuda provider's knobs on the run and submit verbs (read back by cuda_options_from)."""
    gpu = parser.add_argument_group("GPU (the cuda provider)")
    gpu.add_argument(
        "--timing",
        default=IoMode.END_TO_END.value,
        help="comma list: end_to_end (host arrays, copies timed), device (IOBinding)",
    )
    gpu.add_argument("--cuda-graph", action="store_true", help="enable_cuda_graph (needs device)")
    gpu.add_argument(
        "--cudnn-search", default="EXHAUSTIVE", choices=[c.value for c in ConvAlgoSearch]
    )
    gpu.add_argument("--no-tf32", action="store_true", help="FP32 without TF32 Tensor Cores")
    gpu.add_argument("--nhwc", action="store_true", help="prefer_nhwc layout for convolutions")
    gpu.add_argument("--fp16-io", action="store_true", help="FP16 with float16 inputs/outputs")
    gpu.add_argument(
        "--fuse-conv-bias", action="store_true", help="conv bias inside cuDNN's conv (FP16: --nhwc)"
    )
    gpu.add_argument(
        "--small-workspace", action="store_true", help="cuDNN conv without the max workspace"
    )
    gpu.add_argument(
        "--find-knee", action="store_true", help="batches 1,2,4,... until throughput flattens"
    )
    gpu.add_argument("--knee-max-batch", type=int, default=1024)


def cuda_options_from(args: Any) -> CudaOptions:
    return CudaOptions(
        conv_algo_search=args.cudnn_search,
        use_tf32=not args.no_tf32,
        prefer_nhwc=args.nhwc,
        enable_cuda_graph=args.cuda_graph,
        float16_io=args.fp16_io,
        conv_max_workspace=not args.small_workspace,
        fuse_conv_bias=args.fuse_conv_bias,
    )
