"""GPU depth on an NVIDIA host: end-to-end vs device-resident, FP32/TF32/FP16, CUDA graphs on/off,
batch 1 to the knee, for a ResNet-50-style CNN and a BERT-base-style encoder, all through
Optiboard's own run_configuration (variants, runner, IOBinding, measure), not hand-written ORT.

  python bench/gpu_depth.py export DIR            torchvision resnet50 + BERT-base (random weights)
  python bench/gpu_depth.py measure MODEL NAME PLAN OUT.json [--dim seq=128] [--budget-s S]
  python bench/gpu_depth.py limits MODEL OUT.json one FP16 device config in a limited child
  python bench/gpu_depth.py table OUT.json...     the table (samples/s, p50, copy share, FLOP/s)
  python bench/gpu_depth.py push MODEL OUT.json   ResNet-50 FP16 knobs, large batch, ORT profile
  python bench/gpu_depth.py graphcheck MODEL OUT.json   Casts, float32 islands, BN fusion
  python bench/gpu_depth.py kernels MODEL OUT.json      GPU time per kernel (CUPTI, torch)
  python bench/gpu_depth.py graphbind MODEL OUT.json    CUDA graph outputs: old vs new binding
  python bench/gpu_depth.py graphs MODEL OUT.json       CUDA-graph rows again, accuracy on each
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine.run import ConfigurationTask, run_configuration  # noqa: E402
from backend.jobs.knee import BatchPoint, best_batch, knee_stop  # noqa: E402
from backend.reporting import distance  # noqa: E402
from backend.results import ConfigurationResult, ResultStatus  # noqa: E402
from backend.specs import Configuration, CudaOptions, IoMode, MeasureSettings  # noqa: E402

MEASURE = MeasureSettings(
    warmup_runs=10,
    window_runs=20,
    window_min_seconds=0.25,
    stable_windows=3,
    stability_tolerance=0.10,
    max_seconds=4.0,
    accuracy_samples=1,
)
DEVICE, E2E = IoMode.DEVICE, IoMode.END_TO_END


def export(folder: Path, only: str = "") -> None:
    """Real torchvision resnet50 and a BERT-base encoder (12 x 768, seq dim), random weights."""
    import torch
    import torchvision

    folder.mkdir(parents=True, exist_ok=True)
    if only != "bert_base":
        _export_resnet(folder, torch, torchvision)
    if only != "resnet50":
        _export_bert(folder, torch)
    for path in sorted(folder.glob("*.onnx")):
        print(f"exported {path} ({path.stat().st_size / 1e6:.0f} MB)", flush=True)


def _export_resnet(folder: Path, torch, torchvision) -> None:  # noqa: ANN001
    resnet = torchvision.models.resnet50(weights=None).eval()
    torch.onnx.export(
        resnet,
        (torch.randn(1, 3, 224, 224),),
        str(folder / "resnet50.onnx"),
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )


def _export_bert(folder: Path, torch) -> None:  # noqa: ANN001
    from transformers import BertConfig, BertModel

    class Encoder(torch.nn.Module):  # positional (ids, mask) -> last hidden state only
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel(BertConfig(attn_implementation="eager"))

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    bert = Encoder().eval()
    ids = torch.randint(0, 30000, (1, 128))
    torch.onnx.export(
        bert,
        (ids, torch.ones_like(ids)),
        str(folder / "bert_base.onnx"),
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "seq"},
            "attention_mask": {0: "batch", 1: "seq"},
            "last_hidden_state": {0: "batch", 1: "seq"},
        },
        opset_version=17,
        dynamo=False,
    )


def _config(precision: str, io: IoMode, batch: int, dims: dict[str, int], **cuda) -> Configuration:
    return Configuration(
        precision=precision,
        provider="cuda",
        batch_size=batch,
        symbolic_dims=tuple(dims.items()),
        io_mode=io,
        cuda=CudaOptions(**cuda),
    )


def _measure_one(
    model: Path, config: Configuration, out: Path, accuracy: bool = False
) -> ConfigurationResult:
    samples = 1 if accuracy or config.batch_size <= 8 else 0
    settings = replace(MEASURE, accuracy_samples=samples)
    task = ConfigurationTask(str(model), config, settings, str(out))
    result = run_configuration(task)
    status = f"{result.throughput:,.0f}/s p50 {result.latency.p50:.3f} ms" if result.ok else ""
    if result.ok and result.accuracy is not None:
        top1 = result.accuracy.top1_agreement
        status += f" cosine {result.accuracy.cosine_similarity:.4f}"
        status += f" top-1 {top1:.1%}" if top1 is not None else ""
    print(f"  {config.label}: {status or result.error}", flush=True)
    return result


def measure_plan(model: Path, name: str, dims: dict[str, int], out: Path, budget_s: float) -> None:
    """Batch-1 grid, then FP16 device-resident up to the knee, then the comparisons at it."""
    deadline = time.monotonic() + budget_s
    results: list[dict] = []

    def run(config: Configuration) -> ConfigurationResult | None:
        if time.monotonic() > deadline:
            print(f"  {config.label}: skipped, time budget spent", flush=True)
            return None
        try:
            result = _measure_one(model, config, Path(scratch))
        except Exception as exc:  # a bug or runtime crash: record it, go on with the plan
            print(f"  {config.label}: {type(exc).__name__}: {exc}", flush=True)
            return None
        results.append({"model": name, **result.to_dict()})
        out.write_text(json.dumps(results, indent=1, default=str))
        return result

    with tempfile.TemporaryDirectory() as scratch:
        for precision, io, cuda in [
            ("fp32", E2E, {}),
            ("fp32", DEVICE, {}),
            ("fp32", DEVICE, {"use_tf32": False}),
            ("fp16", E2E, {}),
            ("fp16", DEVICE, {}),
            ("fp16", DEVICE, {"enable_cuda_graph": True}),
            ("fp16", DEVICE, {"float16_io": True}),
        ]:
            run(_config(precision, io, 1, dims, **cuda))
        series = [BatchPoint(1, results[4]["throughput"])] if len(results) > 4 else []
        batch = 2
        while batch <= 1024 and not knee_stop(series):
            result = run(_config("fp16", DEVICE, batch, dims))
            if result is None:
                break
            oom = bool(result.telemetry.get("out_of_memory"))
            series.append(BatchPoint(batch, result.throughput, oom))
            batch *= 2
        best = best_batch(series) or 32
        print(f"  knee: {knee_stop(series) or 'not reached'}; best batch {best}", flush=True)
        for precision, io, cuda in [
            ("fp16", E2E, {}),
            ("fp16", DEVICE, {"enable_cuda_graph": True}),
            ("fp16", DEVICE, {"prefer_nhwc": True}),
            ("fp32", DEVICE, {}),
            ("fp32", E2E, {}),
        ]:
            run(_config(precision, io, best, dims, **cuda))


def limits_check(model: Path, out: Path, precision: str, batch: int) -> None:
    """One device-resident configuration through measure_in_child, the worker's own call, under
    a GPU child's limits; then the same under a CPU child's (RLIMIT_AS, what 51ca28b gave every
    child); then a batch whose tensors pass 2^31 elements, refused before any session."""
    from backend.jobs.measuring import measure_in_child
    from backend.launch import pids
    from backend.launch.children import run_in_child
    from backend.launch.limits import ChildLimits

    report: dict = {"pids_cgroup": pids.available(), "memory_cgroup": pids.memory_available()}
    settings = replace(MEASURE, accuracy_samples=0)
    with tempfile.TemporaryDirectory() as scratch:
        for label, gpu in (("gpu child", True), ("cpu child (RLIMIT_AS)", False)):
            config = _config(precision, DEVICE, batch, {})
            task = ConfigurationTask(str(model), config, settings, scratch)
            limits = ChildLimits.from_settings(gpu=gpu)
            if gpu:
                result = measure_in_child(task, timeout_s=300)
            else:
                outcome = run_in_child(
                    run_configuration, task, timeout_s=300, what=config.key, limits=limits
                )
                result = outcome.value if outcome.ok else None
                result = result or ConfigurationResult(config.key, config, ResultStatus.FAILED)
                result.error = result.error or outcome.error
            report[label] = _limits_line(limits, result)
            print(label, json.dumps(report[label]), flush=True)
        config = _config("fp16", DEVICE, 4096, {})
        task = ConfigurationTask(str(model), config, settings, scratch)
        report["fp16 b4096"] = _limits_line(
            ChildLimits.from_settings(gpu=True), measure_in_child(task, timeout_s=300)
        )
        print("fp16 b4096", json.dumps(report["fp16 b4096"]), flush=True)
    out.write_text(json.dumps(report, indent=1))


def _limits_line(limits, result: ConfigurationResult | None) -> dict:  # noqa: ANN001
    line: dict = {"limits": limits.to_dict()}
    if result is not None:
        line |= {"status": str(result.status), "error": result.error, "notes": result.notes}
        line |= {"throughput": result.throughput, "peak_rss_mb": result.peak_rss_mb}
        line |= {"gpu_memory_mb": result.gpu_memory_mb, "providers": result.providers_used}
    return line


def table(paths: list[Path]) -> str:
    rows = [r for p in paths for r in json.loads(p.read_text())]
    results = [ConfigurationResult.from_dict(r) for r in rows]
    shares = distance.copy_shares(results)
    head = (
        f"{'model':<10} {'configuration':<58} {'samples/s':>10} {'p50 ms':>8} {'copy':>6} "
        f"{'TFLOP/s':>8} {'%FP16pk':>7} {'%own pk':>7} {'GPU MB':>7} {'cosine':>7} {'top-1':>6}"
    )
    lines = [head, "-" * len(head)]
    for row, result in zip(rows, results, strict=True):
        config = result.configuration
        if not result.ok or result.latency is None:
            lines.append(f"{row['model']:<10} {config.label:<58} {result.error or result.status}")
            continue
        share = shares.get(distance.io_pair_key(config))
        dist = distance.distance(result)
        fp16 = distance.device_peak(dist.device, "fp16") if dist else None
        own = dist.fraction if dist else None
        lines.append(
            f"{row['model']:<10} {config.label:<58} {result.throughput:>10,.0f} "
            f"{result.latency.p50:>8.3f} {'' if share is None else f'{share:.0%}':>6} "
            f"{'' if dist is None else f'{dist.achieved_flops / 1e12:.1f}':>8} "
            f"{'' if not (dist and fp16) else f'{dist.achieved_flops / fp16:.1%}':>7} "
            f"{'' if own is None else f'{own:.1%}':>7} {result.gpu_memory_mb or 0:>7.0f}"
            f"{_accuracy_columns(result)}"
        )
    for model in dict.fromkeys(row["model"] for row in rows):  # one reference line per model
        ran = [r for row, r in zip(rows, results, strict=True) if row["model"] == model and r.ok]
        best = max(ran, key=lambda r: r.throughput or 0.0, default=None)
        if best is not None and (line := distance.mlperf_line(best)):
            lines.append(f"{model}: best {best.throughput:,.0f}/s. {line}")
    return "\n".join(lines)


def _accuracy_columns(result: ConfigurationResult) -> str:
    """Cosine and top-1 agreement with the FP32 CPU reference; blank where none was taken."""
    if result.accuracy is None or not result.accuracy.samples:  # no batch was checked
        return f" {'':>7} {'':>6}"
    top1 = result.accuracy.top1_agreement
    cosine = result.accuracy.cosine_similarity
    return f" {cosine:>7.4f} {'' if top1 is None else f'{top1:.0%}':>6}"


# --- pushing ResNet-50 FP16 device-resident towards 3x (issue 14), 2026-12-03 afternoon ---

NHWC = {"prefer_nhwc": True}
KNOBS = {  # each tried alone on top of NHWC at the push batch, kept when it adds > 2%
    "fuse_conv_bias": {"fuse_conv_bias": True},
    "float16_io": {"float16_io": True},
    "heuristic": {"conv_algo_search": "HEURISTIC"},
    "small_workspace": {"conv_max_workspace": False},
    "cuda_graph": {"enable_cuda_graph": True},
}


def push_plan(model: Path, out: Path, batch: int, budget_s: float) -> None:
    """NHWC FP16 device-resident at `batch`, each knob alone, the helpful ones together, that
    combination at other batches, and one ORT-profiled pass; every row via run_configuration."""
    deadline = time.monotonic() + budget_s
    rows: list[dict] = []

    def run(cuda: dict, at: int, profile: bool = False) -> float:
        if time.monotonic() > deadline:
            print(f"  b{at} {cuda}: skipped, time budget spent", flush=True)
            return 0.0
        config = replace(_config("fp16", DEVICE, at, {}, **cuda), profile=profile)
        try:
            result = _measure_one(model, config, Path(scratch))
        except Exception as exc:  # record and go on: one knob's crash is a finding
            print(f"  {config.label}: {type(exc).__name__}: {exc}", flush=True)
            return 0.0
        row = {"model": "resnet50", **result.to_dict()}
        if profile and result.environment.get("profile_path"):
            row["ort_profile_by_op"] = _profile_by_op(Path(result.environment["profile_path"]))
        rows.append(row)
        out.write_text(json.dumps(rows, indent=1, default=str))
        return (result.throughput or 0.0) if result.ok else 0.0

    with tempfile.TemporaryDirectory() as scratch:
        base = run(NHWC, batch)
        kept: dict = dict(NHWC)
        for name, knob in KNOBS.items():
            got = run({**NHWC, **knob}, batch)
            print(f"  {name}: {got / base - 1 if base else 0:+.1%} vs NHWC alone", flush=True)
            if base and got > base * 1.02:
                kept |= knob
        best = run(kept, batch) if kept != NHWC else base
        print(f"  kept {kept}: {best:,.0f}/s at b{batch}", flush=True)
        for other in (2048, 512, 256):
            run(kept, other)
        run({**kept, "fuse_conv_bias": True, "enable_cuda_graph": False}, 256, profile=True)


def _profile_by_op(path: Path) -> dict:
    """ORT's profiler, summed per op type (host-side node times: the CUDA kernels are async)."""
    from backend.engine.profile import Profile

    return Profile.load(path).by_op_type()


