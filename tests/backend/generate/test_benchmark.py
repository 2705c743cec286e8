"""The generation benchmark and its accuracy columns on the tiny Llama trained in the fixture
(tests/llm_models.py), converted by the product's model-builder path
(llm_models.built_genai_folder) to FP32 and INT4."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import settings
from backend import cli
from backend.energy import meter_for
from backend.errors import UserError
from backend.generate.benchmark import GenerationSpec
from backend.generate.footprint import footprint
from backend.generate.measuring import run_generation
from backend.generate.perplexity import perplexity, read_text
from backend.generate.reportframe import generation_frame
from backend.generate.results import FIGURES
from backend.runtimes import open_genai
from tests import llm_models, runtime_envs
from tests.backend.generate.peaks import alone_larger_after

pytest.importorskip("onnxruntime_genai")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def fp32(tiny_llama) -> Path:
    return llm_models.built_genai_folder(tiny_llama.spec, "fp32")


@pytest.fixture(scope="module")
def int4(tiny_llama) -> Path:
    return llm_models.built_genai_folder(tiny_llama.spec, "int4")


QUICK = {"preset": "quick", "perplexity_window": 128, "perplexity_chunk": 16}


def test_generation_makes_exact_token_counts_with_sensible_latencies(fp32, tiny_llama) -> None:
    spec = GenerationSpec(prompt_lengths=(96,), new_tokens=(12,), sequences=(1, 3), **QUICK)
    report = run_generation(fp32, spec, reference=fp32, in_process=True)
    shape = footprint(fp32)
    assert [r.status for r in report.results] == ["ok", "ok"]
    for r in report.results:
        assert np.asarray(r.tokens).shape == (r.sequences, 12)  # exactly the tokens asked
        assert 0 < r.ttft_p50_ms <= r.ttft_p99_ms
        assert 0 < r.itl_p50_ms <= r.itl_p99_ms
        assert r.ttft_p50_ms > r.itl_p50_ms  # a 96-token prefill, against one decode step
        assert r.e2e_p50_ms >= r.ttft_p50_ms
        assert r.output_tokens_per_s > 0 and r.decode_tokens_per_s > 0
        # KV cache from the config: 2 x layers x kv heads x head dim x tokens x sequences x 4
        kv = 2 * 2 * tiny_llama.spec.kv_heads * (128 // 4) * (96 + 12) * r.sequences * 4
        assert r.kv_cache_mb == pytest.approx(kv / 2**20)
        assert r.weights_mb == pytest.approx(shape.weight_bytes / 2**20)
        assert r.peak_rss_mb > r.weights_mb
        assert r.agreement == [12] * r.sequences  # FP32 against itself: no divergence
        assert r.roofline["achieved_bytes_s"] > 0 and r.roofline["peak"]["bytes_per_s"] > 0
        assert r.precision == "fp32" and r.facts["providers"] == ["cpu"]
        assert r.runs >= 2 and r.stop_reason
    frame = generation_frame(report)  # what the Compare page draws
    assert list(frame["sequences"]) == [1, 3] and list(frame["agreement_tokens"]) == [12, 12]
    assert (frame["bandwidth_gb_s"] > 0).all() and frame["perplexity"].isna().all()


def test_kv_cache_perplexity_equals_the_full_forward_pass(fp32, tiny_llama) -> None:
    import torch
    from transformers import LlamaForCausalLM

    with open_genai("ort-genai", fp32) as session:
        ids = session.encode(tiny_llama.eval_text)
        through_cache = perplexity(session, ids, window=128, chunk=16, max_tokens=512)
        one_pass = perplexity(session, ids, window=128, chunk=128, max_tokens=512)
    model = LlamaForCausalLM.from_pretrained(tiny_llama.folder).eval()
    losses = []
    with torch.no_grad():
        for start in range(0, 512, 128):
            window = torch.tensor([ids[start : start + 128]])
            losses.append(float(model(input_ids=window, labels=window).loss))
    torch_ppl = math.exp(sum(losses) / len(losses))  # equal windows: the mean of means
    assert through_cache.tokens == 512
    assert through_cache.perplexity == pytest.approx(one_pass.perplexity, rel=1e-3)
    assert through_cache.perplexity == pytest.approx(torch_ppl, rel=1e-3)
    assert through_cache.perplexity < 512 / 5  # the trained model knows its text


@pytest.fixture(scope="module")
def int4_rtn(fp32, tmp_path_factory) -> Path:
    """ONNX Runtime's MatMulNBits quantizer, RTN, 4 bits, block 32, symmetric (genmodels')."""
    from backend.generate.weightonly import WeightOnlyConfig, quantize_folder

    out = tmp_path_factory.mktemp("rtn") / "int4-rtn"
    return quantize_folder(fp32, out, WeightOnlyConfig(algorithm="rtn", bits=4)).folder


@pytest.mark.parametrize("variant", ["int4", "int4_rtn"])
def test_int4_perplexity_is_within_ten_percent_of_fp32(
    fp32, variant, tiny_llama, request, tmp_path: Path
):
    text = tmp_path / "held_out.txt"
    text.write_text(tiny_llama.eval_text)
    spec = GenerationSpec(prompt_lengths=(32,), new_tokens=(8,), **QUICK)
    full = run_generation(fp32, spec, text, in_process=True)
    folder = request.getfixturevalue(variant)
    quantized = run_generation(folder, spec, text, reference=fp32, in_process=True)
    fp32_ppl = full.perplexity["ort-genai"]["perplexity"]
    int4_ppl = quantized.perplexity["ort-genai"]["perplexity"]
    loss = int4_ppl / fp32_ppl - 1
    agreement = quantized.results[0].agreement
    print(f"{variant}: perplexity FP32 {fp32_ppl:.3f}, INT4 {int4_ppl:.3f}: loss {loss:+.2%}; ")
    print(f"greedy agreement with FP32: {agreement} of 8 tokens")
    assert quantized.results[0].precision.startswith("int4 (MatMulNBits")
    assert quantized.results[0].weights_mb < full.results[0].weights_mb
    assert int4_ppl != fp32_ppl  # the weights really changed
    assert abs(loss) <= 0.10
    assert len(agreement) == 1


def test_the_cli_measures_in_the_sandboxed_child_and_prints_json(fp32, tmp_path, capsys) -> None:
    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 40)
    argv = ["generate", str(fp32), "--prompt-lengths", "16", "--new-tokens", "4"]
    argv += ["--runtimes", "ort-genai,openvino-genai", "--perplexity-text", str(text)]
    argv += ["--perplexity-window", "64", "--preset", "quick", "--json"]
    assert cli.main(argv) == 0
    said = capsys.readouterr()
    report = json.loads(said.out)  # the JSON alone on stdout; what runs now, on stderr
    timeout_s = settings.CONFIG_TIMEOUT_S.get()
    assert said.err.splitlines() == [
        f"measuring ort-genai: 1 point in a sandboxed child (at most {timeout_s:.0f} s)",
        f"measuring openvino-genai: 1 point in a sandboxed child (at most {timeout_s:.0f} s)",
    ]
    by_runtime = {r["runtime"]: r for r in report["results"]}
    assert by_runtime["ort-genai"]["status"] == "ok"
    assert len(by_runtime["ort-genai"]["tokens"][0]) == 4
    spent = by_runtime["ort-genai"]["energy"]  # J/token from the sandboxed child, or why not
    assert spent["per"] == "token" and spent["source"] == meter_for("cpu").source
    # an ONNX GenAI folder is not OpenVINO GenAI's format: said, not run
    assert by_runtime["openvino-genai"]["status"] == "unavailable"
    assert "openvino_model.xml" in by_runtime["openvino-genai"]["error"]
    assert report["perplexity"]["ort-genai"]["perplexity"] > 1
    assert "measured in the sandboxed, limited child (one per runtime)" in report["notes"]


def test_ort_genai_points_state_the_precision_their_graph_computes_in(int4, capsys) -> None:
    """ONNX Runtime GenAI reports no precision itself: the builder's INT4 decoder keeps fp32
    logits and KV cache and asks MatMulNBits for accuracy level 4, which on this CPU quantizes
    the activations to int8; the CLI's what-ran line says all three."""
    argv = ["generate", str(int4), "--prompt-lengths", "16", "--new-tokens", "2"]
    assert cli.main([*argv, "--preset", "quick"]) == 0
    said = capsys.readouterr().out
    assert (
        "computes in fp32, KV cache in fp32 (the graph's logits and past key/value types), "
        "MatMulNBits at accuracy level 4: int8 activations"
    ) in said, said


