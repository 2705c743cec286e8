"""ONNX Runtime execution providers shipped as plugin libraries (onnxruntime-ep-*).

A plugin provider runs only on the OrtEpDevices its factory accepts from ONNX Runtime's device
discovery, so "installed" is not "usable": the probe registers the library and asks.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache
from typing import Any

from backend.runtimes.base import ProviderStatus

# short name -> (Python package, ORT's provider name, pip package)
PLUGIN_PROVIDERS = {
    "openvino": ("onnxruntime_ep_openvino", "OpenVINOExecutionProvider", "onnxruntime-ep-openvino"),
    # TensorRT-RTX: RTX and Blackwell GPUs (compute capability 8.0, 8.6, 8.9, 12.x); on Hopper
    # (9.0) its device discovery accepts no GPU, and the probe says so in ORT's own words
    "tensorrt_rtx": (
        "onnxruntime_ep_nv_tensorrt_rtx",
        "NvTensorRTRTXExecutionProvider",
        "onnxruntime-ep-nv-tensorrt-rtx",
    ),
}


def plugin_devices(ort: Any, native: str) -> list[Any]:
    return [d for d in ort.get_ep_devices() if d.ep_name == native]


def _discovered(ort: Any) -> str:
    """The hardware ONNX Runtime's device discovery found, e.g. 'CPU (AMD, vendor id 0x1022)'."""
    seen = {
        f"{d.device.type.name} ({d.device.vendor}, vendor id 0x{d.device.vendor_id:04x})"
        for d in ort.get_ep_devices()
    }
    return ", ".join(sorted(seen)) or "no device"


@lru_cache(maxsize=4)
def probe_plugin(short: str) -> ProviderStatus:
    """Register a plugin EP library and ask ONNX Runtime's device discovery what it offers.

    Plugin providers run only on the OrtEpDevices their factory accepts; a plugin that loads but
    accepts none of the discovered devices cannot run anything here, and says so.
    """
    import onnxruntime as ort

    module, native, pip_name = PLUGIN_PROVIDERS[short]
    if importlib.util.find_spec(module) is None:
        reason = f"the {pip_name} plugin package is not installed (pip install {pip_name})"
        return ProviderStatus(short, False, reason, native)
    from backend.runtimes.ort_cuda import quiet_native_output, summarise_banner

    with quiet_native_output() as logged:  # the plugin's own log lines, not ours to print
        try:
            if not plugin_devices(ort, native):
                library = importlib.import_module(module).get_library_path()
                ort.register_execution_provider_library(native, library)
            error = None
        except Exception as exc:  # the loader's own words name the missing library or symbol
            error = exc
    if error is not None:
        reason = summarise_banner(str(error).splitlines()) or type(error).__name__
        return ProviderStatus(
            short, False, f"ONNX Runtime could not load {pip_name}: {reason}", native
        )
    devices = plugin_devices(ort, native)
    if not devices:
        said = summarise_banner(logged)
        return ProviderStatus(
            short,
            False,
            f"{pip_name} loaded, but ONNX Runtime's device discovery found {_discovered(ort)} "
            f"and the plugin accepted none of them, so {native} has no device here"
            + (f" ({said})" if said else ""),
            native,
        )
    names = ", ".join(f"{d.device.type.name} ({d.device.vendor})" for d in devices)
    return ProviderStatus(short, True, names, native)
