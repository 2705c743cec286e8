"""ONNX Runtime's TensorRT execution provider options, as one typed configuration field.

Kept apart from specs.py (which re-exports it) like cudaoptions.py. Each knob names the option
ONNX Runtime reads (native=, used by backend/runtimes/ort_trt.py); the rules that tie the options
to a configuration's provider and precision are check_trt_options, each refusal one sentence.

Cache folders are stored relative to the data folder (OPTIBOARD_DATA_DIR) and resolved on the
machine that measures, so a shared link or another user's sweep can never make a worker write
TensorRT engines outside it, and a cluster node puts them under its own data folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import settings
from backend.errors import UserError
from backend.knobs import Widget, by_native, knob

DEFAULT_TIMING_FOLDER = "tensorrt/timing"
DEFAULT_ENGINE_FOLDER = "tensorrt/engines"
BUILDER_LEVELS = range(0, 6)  # TensorRT's builder optimization levels; ORT's default is 3
SIZE_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30}
SIZE_UNITS |= {"kb": 10**3, "mb": 10**6, "gb": 10**9}


def size_bytes(text: str) -> int:
    """'4GiB', '512MiB' or plain bytes: TensorRT's workspace is a byte count."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in SIZE_UNITS:
        raise UserError(f"Write a size as bytes or with GiB, MiB, KiB, GB or MB, not {text!r}.")
    return int(match.group(1)) * SIZE_UNITS[match.group(2).lower()]


@dataclass(frozen=True)
class TrtOptions:
    """Precision flags, caches, workspace and builder level of the tensorrt provider.

    Defaults are ONNX Runtime's, so a default adds nothing to a configuration's key.
    """

    WHAT = "TensorRT"

    fp16: bool = knob(
        False, label="FP16 kernels (trt_fp16_enable)", widget="trt_fp16", native="trt_fp16_enable"
    )
    # INT8 kernels, with a calibration table or Q/DQ nodes
    int8: bool = knob(
        False, label="INT8 kernels (trt_int8_enable)", widget="trt_int8", native="trt_int8_enable"
    )
    int8_calibration_table: str = knob(  # a file in the engine cache folder
        "",
        label="INT8 calibration table (a file in the engine cache folder)",
        help="Not for INT8 static (QDQ): its Q/DQ nodes carry the scales.",
        widget="trt_table",
        native="trt_int8_calibration_table_name",
    )
    # keep tactic timings between builds
    timing_cache: bool = knob(
        False, label="Timing cache", widget="trt_timing", native="trt_timing_cache_enable"
    )
    timing_cache_path: str = knob(  # relative to the data folder; empty: DEFAULT_TIMING_FOLDER
        "",
        label="Timing cache folder",
        help="Inside the data folder; empty: the default.",
        widget=Widget("trt_timing_path", placeholder=DEFAULT_TIMING_FOLDER),
        native="trt_timing_cache_path",
    )
    # keep built engines between sessions
    engine_cache: bool = knob(
        False, label="Engine cache", widget="trt_engine", native="trt_engine_cache_enable"
    )
    engine_cache_path: str = knob(  # relative to the data folder; empty: DEFAULT_ENGINE_FOLDER
        "",
        label="Engine cache folder",
        help="Inside the data folder; empty: the default.",
        widget=Widget("trt_engine_path", placeholder=DEFAULT_ENGINE_FOLDER),
        native="trt_engine_cache_path",
    )
    max_workspace_size: int = knob(  # bytes; 0: ONNX Runtime's default
        0,
        label="Workspace limit (MiB, 0: ONNX Runtime's default)",
        widget=Widget("trt_workspace", limits=(0, 1 << 20), scale=1 << 20),
        native="trt_max_workspace_size",
        parse=size_bytes,
    )
    builder_optimization_level: int = knob(  # 0 (fast build) to 5
        3,
        label="Builder optimization level",
        help="0 builds fastest; 5 searches longest for the fastest engine (3: default).",
        widget=Widget("trt_level", limits=(0, 5), slider=True),
        native="trt_builder_optimization_level",
    )

    def __post_init__(self) -> None:
        for name in ("timing_cache_path", "engine_cache_path"):
            object.__setattr__(self, name, inside_data_folder(getattr(self, name), name))
        table = self.int8_calibration_table
        if table and (PurePosixPath(table).name != table or table in (".", "..")):
            raise UserError(
                f"The INT8 calibration table {table!r} must be a file name (ONNX Runtime reads it "
                "from the engine cache folder), not a path."
            )
        if self.builder_optimization_level not in BUILDER_LEVELS:
            raise UserError(
                f"TensorRT's builder optimization level goes from 0 to 5, not "
                f"{self.builder_optimization_level}; 3 is ONNX Runtime's default."
            )
        if self.max_workspace_size < 0:
            raise UserError("The TensorRT workspace cannot be negative; 0 keeps the default.")
        for flag, path, label in (
            (self.timing_cache, self.timing_cache_path, "timing"),
            (self.engine_cache, self.engine_cache_path, "engine"),
        ):
            if path and not flag:
                raise UserError(
                    f"A TensorRT {label} cache folder with the {label} cache off does nothing; "
                    f"turn the {label} cache on or clear its folder."
                )

    @property
    def is_default(self) -> bool:
        return self == TrtOptions()

    @property
    def key_parts(self) -> list[str]:
        """What changes the engine TensorRT builds; the caches only change how long it takes."""
        parts = ["trtfp16"] if self.fp16 else []
        parts += ["trtint8"] if self.int8 else []
        parts += [f"cal:{self.int8_calibration_table}"] if self.int8_calibration_table else []
        parts += [f"ws:{self.max_workspace_size}"] if self.max_workspace_size else []
        if self.builder_optimization_level != 3:
            parts.append(f"opt{self.builder_optimization_level}")
        return parts

    def folders(self, data_dir: Path) -> dict[str, Path]:
        """The cache folders that are on, resolved under this machine's data folder."""
        found = {}
        if self.timing_cache:
            found["timing"] = data_dir / (self.timing_cache_path or DEFAULT_TIMING_FOLDER)
        if self.engine_cache or self.int8_calibration_table:
            found["engine"] = data_dir / (self.engine_cache_path or DEFAULT_ENGINE_FOLDER)
        return found

    def to_dict(self) -> dict[str, Any]:
        from backend.knobs.serialize import to_json

        return to_json(self)

    @classmethod
    def from_value(cls, value: TrtOptions | dict[str, Any] | None) -> TrtOptions:
        from backend.knobs.serialize import from_json

        return from_json(cls, value, what=cls.WHAT)


