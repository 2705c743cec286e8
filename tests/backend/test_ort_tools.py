"""ONNX Runtime's tools without torch: a configuration child fixes shapes and pre-processes for
INT8 through onnxruntime.tools, whose package __init__ imports torch when it is installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import models

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import importlib.util, sys
from pathlib import Path
import onnx
from backend.engine.variants import build_variant
from backend.specs import Configuration, Precision

source, workdir = Path(sys.argv[1]), Path(sys.argv[2])
config = Configuration(precision=Precision.INT8_STATIC, batch_size=3)
variant = build_variant(source, config, workdir)
built = onnx.load(variant.path)
print(built.graph.input[0].type.tensor_type.shape.dim[0].dim_value,
      sum(n.op_type == "QuantizeLinear" for n in built.graph.node) > 0,
      not any("pre-processing failed" in note for note in variant.notes),
      "torch" in sys.modules, importlib.util.find_spec("torch") is not None)
"""


def test_a_static_int8_build_fixes_shapes_and_preprocesses_without_torch(tmp_path: Path) -> None:
    source = models.save(models.make_mlp(), tmp_path / "mlp.onnx")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(source), str(tmp_path / "built")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    batch, quantized, preprocessed, imported_torch, torch_installed = out
    assert torch_installed == "True"  # else onnxruntime.tools would not import it anyway
    # the tools still did their work: the batch fixed, ORT's pre-processing ran, then quantized
    assert (batch, quantized, preprocessed) == ("3", "True", "True")
    assert imported_torch == "False"