def graph_check(model: Path, out: Path) -> None:
    """What the FP16 variants hold (Casts, float32 tensors, BatchNorm) and what ORT's CUDA
    session makes of them with NHWC preferred (op histogram of its optimized graph)."""
    import onnx

    from backend.engine.variants import build_variant
    from backend.runtimes import get_runtime
    from backend.runtimes.base import SessionOptions

    source = onnx.load(str(model))
    report: dict = {"source_ops": _histogram(source)}
    with tempfile.TemporaryDirectory() as scratch:
        for f16io in (False, True):
            config = _config("fp16", DEVICE, 256, {}, prefer_nhwc=True, float16_io=f16io)
            variant = build_variant(model, config, Path(scratch) / str(f16io))
            built = onnx.load(str(variant.path))
            optimized = Path(scratch) / f"optimized-{f16io}.onnx"
            options = SessionOptions(config, optimized_model_path=optimized)
            with get_runtime("onnxruntime").open(variant.path, options) as runner:
                used = runner.providers_used
            after = onnx.load(str(optimized))
            report[f"fp16 f16io={f16io}"] = {
                "variant_ops": _histogram(built),
                "casts": _casts(built),
                "float32_initializers": sum(i.data_type == 1 for i in built.graph.initializer),
                "float16_initializers": sum(i.data_type == 10 for i in built.graph.initializer),
                "graph_io": [
                    (v.name, v.type.tensor_type.elem_type)
                    for v in [*built.graph.input, *built.graph.output]
                ],
                "ort_optimized_ops": _histogram(after),
                "ort_optimized_casts": _casts(after),
                "providers": used,
            }
    print(json.dumps(report, indent=1), flush=True)
    out.write_text(json.dumps(report, indent=1))


