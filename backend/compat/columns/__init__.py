"""The matrix's columns, registered by name in display order. Add a backend here, not in build."""

from __future__ import annotations

from backend.compat.columns.base import Availability, CompatColumn, ModelContext
from backend.compat.columns.openvino import OpenVINOColumn
from backend.compat.columns.ort_cpu import OrtCpuColumn
from backend.compat.columns.ort_cuda import OrtCudaColumn
from backend.compat.columns.ort_tensorrt import OrtTensorRTColumn
from backend.compat.columns.tensorrt import TensorRTColumn
from backend.compat.columns.tftrt import TfTrtColumn

COLUMNS: dict[str, CompatColumn] = {
    "ort-cpu": OrtCpuColumn(),
    "ort-cuda": OrtCudaColumn(),
    "ort-tensorrt": OrtTensorRTColumn(),
    "tensorrt": TensorRTColumn(),
    "openvino": OpenVINOColumn(),
    "tf-trt": TfTrtColumn(),
}

BACKEND_LABELS = {name: column.label for name, column in COLUMNS.items()}

__all__ = ["BACKEND_LABELS", "COLUMNS", "Availability", "CompatColumn", "ModelContext"]
