"""`optiboard serve llm` refusals and the decoupled model's config, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.cli import main
from backend.errors import UserError
from backend.serving.llm import LlmServing, llm_config
from backend.serving.llm_types import PromptShape, TokenSlo
from backend.serving.types import ServingProvider


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--concurrency", "1", "--rate", "2"], "Give --concurrency or --rate, not both"),
        (["--slo-ttft-ms", "100"], "An SLO needs both bounds"),
        (["--slo-ttft-ms", "0", "--slo-itl-ms", "5"], "An SLO needs positive bounds"),
        (["--slo-ttft-ms", "-1"], "An SLO needs positive bounds"),  # was: "needs both"
        (["--output-tokens", "0"], "at least 1 token each"),
        (["--new-tokens", "0"], "at least 1 token each"),  # generate's names read the same
        (["--prompt-lengths", "0"], "at least 1 token each"),
        (["--sequences", "0"], "at least one sequence"),
        ([], "has no genai_config.json"),
    ],
)
def test_serve_llm_refuses_bad_input_with_one_sentence_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], reason: str
) -> None:
    assert main(["serve", "llm", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err
    assert reason in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_serve_llm_takes_a_library_id_as_generate_does(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It took a folder only: `serve llm 1` said "1 has no genai_config.json" until 2026-12-07."""
    from backend.models.ingest import ingest_file

    model = ingest_file(mlp_path, "mlp.onnx")
    assert main(["serve", "llm", str(model.id)]) == 2
    assert "Model mlp is a single-pass ONNX model, not a generative one" in capsys.readouterr().err
    assert main(["serve", "llm", "99"]) == 2
    assert "There is no model 99" in capsys.readouterr().err


def test_the_llm_config_is_decoupled_unbatched_and_names_its_instances() -> None:
    config = llm_config(LlmServing(instances=3, sequences_per_instance=4))
    assert config.model_transaction_policy.decoupled
    assert config.max_batch_size == 0 and config.backend == "python"
    assert config.instance_group[0].count == 3
    assert config.instance_group[0].kind == config.instance_group[0].KIND_CPU
    assert config.parameters["sequences_per_instance"].string_value == "4"
    assert [i.name for i in config.input] == ["input_ids", "text_input", "max_tokens"]
    assert [o.name for o in config.output] == ["token_id", "text_output"]
    gpu = llm_config(LlmServing(provider=ServingProvider.CUDA)).instance_group[0]
    assert gpu.kind == gpu.KIND_GPU and list(gpu.gpus) == [0]


def test_an_slo_is_met_only_within_both_bounds() -> None:
    slo = TokenSlo(ttft_ms=100, itl_ms=10)
    assert slo.met(100, 10) and not slo.met(100.1, 1) and not slo.met(1, 10.1)
    with pytest.raises(UserError):
        PromptShape(prompt_tokens=0)
