"""CUDA graphs for ONNX Runtime GenAI: asked for where they cannot run, one sentence each.

(On the H200 the option is measured for real: bench/results/h200_llm_product.txt.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.errors import UnavailableError, UserError
from backend.generate.benchmark import GenerationSpec
from backend.runtimes import open_genai


def test_cuda_graphs_on_the_cpu_are_refused_before_anything_runs() -> None:
    with pytest.raises(UserError, match=r"--cuda-graph needs --device cuda"):
        GenerationSpec(cuda_graph=True)
    assert GenerationSpec(device="cuda", cuda_graph=True).to_dict()["cuda_graph"] is True


def test_openvino_genai_says_it_has_no_cuda_graphs(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match=r"openvino-genai has none"):
        open_genai("openvino-genai", tmp_path, "cuda", cuda_graph=True)