def test_a_library_model_is_benchmarked_by_its_id(data_dir, tmp_path, capsys) -> None:
    upload = llm_models.genai_zip(tmp_path, precision="int4")
    assert cli.main(["add", str(upload)]) == 0
    model_id = capsys.readouterr().out.split()[2].rstrip(":")  # "added model N: ..."
    argv = ["generate", model_id, "--prompt-lengths", "8", "--new-tokens", "3", "--json"]
    assert cli.main([*argv, "--preset", "quick"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["results"][0]["status"] == "ok"
    assert report["results"][0]["precision"].startswith("int4 (MatMulNBits")
    assert f"model-{model_id}-" in report["folder"]


def test_a_text_over_the_cap_is_refused_with_one_sentence(fp32, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPTIBOARD_PERPLEXITY_TEXT_MB", "1")
    text = tmp_path / "big.txt"
    text.write_text("word " * 300_000)  # 1.4 MB
    assert cli.main(["generate", str(fp32), "--perplexity-text", str(text)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: The perplexity text big.txt is 1.4 MB, over the 1 MB cap")
    assert error.count("\n") == 0
    with pytest.raises(UserError, match="over the 1 MB cap"):
        read_text(text)


def test_a_generation_past_the_context_is_refused_with_one_sentence(fp32, capsys) -> None:
    argv = ["generate", str(fp32), "--prompt-lengths", "250", "--new-tokens", "10", "--in-process"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "error: A prompt plus its new tokens reaches 260 tokens, beyond the model's context of "
        "256; give shorter --prompt-lengths or --new-tokens."
    )


def test_an_unknown_runtime_is_refused_before_anything_runs(fp32, data_dir, capsys) -> None:
    """Until 2026-12-07 a typo measured the host's bandwidth and started a child per runtime
    before 'foo unavailable' came back as a result."""
    argv = ["generate", str(fp32), "--runtimes", "ort-genai,foo", "--new-tokens", "2"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "error: Unknown generative runtime 'foo'; choose from ort-genai, openvino-genai, torch."
    )
    assert not any(data_dir.rglob("*.json"))  # no bandwidth measured, nothing kept


def test_a_missing_or_wrong_folder_names_the_folders_that_flag_takes(
    fp32, tmp_path, capsys
) -> None:
    """Each said 'give a GenAI model folder' until 2026-12-07, a Hugging Face folder for torch
    and an OpenVINO folder included."""
    missing = tmp_path / "missing"
    openvino = [str(fp32), "--runtimes", "openvino-genai", "--openvino-folder", str(missing)]
    cases = [
        ([str(missing)], "The model folder", "or a Hugging Face folder (config.json, "),
        ([str(fp32), "--reference", str(tmp_path)], "has no genai_config.json", "FP32 folder or a"),
        (openvino, "The OpenVINO folder", "openvino_model.xml"),
    ]
    for args, start, said in cases:
        assert cli.main(["generate", *args, "--in-process"]) == 2
        err = capsys.readouterr().err.strip()
        assert start in err and said in err, err
        assert "give a GenAI model folder" not in err


def test_a_runtime_or_point_given_twice_is_measured_once() -> None:
    spec = GenerationSpec(runtimes=("ort-genai", "torch", "ort-genai"), new_tokens=(4, 2, 4))
    assert spec.runtimes == ("ort-genai", "torch") and spec.new_tokens == (4, 2)
    assert len(spec.points()) == 2


def test_without_bubblewrap_a_generation_benchmark_is_refused_in_one_sentence(
    fp32, tmp_path, monkeypatch, capsys
) -> None:
    missing = tmp_path / "no-bwrap"
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(missing))
    assert cli.main(["generate", str(fp32), "--prompt-lengths", "8", "--new-tokens", "2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: A generation benchmark runs the model only inside the sandbox, and the "
        f"bubblewrap sandbox ({str(missing)!r}) is not installed; install the Debian package "
        "bubblewrap or set OPTIBOARD_BWRAP to its path."
    )


def test_in_process_is_refused_for_a_library_model_in_one_sentence(capsys) -> None:
    """A library model is an upload: it never runs in the terminal's own process."""
    assert cli.main(["generate", "7", "--in-process"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --in-process runs the model in this terminal's own process, outside the "
        "sandbox, so it takes a folder of your own, not library model 7 (an upload); drop "
        "--in-process to measure it in the sandboxed child."
    )


def test_cuda_without_onnxruntime_genai_cuda_says_why(fp32) -> None:
    import onnxruntime_genai as og

    if og.is_cuda_available():
        pytest.skip("this host's onnxruntime-genai has CUDA: the CUDA path runs instead")
    spec = GenerationSpec(device="cuda", prompt_lengths=(8,), new_tokens=(2,), preset="quick")
    report = run_generation(fp32, spec, in_process=True)
    assert [r.status for r in report.results] == ["unavailable"]
    assert report.results[0].error == (
        "ort-genai cannot use CUDA here: this onnxruntime-genai has no CUDA support "
        "(install onnxruntime-genai-cuda on a GPU host)."
    )
    assert report.peak_bandwidth["source"]  # NVML's reading, the datasheet's, or why neither


def test_a_point_the_runtime_cannot_run_fails_alone(fp32) -> None:
    """GenAI's Generator takes at most 32 sequences: with the Engine off (--engine off) the
    33-sequence point fails with the runtime's reason, in the reference run too, and the
    1-sequence point keeps its agreement (by default the Engine runs it: test_engine.py)."""
    spec = GenerationSpec(
        prompt_lengths=(8,), new_tokens=(3,), sequences=(1, 33), engine="off", **QUICK
    )
    report = run_generation(fp32, spec, reference=fp32, in_process=True)
    one, many = report.results
    assert (one.status, one.agreement) == ("ok", [3])
    assert many.status == "failed" and "must be in [1, 32]" in many.error
    assert many.agreement == []
    # the CLI report's frame gives the failed point no figures (it read 0.0 GB/s, a 0.0 share
    # of peak, 0.0 ms and tokens/s, as if measured), the measured one all of them
    frame = generation_frame(report).set_index("sequences")
    figures = [c for c in frame.columns if c.endswith(("_ms", "_s", "_mb", "_fraction"))]
    assert len(figures) == 12, figures  # the ten figures, GB/s and the share of peak
    assert frame.loc[33, figures].isna().all()
    measured = frame.loc[1, figures].drop("bandwidth_fraction")  # none in cache (the tiny Llama)
    assert measured.notna().all() and (measured > 0).all()
    assert frame.loc[33, "error"] == many.error
    # and `generate --json` (the report's dict) says null for each, where it said 0.0
    said = json.loads(json.dumps(report.to_dict()))["results"]
    assert [said[1][f] for f in FIGURES] == [None] * len(FIGURES), said[1]
    assert all(said[0][f] is not None for f in FIGURES), said[0]


def test_generation_under_a_runtime_environment_records_the_onnxruntime_that_ran(fp32) -> None:
    runtime_envs.set_up("ort-1.31")
    spec = GenerationSpec(prompt_lengths=(16,), new_tokens=(4,), **QUICK)
    with pytest.raises(UserError, match="There is no runtime environment 'ort-0.1'"):
        run_generation(fp32, spec, runtime_env="ort-0.1")
    with pytest.raises(UserError, match="not under 'ort-1.31'"):
        run_generation(fp32, spec, in_process=True, runtime_env="ort-1.31")
    [result] = run_generation(fp32, spec, runtime_env="ort-1.31").results
    assert result.status == "ok", result.error
    assert result.facts["runtime_env"] == "ort-1.31"
    assert result.facts["versions"]["onnxruntime"] == "1.31.1"  # GenAI on the pinned runtime


@pytest.mark.parametrize("in_process", [True, False], ids=["here", "sandboxed children"])
def test_a_reference_that_cannot_run_here_leaves_the_points_measured_and_says_why(
    fp32, tiny_llama, in_process: bool
) -> None:
    """The GenAI FP32 reference on CUDA on a host whose onnxruntime-genai has no CUDA (this one;
    the lent H200 too): until 2026-12-07 its error failed the whole run, every runtime's points
    with it. Now the points run (torch on CUDA fails here on its own account) and the report
    says agreement was not measured, and why."""
    spec = GenerationSpec(
        runtimes=("torch",), device="cuda", prompt_lengths=(8,), new_tokens=(2,), preset="quick"
    )
    report = run_generation(
        tiny_llama.folder, spec, None, fp32, torch_folder=tiny_llama.folder, in_process=in_process
    )
    (note,) = [n for n in report.notes if n.startswith("greedy agreement was not measured")]
    assert "the reference could not run here (ort-genai cannot use CUDA here" in note
    assert [r.runtime for r in report.results] == ["torch"]
    # a Hugging Face reference (torch in fp32) that cannot run either: the note that names it as
    # what agreement was measured against is not printed beside "was not measured" (it was)
    report = run_generation(
        tiny_llama.folder,
        spec,
        None,
        tiny_llama.folder,
        torch_folder=tiny_llama.folder,
        in_process=in_process,
    )
    assert any(n.startswith("greedy agreement was not measured") for n in report.notes)
    assert not [n for n in report.notes if "against the Hugging Face folder" in n], report.notes


def test_a_point_out_of_memory_says_what_it_asked_for_and_what_it_had() -> None:
    """`generate --runtimes torch --sequences 20000` on the tiny Llama failed with torch's
    'DefaultCPUAllocator: can't allocate memory: you tried to allocate 1310720000 bytes' alone."""
    import resource

    import torch

    from backend.generate.benchmark import GenerationResult, out_of_memory_sentence
    from backend.runtimes.base import is_out_of_memory

    with pytest.raises(RuntimeError) as caught:
        torch.empty(2**46, dtype=torch.uint8)  # 64 TiB: refused by the allocator at once
    assert is_out_of_memory(caught.value), caught.value
    result = GenerationResult("torch", 128, 2, 20_000)
    result.kv_cache_mb, result.weights_mb = 5078.1, 1.8
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    had = (
        "the host's memory"
        if soft == resource.RLIM_INFINITY
        else f"the measuring child may use {soft // 2**20:,} MB (OPTIBOARD_CHILD_MEMORY_MB)"
    )
    assert out_of_memory_sentence(result, "cpu") == (
        "Out of memory at 20,000 sequences of 128 + 2 tokens: their KV cache alone needs 5,078 "
        f"MB beside 2 MB of weights, with the prefill's activations on top, and {had}; measure "
        "fewer sequences or shorter prompts."
    )
    assert "the cuda device's memory" in out_of_memory_sentence(result, "cuda")


def test_a_point_after_a_larger_one_does_not_hold_its_memory(fp32) -> None:
    """ONNX Runtime's CPU arena keeps the largest point's buffers for the og.Model's life: in one
    model, 1 sequence of 200 tokens peaked at 221.1 MB after a point of 32 sequences, 93.7 MB as
    the only point. Each later point now gets a fresh model (and the heap trimmed), so its peak
    is its own (94.4 MB after the 32): far nearer the point alone than the larger point before."""

    alone, larger, after = alone_larger_after(fp32, "ort-genai", 32)
    assert after < alone + (larger - alone) / 4, (alone, larger, after)
