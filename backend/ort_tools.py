"""ONNX Runtime's Python tools (`onnxruntime.tools`: shape fixing, symbolic shape inference)
without the torch import that package's `__init__` makes whenever torch is installed.

That `__init__` imports torch (about 1 s and 300 MB per process on the dev host) only to offer
`infer_input_info`, a PyTorch export helper Optiboard never calls. Every configuration child
fixes shapes or pre-processes for INT8 through these tools, so each child paid it. Registering
the package without running its `__init__` leaves every submodule importable as before.
"""

from __future__ import annotations

import importlib.util
import sys


def without_torch() -> None:
    """Make `onnxruntime.tools` importable without its torch import; call before importing any
    of its submodules (directly, or through onnxruntime.quantization's shape inference)."""
    if "onnxruntime.tools" in sys.modules:
        return
    import onnxruntime

    spec = importlib.util.find_spec("onnxruntime.tools")
    if spec is None:  # an ONNX Runtime build without its tools: the import after this says so
        return
    package = importlib.util.module_from_spec(spec)  # a package (its __path__), __init__ not run
    sys.modules["onnxruntime.tools"] = package
    onnxruntime.tools = package  # type: ignore[attr-defined]
