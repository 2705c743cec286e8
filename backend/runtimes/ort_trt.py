"""TrtOptions as the TensorrtExecutionProvider's own option names (reached from onnxruntime.py).

Names from ONNX Runtime's TensorRT execution provider page (onnxruntime.ai/docs/
execution-providers/TensorRT-ExecutionProvider.html, "Configurations"), the same strings as the
OrtTensorRTProviderOptionsV2 fields: trt_fp16_enable, trt_int8_enable,
trt_int8_calibration_table_name, trt_timing_cache_enable, trt_timing_cache_path,
trt_engine_cache_enable, trt_engine_cache_path, trt_max_workspace_size and
trt_builder_optimization_level. ORT reads the calibration table from the engine cache path.
"""

from __future__ import annotations

from pathlib import Path

from backend.trtoptions import ORT_NAMES, TrtOptions

__all__ = ["ORT_NAMES", "prepare_cache_folders", "tensorrt_provider_options"]


def _flag(value: bool) -> str:
    return "1" if value else "0"


def tensorrt_provider_options(trt: TrtOptions, data_dir: Path) -> dict[str, str]:
    """The provider options for one session; cache folders resolved under data_dir."""
    options = {
        "trt_fp16_enable": _flag(trt.fp16),
        "trt_int8_enable": _flag(trt.int8),
        "trt_timing_cache_enable": _flag(trt.timing_cache),
        "trt_engine_cache_enable": _flag(trt.engine_cache),
        "trt_builder_optimization_level": str(trt.builder_optimization_level),
    }
    if trt.max_workspace_size:
        options["trt_max_workspace_size"] = str(trt.max_workspace_size)
    if trt.int8_calibration_table:
        options["trt_int8_calibration_table_name"] = trt.int8_calibration_table
    folders = trt.folders(data_dir)
    if "timing" in folders:
        options["trt_timing_cache_path"] = str(folders["timing"])
    if "engine" in folders:
        options["trt_engine_cache_path"] = str(folders["engine"])
    return options


def prepare_cache_folders(trt: TrtOptions, data_dir: Path) -> None:
    """Create the cache folders before the session: TensorRT writes into them after its build."""
    for folder in trt.folders(data_dir).values():
        folder.mkdir(parents=True, exist_ok=True)
