"""The roofline's peak on a GPU (backend/generate/roofline.py): NVML's bandwidth with the L2 size
from the CUDA driver, so a step that fits in L2 is not read as an HBM figure. Here apart from
test_job_reports, which needs onnxruntime-genai: this one runs on any GPU host."""

from __future__ import annotations

import pytest

from backend.generate.roofline import gpu_l2_cache, gpu_peak, roofline


def test_a_gpus_peak_carries_its_l2_size_from_the_cuda_driver() -> None:
    peak = gpu_peak()
    if peak is None:  # no NVML: the driver library is asked anyway, and says why it cannot
        size, why = gpu_l2_cache("00000000:00:00.0")
        assert size == 0 and why
        pytest.skip("no NVIDIA GPU here")
    assert peak.cache_level == "L2" and peak.cache_source.startswith("CUDA driver, device at PCI")
    assert 2**20 <= peak.cache_bytes <= 2**30, peak  # H100 50 MiB, H200 60 MiB, A100 40 MiB
    tiny = roofline(peak.cache_bytes / 4, 0.01, peak).to_dict()
    assert tiny["in_cache"] is True and tiny["note"].endswith(
        "L2: this is not a memory-bandwidth figure"
    )