def _histogram(model) -> dict[str, int]:  # noqa: ANN001
    counts: dict[str, int] = {}
    for node in model.graph.node:
        key = f"{node.domain + ':' if node.domain else ''}{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _casts(model) -> list[str]:  # noqa: ANN001
    """Each Cast and whether it sits at the graph's boundary (reads an input / writes an output)."""
    inputs = {v.name for v in model.graph.input}
    outputs = {v.name for v in model.graph.output}
    found = []
    for node in model.graph.node:
        if node.op_type == "Cast":
            edge = set(node.input) & inputs or set(node.output) & outputs
            found.append(f"{node.name}: {'boundary' if edge else 'INSIDE'}")
    return found


KERNEL_GROUPS = (  # first match wins; names as CUPTI reports them
    ("transpose (layout)", ("transpose", "nchwtonhwc", "nhwctonchw", "tensortransform")),
    ("cast", ("cast",)),
    ("bias add (cudnnAddTensor)", ("op_generic_tensor", "optensor", "op_tensor", "addtensor")),
    ("pooling", ("pool",)),  # before convolution: cuDNN's pooling kernels say "cudnn" too
    ("convolution", ("conv", "xmma", "fprop", "implicit", "winograd", "cudnn", "sm90_", "cutlass")),
    ("gemm", ("gemm", "cublas")),
    ("add (residual)", ("_binaryelementwise", "binaryelementwise", "add")),
    ("relu", ("_unaryelementwise", "relu", "unaryelementwise")),
)