ORT_NAMES = {ours: ort for ort, ours in by_native(TrtOptions).items()}  # runtimes/ort_trt.py


def inside_data_folder(text: str, label: str) -> str:
    """The folder relative to the data folder; refused when it would land outside it."""
    if not text:
        return ""
    data = settings.data_dir().resolve()
    path = Path(text)
    resolved = (path if path.is_absolute() else data / path).resolve()
    if not resolved.is_relative_to(data) or resolved == data:
        raise UserError(
            f"The TensorRT {label.replace('_', ' ')} {text!r} is outside the data folder {data}; "
            f"use a folder inside it, e.g. {DEFAULT_ENGINE_FOLDER}."
        )
    return resolved.relative_to(data).as_posix()


def check_trt_options(trt: TrtOptions, provider: str, runtime: str, precision: str) -> None:
    """Refuse the combinations the tensorrt provider cannot run, each with one sentence."""
    if trt.is_default:
        return
    if provider != "tensorrt" or runtime != "onnxruntime":
        raise UserError(
            "TensorRT options apply to ONNX Runtime's tensorrt provider only; pick it or leave "
            "them at their defaults."
        )
    qdq = precision == "int8_static"  # Precision.INT8_STATIC (a str enum): Q/DQ nodes with scales
    if trt.int8_calibration_table and not trt.int8:
        raise UserError(
            "An INT8 calibration table is read only in TensorRT's INT8 mode; turn INT8 on or "
            "clear the table."
        )
    if trt.int8 and not trt.int8_calibration_table and not qdq:
        raise UserError(
            "TensorRT INT8 needs a calibration table or a model with Q/DQ nodes; name the table "
            "(a file in the engine cache folder) or pick INT8 static (QDQ) as the precision."
        )
    if trt.int8_calibration_table and qdq:
        raise UserError(
            "TensorRT refuses a calibration table for a model with Q/DQ nodes (INT8 static "
            "carries its own scales); clear the table or pick FP32 as the precision."
        )


def trt_checked(config: Any) -> TrtOptions:
    """A Configuration's options, typed and checked against its provider and precision."""
    trt = TrtOptions.from_value(config.tensorrt)
    check_trt_options(trt, config.provider, config.backend, config.precision)
    return trt


def trt_for_sweep(value: TrtOptions | dict[str, Any], providers: tuple[str, ...]) -> TrtOptions:
    """A sweep's options, refused when no provider of the sweep would use them."""
    trt = TrtOptions.from_value(value)
    if not trt.is_default and "tensorrt" not in providers:
        raise UserError(
            "TensorRT options apply to the tensorrt provider; pick it or leave them at their "
            "defaults."
        )
    return trt
