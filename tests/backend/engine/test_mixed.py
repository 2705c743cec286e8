"""The mixed-precision search on a model with one layer that quantizes badly by construction."""

from __future__ import annotations

import getpass
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from backend import cli
from backend.engine import mixed, mixedcli
from backend.engine.variants import OptimizationError, build_variant
from backend.errors import UserError
from backend.graphview.structure import structure_of
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.reporting.frames import series_name
from backend.specs import Configuration, MeasureSettings, Precision, SweepSpec
from tests import models as model_factory
from tests.evidence_models import BAD_LAYER, make_bad_layer_mlp

QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.02, max_seconds=2, accuracy_samples=4
)


def test_search_keeps_the_bad_layer_in_fp32_and_meets_the_bound(tmp_path: Path) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    bound = mixed.AccuracyBound.parse("cosine=0.99")
    found = mixed.search(source, bound, tmp_path / "work", QUICK)
    first = found.steps[0]
    assert first.fp32_nodes == () and not first.meets  # plain INT8 misses the bound
    second = found.steps[1]
    assert [n.split("/")[0] for n in second.fp32_nodes] == [BAD_LAYER]  # the first node it keeps
    assert second.meets  # and keeping that one alone restores accuracy
    best = found.best
    assert best is not None and best.accuracy.cosine_similarity >= 0.99
    assert any(name.split("/")[0] == BAD_LAYER for name in best.fp32_nodes)
    assert all(step.p50_ms > 0 for step in found.steps)
    later = found.steps[found.steps.index(best) + 1 :]
    assert not any(s.meets and s.p50_ms < best.p50_ms * (1 - mixed.MIN_GAIN) for s in later)
    assert len(found.lines()) == len(found.steps) + 2  # FP32, the steps, the timing verdict


def test_plain_fp32_is_a_candidate_timed_interleaved_with_the_steps_and_the_verdict_says_so(
    tmp_path: Path,
) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    found = mixed.search(source, mixed.AccuracyBound.parse("cosine=0.99"), tmp_path / "w", QUICK)
    timing = found.timing
    assert timing is not None and mixed.FP32 in timing.timed
    assert set(timing.timed) == {mixed.FP32} | {found.key(s) for s in found.steps}
    assert found.fp32_p50_ms == timing.timed[mixed.FP32].p50_ms
    for step in found.steps:  # every p50 shown comes from the interleaved loop
        assert step.p50_ms == timing.timed[found.key(step)].p50_ms
    rounds = {len(t.window_p50_ms) for t in timing.timed.values()}
    assert rounds == {timing.rounds}  # one window of each candidate per round
    verdict_line = found.lines()[-1]
    assert verdict_line.startswith("timed interleaved: ")
    stable = f"; stable: the last {QUICK.stable_windows} window medians of each agree"
    assert (stable in verdict_line) == timing.stable
    best = found.best
    assert best is not None
    speed, noise = found.fp32_p50_ms / best.p50_ms, found.noise(best)
    assert noise >= max(mixed.MIN_GAIN, timing.noise(mixed.FP32, found.key(best)))
    verdict = found.verdict()
    if speed > 1 + noise:
        assert verdict.startswith(f"best: {best.name}, ") and "faster than FP32" in verdict
    elif speed < 1 - noise:
        assert verdict.startswith("best: FP32, ") and f"ran at {speed:.2f}x FP32's speed" in verdict
    else:
        assert verdict.startswith("no clear winner: ") and "within this run's noise" in verdict
    assert "in FP32, p50" not in verdict  # the old 'best: plain INT8 in FP32' wording


