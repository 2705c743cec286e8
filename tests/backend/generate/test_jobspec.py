"""A queued generation job carries the runtime options a measurement here takes, each handed
only to its runtime; the flags a job cannot carry are refused with --submit, not dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend import cli
from backend.errors import UserError
from backend.generate.jobspec import GenerationJobSpec


def test_each_runtime_gets_its_own_options_and_they_survive_storage() -> None:
    """Until 2026-12-07 `generate ID --submit --torch-compile` queued a job without them: the
    job spec had no such fields and the worker measured torch uncompiled."""
    spec = GenerationJobSpec(
        runtimes=("ort-genai", "torch"), device="cuda", cuda_graph=True, engine="on",
        torch_compile=True, perplexity_window=16, perplexity_chunk=8,
    )  # fmt: skip
    ort, torch = spec.generation_spec("ort-genai"), spec.generation_spec("torch")
    assert (ort.cuda_graph, ort.engine, ort.torch_compile) == (True, "on", False)
    assert (torch.cuda_graph, torch.engine, torch.torch_compile) == (False, "auto", True)
    assert ort.perplexity_chunk == torch.perplexity_chunk == 8
    assert GenerationJobSpec.from_dict(spec.to_dict()) == spec


def test_a_job_stored_before_the_options_reads_as_it_ran() -> None:
    stored = GenerationJobSpec(perplexity_window=16).to_dict()
    for name in ("perplexity_chunk", "cuda_graph", "engine", "torch_compile"):
        del stored[name]
    spec = GenerationJobSpec.from_dict(stored).generation_spec("ort-genai")
    assert (spec.cuda_graph, spec.engine, spec.torch_compile, spec.perplexity_chunk) == (
        False, "auto", False, 16,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"torch_compile": True}, "--torch-compile is an option of the torch runtime"),
        ({"device": "cuda", "runtimes": ("torch",), "cuda_graph": True}, "add ort-genai"),
        ({"runtimes": ("ort-genai", "vllm")}, "Unknown generative runtime 'vllm'"),
    ],
)
def test_an_option_no_runtime_of_the_job_takes_is_refused(kwargs: dict, says: str) -> None:
    with pytest.raises(UserError, match=says):
        GenerationJobSpec(**kwargs)


@pytest.mark.parametrize("flag", ["--reference", "--torch-from", "--in-process", "--json"])
def test_flags_a_queued_job_cannot_carry_are_refused_with_submit(
    flag: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = [] if flag in ("--in-process", "--json") else ["/somewhere"]
    assert cli.main(["generate", "7", "--submit", flag, *value]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {flag} is for a measurement here, not a queued job (which runs the library "
        f"model's own folders, FP32 its reference); drop {flag} or --submit."
    )


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--variants", "int4"], "--variants names the weight-only variants a queued job builds"),
        (["--label", "x"], "--label names a queued job; add --submit or drop --label."),
    ],
)
def test_flags_only_a_queued_job_takes_are_refused_without_submit(
    flags: list[str], says: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run here measures the folder as it is: `--variants int4` measured FP32 only, in
    silence, until 2026-12-07."""
    assert cli.main(["generate", "7", *flags]) == 2
    assert capsys.readouterr().err.startswith(f"error: {says}")


@pytest.mark.parametrize("submit", [[], ["--submit"]], ids=["here", "queued"])
def test_a_folder_given_as_the_perplexity_text_is_called_a_folder(
    submit: list[str], data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "genai"  # what a GenAI folder is checked for before the text
    folder.mkdir()
    (folder / "genai_config.json").write_text("{}")
    model = "7" if submit else str(folder)
    assert cli.main(["generate", model, *submit, "--perplexity-text", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: The perplexity text {tmp_path} is a folder; give a text file."
    )
