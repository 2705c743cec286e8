"""Real evidence on real small graphs for the Graph page's overlays and diffs: a ResNet-style
CNN and a BERT-style encoder block, each with an INT8 static (QDQ) variant, a real ONNX Runtime
profile of that variant and the real layer-loss ranking against FP32."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from backend.engine import layerloss
from backend.engine.layerloss import NodeLoss
from backend.engine.profile import Profile, profile_model
from backend.engine.variants import build_variant
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration
from tests.models import make_cnn, make_transformer, save

HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"  # a node name no page may render


@dataclass(frozen=True)
class Evidence:
    source: Path
    int8: Path
    profile: Profile  # of the INT8 variant, mapped to the upload's nodes
    losses: list[NodeLoss]


def _feeds(kind: str, count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    if kind == "cnn":
        return [{"input": rng.random((1, 3, 32, 32), dtype=np.float32)} for _ in range(count)]
    return [{"tokens": rng.integers(0, 50, (1, 16)).astype(np.int64)} for _ in range(count)]


def evidence(kind: str, folder: Path, hostile: bool = False) -> Evidence:
    """`kind` is "cnn" or "bert"; with `hostile` its first node is named HOSTILE."""
    model = make_cnn(channels=8, blocks=2, image=32) if kind == "cnn" else make_transformer()
    if hostile:
        model.graph.node[0].name = HOSTILE
    folder.mkdir(parents=True, exist_ok=True)
    source = save(model, folder / f"{kind}.onnx")
    dims = () if kind == "cnn" else (("seq", 16),)
    config = Configuration(precision="int8_static", symbolic_dims=dims)
    variant = build_variant(source, config, folder / "int8").path
    feeds = _feeds(kind, 4)
    profile = profile_model(
        variant,
        onnx.load(str(source)),
        SessionOptions.plain(),
        feeds[0],
    )
    losses = layerloss.rank_nodes(source, variant, feeds)
    return Evidence(source, Path(variant), profile, losses)
