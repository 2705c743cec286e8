"""Optimize page: defaults, the configuration count, submission, unavailable providers."""

from __future__ import annotations

from pathlib import Path

from backend.queue import jobs
from backend.runtimes import get_runtime
from backend.specs import OpenVinoOptions, OrtOptions, Precision
from pages.components.formatting import plain
from tests.pages.seed import add_model, finished_sweep, open_page, texts


def test_empty_optimize_page_asks_for_a_model(data_dir: Path) -> None:
    at = open_page("optimize")
    assert not at.exception
    assert "No models yet" in texts(at)


def test_defaults_are_fp32_and_int8_static_at_batch_1_on_cpu(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert not at.exception
    assert at.multiselect(key="url_precisions").value == ["fp32", "int8_static"]
    assert at.multiselect(key="url_providers").value == ["cpu"]
    assert at.multiselect(key="url_batches").value == [1]
    assert "Configurations in this sweep=2" in texts(at)


def test_submitting_creates_one_job_with_every_chosen_configuration(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    at.multiselect(key="url_precisions").set_value(["fp32", "fp16", "int8_dynamic"])
    at.multiselect(key="url_batches").set_value([1, 8])
    at.selectbox(key="url_measure").set_value("quick")
    at.selectbox(key="url_env").set_value("ort-1.31")  # set up by scripts/setup-runtime-env
    at.run()
    assert "Configurations in this sweep=6" in texts(at)
    at.button(key="submit_sweep").click().run()
    assert not at.exception
    [job] = jobs.list_jobs()
    spec = jobs.spec_of(job)
    assert spec.runtime_env == "ort-1.31"  # the children run under it
    assert job.progress_total == 6
    assert set(spec.precisions) == {Precision.FP32, Precision.FP16, Precision.INT8_DYNAMIC}
    assert spec.batch_sizes == (1, 8)
    assert spec.measure.max_seconds == 5.0  # the quick preset
    assert f"Queued job {job.id} with 6 configurations" in texts(at)


def test_transformer_dims_get_inputs_and_reach_the_sweep(
    data_dir: Path, transformer_path: Path
) -> None:
    model = add_model(transformer_path)
    at = open_page("optimize", model=model.id)
    at.number_input(key="dim_seq").set_value(24).run()
    at.button(key="submit_sweep").click().run()
    [job] = jobs.list_jobs()
    assert dict(jobs.spec_of(job).symbolic_dims) == {"seq": 24}
    links = {e.proto.label: e.proto.page for e in at.get("page_link")}  # follow it, compare it
    assert links[f"Follow job {job.id}"] == "jobs"
    assert links["Compare its results as they arrive"] == "compare"


def test_unavailable_providers_are_listed_with_their_reason(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    unavailable = next(d.value for d in at.dataframe if "why not" in d.value.columns)
    assert "tensorrt" in set(unavailable["runtime"])
    assert all(reason for reason in unavailable["why not"])
    # offered: exactly the providers that really work here (TensorRT too, where it does)
    working = [s.name.upper() for s in get_runtime("onnxruntime").providers() if s.available]
    assert at.multiselect(key="url_providers").options == working


def test_no_precision_disables_submit_with_a_clear_reason(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    at.multiselect(key="url_precisions").set_value([]).run()
    assert "Pick at least one precision." in texts(at)
    assert at.button(key="submit_sweep").disabled


def test_a_link_with_one_bad_value_says_so_and_keeps_the_rest(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id, precisions="fp16", batches="2,4", dims="seq:x")
    assert not at.exception
    assert plain(
        "The link's dims=seq:x is not valid here (it should hold name:number pairs separated by "
        "commas, e.g. seq:128); it starts at its default and the rest of the link was kept."
    ) in texts(at)
    assert at.multiselect(key="url_precisions").value == ["fp16"]
    assert at.multiselect(key="url_batches").value == [2, 4]


def test_run_again_with_changes_prefills_from_the_url(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    old, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(2, 4))
    at = open_page("optimize", model=model.id, precisions="fp16", batches="2,4", from_job=old.id)
    assert at.multiselect(key="url_precisions").value == ["fp16"]
    at.button(key="submit_sweep").click().run()
    newest = jobs.list_jobs()[0]
    assert newest.id != old.id and jobs.spec_of(newest).batch_sizes == (2, 4)


def test_a_quick_cli_sweep_reopened_keeps_quick_and_its_calibration_file(
    data_dir: Path, cnn_path: Path, tmp_path: Path
) -> None:
    import numpy as np

    from backend.cli import main
    from backend.specs import MEASURE_PRESETS

    model = add_model(cnn_path)
    npz = tmp_path / "calib.npz"
    np.savez(npz, input=np.zeros((3, 3, 32, 32), dtype=np.float32))
    argv = ["submit", str(model.id), "--precisions", "fp32,int8_static", "--quick"]
    assert main([*argv, "--calibration", str(npz), "--calibration-samples", "5"]) == 0
    [old] = jobs.list_jobs()
    stored = jobs.spec_of(old)
    assert stored.calibration_sha256 and stored.measure == MEASURE_PRESETS["quick"]

    link = {"model": model.id, **jobs.spec_to_query(stored), "from_job": old.id}
    at = open_page("optimize", **link)
    assert not at.exception
    assert at.selectbox(key="url_measure").value == "quick"
    assert at.radio(key="calibration_source").value == "stored"
    named = ": " + plain("calib.npz")  # the file's name, as the evaluation choice names its own
    assert any(o.endswith(named) for o in at.radio(key="calibration_source").options)
    at.button(key="submit_sweep").click().run()
    newest = jobs.list_jobs()[0]
    assert newest.id != old.id
    assert jobs.spec_of(newest) == stored  # every field, calibration file and samples included


def test_custom_measurement_of_a_reopened_sweep_is_kept(data_dir: Path, mlp_path: Path) -> None:
    import dataclasses

    from backend.specs import MEASURE_PRESETS, SweepSpec

    model = add_model(mlp_path)
    custom = dataclasses.replace(MEASURE_PRESETS["standard"], max_seconds=7.0, warmup_runs=2)
    spec = SweepSpec(precisions=(Precision.FP32,), measure=custom)
    at = open_page("optimize", model=model.id, **jobs.spec_to_query(spec))
    assert at.selectbox(key="url_measure").value == "custom"
    at.button(key="submit_sweep").click().run()
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job).measure == custom


def test_two_runtimes_are_picked_like_providers_and_reach_the_sweep(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert at.multiselect(key="url_runtimes").value == ["onnxruntime"]
    assert "OpenVINO" in at.multiselect(key="url_runtimes").options  # shown by label
    at.multiselect(key="url_runtimes").set_value(["onnxruntime", "openvino"]).run()
    at.multiselect(key="url_precisions").set_value(["fp32", "bf16", "int8_dynamic"]).run()
    at.selectbox(key="url_hint").set_value("throughput")
    at.number_input(key="url_streams").set_value(2)
    at.selectbox(key="url_measure").set_value("quick").run()
    assert not at.exception
    assert "Configurations in this sweep=6" in texts(at)
    gaps = next(d.value for d in at.dataframe if "precision" in d.value.columns)
    found = set(zip(gaps["runtime"], gaps["precision"], strict=True))
    assert ("onnxruntime", "BF16") in found and ("openvino", "INT8 dynamic") in found
    assert all(gaps["why not"])
    at.button(key="submit_sweep").click().run()
    [job] = jobs.list_jobs()
    spec = jobs.spec_of(job)
    assert spec.runtimes == ("onnxruntime", "openvino")
    assert spec.openvino == OpenVinoOptions(performance_hint="throughput", streams=2)
    assert {c.backend for c in spec.configurations()} == {"onnxruntime", "openvino"}


def _gpu_worker() -> None:
    """A worker on a CUDA host, registered as one registers: this machine's table plus the CUDA
    provider as bench/results/h200_gpu_depth.txt's host reported it."""
    from backend.queue.capabilities import local_providers
    from storage.repo import workers as worker_store

    table = {runtime: list(statuses) for runtime, statuses in local_providers().items()}
    table["onnxruntime"] = [s for s in table["onnxruntime"] if s["name"] != "cuda"] + [
        {"name": "cuda", "available": True, "reason": "NVIDIA H200", "native_name": "CUDA"}
    ]
    worker_store.register_worker("gpu-1", "h200-host", 1, {"gpus": []}, table)


def test_cuda_settings_appear_with_the_cuda_provider_and_reach_the_sweep(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    _gpu_worker()
    at = open_page("optimize", model=model.id)
    assert "cuda_graph" not in [t.key for t in at.toggle]  # offered only with cuda picked
    at.multiselect(key="url_providers").set_value(["cpu", "cuda"])
    at.multiselect(key="url_precisions").set_value(["fp16"])
    at.run()
    at.toggle(key="cuda_graph").set_value(True)
    at.run()
    assert "device-resident timing" in texts(at)  # graphs without device timing: refused
    at.multiselect(key="io_modes").set_value(["end_to_end", "device"])
    at.toggle(key="fuse_conv_bias").set_value(True)
    at.run()
    assert "needs prefer_nhwc" in texts(at)  # FP16 bias fusion on NCHW: refused with the reason
    at.toggle(key="nhwc").set_value(True)
    at.run()
    assert "Configurations in this sweep=3" in texts(at)  # cpu e2e, cuda e2e, cuda device
    at.button(key="submit_sweep").click().run()
    spec = jobs.spec_of(jobs.list_jobs()[0])
    keys = {c.key for c in spec.configurations()}
    assert "onnxruntime/cuda/fp16/b1/fixed/all/t0/device/nhwc/cudagraph/fusebias" in keys
    assert "onnxruntime/cuda/fp16/b1/fixed/all/t0/nhwc/fusebias" in keys


def test_onnx_runtime_session_knobs_are_drawn_from_their_declarations(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert at.toggle(key="mem_pattern").value is True  # ONNX Runtime's default
    at.toggle(key="mem_pattern").set_value(False).run()
    assert at.query_params["mem_pattern"] == "0"  # the link keeps it
    at.button(key="submit_sweep").click().run()
    assert not at.exception
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job).onnxruntime == OrtOptions(enable_mem_pattern=False)
    reopened = open_page("optimize", model=model.id, mem_pattern="0")
    assert reopened.toggle(key="mem_pattern").value is False


def test_the_price_field_is_in_the_link_stored_with_the_job_and_a_bad_one_disables_submit(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id, price="cpu=0.25")
    assert at.text_input(key="url_price").value == "cpu=0.25"
    at.text_input(key="url_price").input("cpu=lots").run()
    assert not at.exception
    assert any("not 'cpu=lots'" in w.value for w in at.warning)  # one sentence, nothing queued
    assert at.button(key="submit_sweep").disabled
    at.text_input(key="url_price").input("cpu=0.25,a100=2").run()
    assert at.query_params["price"] == "cpu=0.25,a100=2"
    at.button(key="submit_sweep").click().run()
    assert not at.exception
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job).prices == (("cpu", 0.25), ("a100", 2.0))
    reopened = open_page("optimize", model=model.id, **jobs.spec_to_query(jobs.spec_of(job)))
    assert reopened.text_input(key="url_price").value == "cpu=0.25,a100=2"


def test_every_drawn_knob_starts_from_the_link_and_submits_the_linked_sweep(
    data_dir: Path, mlp_path: Path
) -> None:
    from backend.specs import MEASURE_PRESETS, SweepSpec

    model = add_model(mlp_path)
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.INT8_STATIC),
        backends=("onnxruntime", "openvino"),
        batch_sizes=(2, 8),
        fixed_shapes=False,
        optimization_level="basic",
        intra_op_threads=3,
        simplify=True,
        calibration_samples=5,
        profile=True,
        fp32_nodes=("MatMul_3",),  # the MLP's second MatMul, as the Graph page names it
        openvino=OpenVinoOptions(performance_hint="throughput", streams=2),
        onnxruntime=OrtOptions(enable_mem_pattern=False),
        min_cosine=0.95,
        measure=MEASURE_PRESETS["quick"],
        prices=(("cpu", 0.25),),
    )
    at = open_page("optimize", model=model.id, **jobs.spec_to_query(spec))
    assert not at.exception
    assert at.selectbox(key="url_shapes").value is False  # a declared choice: "Dynamic: ..."
    assert at.selectbox(key="url_opt").value == "basic"
    assert at.number_input(key="url_threads").value == 3 and at.toggle(key="url_simplify").value
    assert at.number_input(key="url_cal_samples").value == 5
    # a number typed past a limit is dropped by the widget: its help says the range
    assert at.number_input(key="url_threads").help.endswith("From 0 to 256.")
    assert at.number_input(key="url_streams").value == 2
    assert at.text_area(key="fp32_nodes").value == "MatMul_3"
    at.button(key="submit_sweep").click().run()
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job) == spec  # every knob through widget, link and back, unchanged