def test_mixed_from_the_cli_takes_dim_for_a_transformer(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder = model_factory.make_transformer(d_model=16, heads=2, vocab=30)
    model = ingest_file(model_factory.save(encoder, tmp_path / "enc.onnx"), "enc.onnx")
    assert cli.main(["mixed", str(model.id), "--quick"]) == 2
    assert "symbolic dimension 'seq'" in capsys.readouterr().err  # refused before any step
    assert cli.main(["mixed", str(model.id), "--quick", "--dim", "sequence=8"]) == 2
    assert "no symbolic dimension 'sequence'" in capsys.readouterr().err
    code = cli.main(["mixed", str(model.id), "--quick", "--dim", "seq=8", "--bound", "cosine=0.9"])
    out = capsys.readouterr().out
    assert code in (0, 1) and "step 0: 0 node(s) in FP32" in out
    assert "timed interleaved: " in out
    assert any(line.startswith(("best: ", "no clear winner: ")) for line in out.splitlines())


@pytest.mark.parametrize("text", ["cosine", "cosine=2", "f1=0.9", "top1=abc"])
def test_a_malformed_bound_is_one_clear_error(text: str) -> None:
    with pytest.raises(UserError):
        mixed.AccuracyBound.parse(text)


def test_unknown_fp32_node_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    workdir = tmp_path / "work"
    config = Configuration(precision="int8_static", fp32_nodes=("no_such_node",))
    with pytest.raises(OptimizationError, match="no_such_node"):
        build_variant(source, config, workdir)
    assert list(workdir.iterdir()) == []


def test_fp32_nodes_only_apply_to_static_int8() -> None:
    with pytest.raises(UserError):
        Configuration(precision="fp32", fp32_nodes=("dense1",))
    mixed_config = Configuration(precision="int8_static", fp32_nodes=("b", "a", "a"))
    assert mixed_config.fp32_nodes == ("a", "b") and "fp32:a,b" in mixed_config.key
    assert Configuration.from_dict(mixed_config.to_dict()) == mixed_config


def test_mixed_command_queues_the_best_mix_which_joins_the_results_as_its_own_series(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    model = ingest_file(source, "bad.onnx")
    argv = ["mixed", str(model.id), "--bound", "cosine=0.99", "--quick", "--submit"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "meets the bound" in printed and "queued job" in printed
    job = jobs.list_jobs()[0]
    spec = jobs.spec_of(job)
    assert any(name.split("/")[0] == BAD_LAYER for name in spec.fp32_nodes)
    configs = spec.configurations()
    assert [c.precision.value for c in configs] == ["fp32", "int8_static", "int8_static"]
    assert configs[2].fp32_nodes == spec.fp32_nodes and configs[2].profile
    names = {series_name(job.id, "bad", c) for c in configs}
    assert len(names) == 3  # plain INT8 and the mix are two different series
    from backend.auth.audit import recent

    who = f"cli:{getpass.getuser()}"
    rows = [(e.actor, e.action, e.target, e.outcome, e.detail) for e in recent()]
    assert rows[0] == (who, "submit", f"model {model.id}", "ok", {"via": "mixed --submit"})


def test_a_best_step_of_no_fp32_node_is_queued_as_plain_int8_and_said(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A loose bound that plain INT8 meets: --submit queued nothing and said nothing until
    2026-12-07."""
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    model = ingest_file(source, "bad.onnx")
    argv = ["mixed", str(model.id), "--bound", "cosine=0.1", "--quick", "--submit"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    job = jobs.list_jobs()[0]
    assert f"queued job {job.id} (the best step keeps no node in FP32: plain INT8" in printed
    spec = jobs.spec_of(job)
    assert spec.fp32_nodes == () and spec.profile
    assert [c.precision.value for c in spec.configurations()] == ["fp32", "int8_static"]


def test_the_cli_search_runs_the_upload_only_in_the_sandbox_and_is_refused_without_one(
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It built, opened and timed the upload in the terminal's own process until 2026-12-06."""
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    model = ingest_file(source, "bad.onnx")
    missing = tmp_path / "no-bwrap"
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(missing))
    assert cli.main(["mixed", str(model.id), "--quick", "--submit"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        "error: The mixed-precision search runs the uploaded model only inside the sandbox, and "
        f"the bubblewrap sandbox ({str(missing)!r}) is not installed; install the Debian package "
        "bubblewrap or set OPTIBOARD_BWRAP to its path."
    )
    assert captured.out == "" and jobs.list_jobs() == []


def test_a_search_childs_answer_is_believed_only_when_it_reads() -> None:
    """The uploaded model ran in that child: its answer is data to check, nothing more."""
    good = {"lines": ["step 1"], "verdict": "meets the bound", "best": ["MatMul_0"]}
    assert mixedcli.SearchReport.from_child(good).best == ("MatMul_0",)
    assert mixedcli.SearchReport.from_child({**good, "best": None}).best is None
    wrong = [None, ["step 1"], {**good, "lines": "step 1"}, {**good, "best": [1]}]
    for answer in [*wrong, {**good, "verdict": None}]:
        with pytest.raises(UserError, match="answered what does not read"):
            mixedcli.SearchReport.from_child(answer)


def test_the_engine_alone_refuses_submit_before_searching_and_queues_nothing(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    model = ingest_file(source, "bad.onnx")
    assert mixedcli.main([str(model.id), "--quick", "--submit"]) == 2
    captured = capsys.readouterr()
    assert "python -m backend.cli mixed" in captured.err and captured.out == ""  # no step ran
    assert jobs.list_jobs() == []


def test_an_unnamed_node_is_kept_in_fp32_by_the_name_the_graph_page_gives_it(
    tmp_path: Path,
) -> None:
    model = _identity_then_convs()  # unnamed: the Graph page calls them OP_INDEX
    source = model_factory.save(model, tmp_path / "cnn.onnx")
    convs = [n.key for n in structure_of(model).nodes if n.op_type == "Conv"]
    kept, quantized = convs[-1], convs[0]
    config = Configuration(precision="int8_static", fp32_nodes=(kept,))
    variant = build_variant(source, config, tmp_path / "work")
    graph = onnx.load(str(variant.path)).graph
    made_by = {out: node.op_type for node in graph.node for out in node.output}
    by_name = {node.name: node for node in graph.node}
    # the picked Conv reads its float weight; the other Conv reads a dequantized int8 one
    assert made_by.get(by_name[kept].input[1]) != "DequantizeLinear"
    assert made_by.get(by_name[quantized].input[1]) == "DequantizeLinear"
    assert f"kept 1 node(s) in FP32: {kept}" in variant.steps


def test_a_node_not_in_the_graph_is_refused_at_submit_and_nothing_is_queued(
    data_dir: Path, tmp_path: Path
) -> None:
    model = model_factory.make_cnn()
    stored = ingest_file(model_factory.save(model, tmp_path / "cnn.onnx"), "cnn.onnx")
    spec = SweepSpec(precisions=(Precision.INT8_STATIC,), fp32_nodes=("bogus_node",))
    with pytest.raises(UserError, match=r"Node\(s\) 'bogus_node' to keep in FP32 are not in cnn's"):
        jobs.submit_sweep(stored.id, spec)
    assert jobs.list_jobs() == []
    conv = next(n.key for n in structure_of(model).nodes if n.op_type == "Conv")
    for name in (conv, f"{conv}/ConvAddFusion"):  # the Graph page's name, or a fusion of it
        jobs.submit_sweep(stored.id, replace(spec, fp32_nodes=(name,)))
    assert len(jobs.list_jobs()) == 2


def _identity_then_convs() -> onnx.ModelProto:
    """Identity -> Conv -> Relu -> Conv, every node unnamed. ORT's pre-processing drops the
    Identity, so the Convs' places (hence OP_INDEX names given after it) move by one."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, c, 3, 3)).astype(np.float32), f"w{i}")
        for i, c in enumerate((3, 4))
    ]
    nodes = [
        helper.make_node("Identity", ["x"], ["x1"]),
        helper.make_node("Conv", ["x1", "w0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "identity_convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_node_inside_an_if_body_is_refused_for_what_it_is(data_dir: Path, tmp_path: Path) -> None:
    """Compatibility and profiles name an If body's nodes (Sigmoid_1 in the else branch); keeping
    one in FP32 is refused because the quantizer leaves bodies alone, not as "not in the graph"."""
    model = model_factory.make_unnamed_if()
    stored = ingest_file(model_factory.save(model, tmp_path / "unnamed_if.onnx"), "unnamed_if")
    spec = SweepSpec(precisions=(Precision.INT8_STATIC,), fp32_nodes=("Sigmoid_1",))
    with pytest.raises(UserError) as refused:
        jobs.submit_sweep(stored.id, spec)
    said = str(refused.value)
    assert "'Sigmoid_1' (in If_2's else_branch)" in said and "If/Loop/Scan body" in said
    assert "not in" not in said
    assert jobs.list_jobs() == []
    jobs.submit_sweep(stored.id, replace(spec, fp32_nodes=("Relu_3",)))  # a main-graph node
    assert len(jobs.list_jobs()) == 1


def test_static_int8_leaves_an_if_bodys_nodes_in_float(tmp_path: Path) -> None:
    """What the refusal above says: ORT's QDQ quantizer quantizes the main graph's MatMul and
    leaves the then_branch's MatMul reading its float weight, with no Q/DQ inside either body."""
    source = model_factory.save(model_factory.make_unnamed_if(), tmp_path / "unnamed_if.onnx")
    variant = build_variant(source, Configuration(precision="int8_static"), tmp_path / "work")
    graph = onnx.load(str(variant.path)).graph
    made_by = {out: node.op_type for node in graph.node for out in node.output}
    main_matmul = next(n for n in graph.node if n.name.split("/")[0] == "MatMul_4")  # now a Gemm
    assert made_by.get(main_matmul.input[1]) == "DequantizeLinear"  # its weight is int8
    branches = {a.name: a.g for n in graph.node if n.op_type == "If" for a in n.attribute}
    assert [n.op_type for n in branches["then_branch"].node] == ["MatMul"]
    assert list(branches["then_branch"].node[0].input) == ["x", "wt"]
    assert "wt" in {i.name for i in graph.initializer}  # its float weight, still there
    assert [n.op_type for n in branches["else_branch"].node] == ["Neg", "Sigmoid"]
