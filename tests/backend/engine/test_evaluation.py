"""Accuracy on the user's own evaluation set, on a classifier whose labels are known by
construction: they are the argmax of its FP32 forward pass computed here with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from backend.engine.evaluation import EvaluationSet, batches, read_evaluation_npz
from backend.engine.inputs import input_specs_of
from backend.engine.run import ConfigurationTask, run_configuration
from backend.errors import UserError
from backend.results import ConfigurationResult, ResultStatus
from backend.specs import MEASURE_PRESETS, Configuration, Precision
from tests.evidence_models import make_bad_layer_mlp
from tests.models import save

SAMPLES = 48


def _numpy_labels(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The class each sample belongs to: argmax of the three dense layers, in float64."""
    w = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    h1 = np.maximum(x @ w["w1"] + w["b1"], 0)
    h2 = np.maximum(h1 @ w["w2"] + w["b2"], 0)
    return (h2 @ w["w3"] + w["b3"]).argmax(axis=1)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(model, evaluation .npz with labels, evaluation .npz without labels)."""
    folder = tmp_path_factory.mktemp("eval")
    model = make_bad_layer_mlp()
    x = np.random.default_rng(7).normal(0, 1, (SAMPLES, 32)).astype(np.float32)
    labelled, unlabelled = folder / "eval.npz", folder / "inputs-only.npz"
    np.savez(labelled, x=x, labels=_numpy_labels(model, x.astype(np.float64)))
    np.savez(unlabelled, x=x)
    return save(model, folder / "bad.onnx"), labelled, unlabelled


def _run(model: Path, npz: Path, precision: Precision, out: Path) -> ConfigurationResult:
    config = Configuration(precision=precision, batch_size=4)
    task = ConfigurationTask(
        str(model),
        config,
        MEASURE_PRESETS["quick"],
        str(out),
        evaluation_path=str(npz),
        evaluation_sha256="ab" * 32,
        evaluation_name=npz.name,
    )
    result = run_configuration(task)
    # the bad layer's INT8 is far off FP32 (cosine about 0.5): stored as wrong outputs, scored
    wanted = ResultStatus.OK if precision == Precision.FP32 else ResultStatus.WRONG_OUTPUTS
    assert result.status == wanted, result.error
    assert result.evaluation is not None
    return result


def test_labels_score_fp32_at_100_percent_and_the_badly_quantized_int8_lower(
    classifier: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    model, labelled, _ = classifier
    fp32 = _run(model, labelled, Precision.FP32, tmp_path)
    int8 = _run(model, labelled, Precision.INT8_STATIC, tmp_path)
    assert fp32.evaluation.labelled and fp32.evaluation.samples == SAMPLES
    assert fp32.evaluation.top1_accuracy == 1.0
    assert int8.evaluation.fp32_top1_accuracy == 1.0
    assert int8.evaluation.top1_accuracy < 0.9
    # labels are FP32's own classes here, so accuracy and agreement must be the same number
    assert int8.evaluation.top1_agreement == pytest.approx(int8.evaluation.top1_accuracy)
    note = next(n for n in int8.notes if "eval.npz" in n)
    assert f"{int8.evaluation.top1_accuracy:.1%}" in note and "FP32 100.0%" in note


def test_without_labels_the_set_gives_agreement_with_fp32_only(
    classifier: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    model, _, unlabelled = classifier
    int8 = _run(model, unlabelled, Precision.INT8_STATIC, tmp_path)
    assert not int8.evaluation.labelled and int8.evaluation.top1_accuracy is None
    assert int8.evaluation.top1_agreement is not None and int8.evaluation.top1_agreement < 0.9
    assert any("inputs-only.npz" in n and "no labels" in n for n in int8.notes)


def test_the_last_batch_is_padded_but_only_real_samples_are_scored() -> None:
    feeds = [{"x": np.full((1, 2), i, np.float32)} for i in range(5)]
    joined = batches(EvaluationSet(feeds), 4)
    assert [rows for _, rows in joined] == [4, 1]
    assert joined[1][0]["x"].shape == (4, 2)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (np.zeros(SAMPLES, np.float32), "one integer class index per sample"),
        (np.zeros(SAMPLES - 1, np.int64), "exactly one class index per sample"),
        (-np.ones(SAMPLES, np.int64), "negative class indices"),
    ],
)
def test_bad_labels_are_refused_with_one_sentence(
    classifier: tuple[Path, Path, Path], tmp_path: Path, labels: np.ndarray, message: str
) -> None:
    model, _, _ = classifier
    path = tmp_path / "bad.npz"
    np.savez(path, x=np.zeros((SAMPLES, 32), np.float32), labels=labels)
    with pytest.raises(UserError, match=message):
        read_evaluation_npz(path, input_specs_of(model), {})
