"""GenAI folders made from the fixture's trained models with onnxruntime-genai's builder.

Until the genmodels branch's converter is the fixture's, tests and bench/int4_vs_fp32_decode.py
build the folder here with the same builder the product uses; only the conversion lives here,
never the model (tests/llm_models.py trains it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def build_genai(hf_folder: Path, target: Path, precision: str) -> Path:
    """`python -m onnxruntime_genai.models.builder` on an HF folder into target (cached)."""
    if (target / "genai_config.json").is_file():
        return target
    building = Path(tempfile.mkdtemp(prefix="genai-", dir=target.parent))
    cache = Path(tempfile.mkdtemp(prefix="genai-cache-"))
    command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_folder)]
    command += ["-o", str(building), "-p", precision, "-e", "cpu", "-c", str(cache)]
    try:
        subprocess.run(command, check=True, capture_output=True, env={**os.environ, "USE_TF": "0"})
        os.replace(building, target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    return target


def genai_folder(trained, precision: str) -> Path:
    """The trained model's GenAI folder in `precision` (fp32, fp16, int4), beside its cache."""
    return build_genai(
        trained.folder,
        trained.folder.parent / f"{trained.folder.name}-genai-{precision}",
        precision,
    )