def kernel_table(model: Path, out: Path, batch: int, cuda: dict, runs: int = 10) -> None:
    """GPU time per kernel of device-resident runs, read by CUPTI through torch.profiler (ORT's
    own profiler only sees the host side of asynchronous CUDA kernels)."""
    import torch  # first, so its CUDA libraries are the ones loaded
    from torch.profiler import ProfilerActivity, profile

    from backend.engine import inputs
    from backend.engine.variants import build_variant
    from backend.runtimes import get_runtime
    from backend.runtimes.base import SessionOptions

    torch.cuda.init()
    config = _config("fp16", DEVICE, batch, {}, **cuda)
    with tempfile.TemporaryDirectory() as scratch:
        variant = build_variant(model, config, Path(scratch))
        feeds = inputs.random_inputs(inputs.input_specs_of(variant.path), batch, {})
        options = SessionOptions(config)
        with get_runtime("onnxruntime").open(variant.path, options) as runner:
            device = runner.bind_on_device(feeds[0])
            for _ in range(5):
                device.run()
            started = time.perf_counter()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(runs):
                    device.run()
            wall = (time.perf_counter() - started) / runs
    kernels = []
    for event in prof.key_averages():
        total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total:
            kernels.append({"name": event.key, "calls": event.count // runs, "us": total / runs})
    kernels.sort(key=lambda k: -k["us"])
    gpu_us = sum(k["us"] for k in kernels)
    groups: dict[str, float] = {}
    for kernel in kernels:
        lower = kernel["name"].lower()
        group = next((g for g, keys in KERNEL_GROUPS if any(k in lower for k in keys)), "other")
        kernel["group"] = group
        groups[group] = groups.get(group, 0.0) + kernel["us"]
    report = {
        "configuration": config.label,
        "wall_ms_per_run_profiled": wall * 1e3,
        "gpu_kernel_ms_per_run": gpu_us / 1e3,
        "samples_per_s_from_kernel_time": batch / (gpu_us / 1e6) if gpu_us else None,
        "groups_ms": {
            g: round(us / 1e3, 3) for g, us in sorted(groups.items(), key=lambda kv: -kv[1])
        },
        "groups_share": {g: round(us / gpu_us, 4) for g, us in groups.items()} if gpu_us else {},
        "top_kernels": kernels[:25],
    }
    print(json.dumps({k: v for k, v in report.items() if k != "top_kernels"}, indent=1))
    for k in kernels[:12]:
        print(f"  {k['us'] / 1e3:8.3f} ms x{k['calls']:<4} {k['group']:<26} {k['name'][:110]}")
    out.write_text(json.dumps(report, indent=1))


# --- CUDA graphs again (issue 21): the rows above were read from all-zero outputs ---

FUSED = {"prefer_nhwc": True, "fuse_conv_bias": True}
GRAPH_ROWS = [  # (precision, batch, CUDA options): the CUDA-graph rows first, then graph-off twins
    ("fp16", 1024, {**FUSED, "float16_io": True, "enable_cuda_graph": True}),
    ("fp16", 1024, {"enable_cuda_graph": True}),
    ("fp32", 1024, {"enable_cuda_graph": True}),
    ("fp16", 1, {"enable_cuda_graph": True}),
    ("fp32", 1, {"enable_cuda_graph": True}),
    ("fp16", 1, {**FUSED, "enable_cuda_graph": True}),
    ("fp16", 1024, {**FUSED, "float16_io": True}),
    ("fp16", 1, {}),
    ("fp32", 1, {}),
    ("fp16", 1, FUSED),
    ("fp16", 1024, {}),
    ("fp32", 1024, {}),
]


def graphs_plan(model: Path, out: Path, budget_s: float) -> None:
    """GRAPH_ROWS through run_configuration, device-resident, each with the accuracy check (one
    batch against the FP32 CPU reference), so no row stands on outputs nobody read."""
    deadline = time.monotonic() + budget_s
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        for precision, batch, cuda in GRAPH_ROWS:
            config = _config(precision, DEVICE, batch, {}, **cuda)
            if time.monotonic() > deadline:
                print(f"  {config.label}: skipped, time budget spent", flush=True)
                continue
            result = _measure_one(model, config, Path(scratch), accuracy=True)
            rows.append({"model": "resnet50", **result.to_dict()})
            out.write_text(json.dumps(rows, indent=1, default=str))


def graph_binding_check(model: Path, out: Path) -> None:
    """The binding sequence of 51ca28b (a first run on ORT-allocated outputs, then preallocated
    outputs bound) against DeviceBinding's (final buffers bound before the first run), each on
    its own CUDA-graph session, compared with a plain session's outputs on two inputs."""
    import onnxruntime as ort

    from backend.runtimes.onnxruntime import preload_cuda_libraries
    from backend.runtimes.ort_cuda import cuda_provider_options

    preload_cuda_libraries(ort)
    report: dict = {"onnxruntime": ort.__version__}
    for label, knobs in (("default", {}), ("nhwc", {"prefer_nhwc": True})):
        graph = cuda_provider_options(CudaOptions(enable_cuda_graph=True, **knobs))
        report[label] = _binding_sequences(model, graph)
    print(json.dumps(report, indent=1), flush=True)
    out.write_text(json.dumps(report, indent=1))


def _binding_sequences(model: Path, graph: dict) -> dict:
    import numpy as np
    import onnxruntime as ort

    from backend.engine import inputs
    from backend.runtimes.ort_cuda import DeviceBinding

    plain_options = graph | {"enable_cuda_graph": "0"}

    def session(options: dict) -> ort.InferenceSession:
        providers = [("CUDAExecutionProvider", options), "CPUExecutionProvider"]
        return ort.InferenceSession(str(model), providers=providers)

    specs = inputs.input_specs_of(model)
    feeds = [inputs.random_inputs(specs, 1, {}, seed=seed)[0] for seed in (1, 2)]
    plain = session(plain_options)
    expected = [plain.run(None, feed)[0] for feed in feeds]

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
        norm = np.linalg.norm(a) * np.linalg.norm(b)
        return float(a @ b / norm) if norm else 0.0

    report: dict = {"providers": plain.get_providers()}
    old = session(graph)
    values = {n: ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for n, a in feeds[0].items()}
    first = old.io_binding()
    for name, value in values.items():
        first.bind_ortvalue_input(name, value)
    name = old.get_outputs()[0].name
    first.bind_output(name, "cuda", 0)
    old.run_with_iobinding(first)
    shape = first.get_outputs()[0].shape()
    buffer = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, "cuda", 0)
    later = old.io_binding()
    for input_name, value in values.items():
        later.bind_ortvalue_input(input_name, value)
    later.bind_ortvalue_output(name, buffer)
    got_old = []
    for feed in feeds:
        for input_name, array in feed.items():
            values[input_name].update_inplace(array)
        for _ in range(3):
            old.run_with_iobinding(later)
        later.synchronize_outputs()
        got_old.append(buffer.numpy())
    new = session(graph)
    bound = DeviceBinding(new, feeds[0], [tuple(shape)])
    got_new = [bound.infer(feed)[0] for feed in feeds for _ in range(3)][2::3]
    for label, got in (("51ca28b sequence", got_old), ("DeviceBinding now", got_new)):
        report[label] = [
            {"max_abs": float(np.abs(g).max()), "cosine_vs_plain": cosine(g, e)}
            for g, e in zip(got, expected, strict=True)
        ]
    report["plain max_abs"] = [float(np.abs(e).max()) for e in expected]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("folder", type=Path)
    p.add_argument("--only", default="", help="resnet50 or bert_base; both when empty")
    p = sub.add_parser("push")
    p.add_argument("model", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--budget-s", type=float, default=420)
    p = sub.add_parser("graphcheck")
    p.add_argument("model", type=Path)
    p.add_argument("out", type=Path)
    p = sub.add_parser("kernels")
    p.add_argument("model", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--cuda", default='{"prefer_nhwc": true}', help="CudaOptions as JSON")
    p = sub.add_parser("measure")
    p.add_argument("model", type=Path)
    p.add_argument("name")
    p.add_argument("out", type=Path)
    p.add_argument("--dim", action="append", default=[])
    p.add_argument("--budget-s", type=float, default=500)
    p = sub.add_parser("limits")
    p.add_argument("model", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--batch", type=int, default=1024)
    for name in ("graphs", "graphbind"):
        p = sub.add_parser(name)
        p.add_argument("model", type=Path)
        p.add_argument("out", type=Path)
        p.add_argument("--budget-s", type=float, default=300)
    sub.add_parser("table").add_argument("paths", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "export":
        export(args.folder, args.only)
    elif args.command == "push":
        push_plan(args.model, args.out, args.batch, args.budget_s)
    elif args.command == "graphcheck":
        graph_check(args.model, args.out)
    elif args.command == "kernels":
        kernel_table(args.model, args.out, args.batch, json.loads(args.cuda))
    elif args.command == "measure":
        dims = {k: int(v) for k, v in (d.split("=") for d in args.dim)}
        measure_plan(args.model, args.name, dims, args.out, args.budget_s)
    elif args.command == "limits":
        limits_check(args.model, args.out, args.precision, args.batch)
    elif args.command == "graphs":
        graphs_plan(args.model, args.out, args.budget_s)
    elif args.command == "graphbind":
        graph_binding_check(args.model, args.out)
    else:
        print(table(args.paths))


if __name__ == "__main__":
    main()
