"""GPU depth on an NVIDIA host: end-to-end vs device-resident, FP32/TF32/FP16, CUDA graphs on/off,
batch 1 to the knee, for a ResNet-50-style CNN and a BERT-base-style encoder, all through
Optiboard's own run_configuration (variants, runner, IOBinding, measure), not hand-written ORT.

  python bench/gpu_depth.py export DIR            torchvision resnet50 + BERT-base (random weights)
  python bench/gpu_depth.py measure MODEL NAME PLAN OUT.json [--dim seq=128] [--budget-s S]
  python bench/gpu_depth.py limits MODEL OUT.json one FP16 device config in a limited child
  python bench/gpu_depth.py table OUT.json...     the table (samples/s, p50, copy share, FLOP/s)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine.run import ConfigurationTask, run_configuration  # noqa: E402
from backend.queue.knee import BatchPoint, best_batch, knee_stop  # noqa: E402
from backend.reporting import distance  # noqa: E402
from backend.results import ConfigurationResult  # noqa: E402
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


def export(folder: Path) -> None:
    """Real torchvision resnet50 and a BERT-base encoder (12 x 768, seq dim), random weights."""
    import torch
    import torchvision

    folder.mkdir(parents=True, exist_ok=True)
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
    for path in sorted(folder.glob("*.onnx")):
        print(f"exported {path} ({path.stat().st_size / 1e6:.0f} MB)", flush=True)


def _config(precision: str, io: IoMode, batch: int, dims: dict[str, int], **cuda) -> Configuration:
    return Configuration(
        precision=precision,
        provider="cuda",
        batch_size=batch,
        symbolic_dims=tuple(dims.items()),
        io_mode=io,
        cuda=CudaOptions(**cuda),
    )


def _measure_one(model: Path, config: Configuration, out: Path) -> ConfigurationResult:
    settings = replace(MEASURE, accuracy_samples=1 if config.batch_size <= 8 else 0)
    task = ConfigurationTask(str(model), config.to_dict(), asdict(settings), str(out))
    result = ConfigurationResult.from_dict(run_configuration(task))
    status = f"{result.throughput:,.0f}/s p50 {result.latency.p50:.3f} ms" if result.ok else ""
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


def limits_check(model: Path, out: Path) -> None:
    """One configuration through run_in_child, i.e. under the child's default resource limits."""
    from backend.launch.children import run_in_child
    from backend.launch.limits import ChildLimits

    limits = ChildLimits.from_settings()
    print(f"child limits: {limits.to_dict()}", flush=True)
    config = _config("fp16", DEVICE, 8, {})
    with tempfile.TemporaryDirectory() as scratch:
        task = ConfigurationTask(str(model), config.to_dict(), asdict(MEASURE), scratch)
        outcome = run_in_child(run_configuration, task, timeout_s=300, what="limits check")
    line = {"limits": limits.to_dict(), "ok": outcome.ok, "error": outcome.error}
    if outcome.ok:
        result = ConfigurationResult.from_dict(outcome.value)
        line |= {"status": result.status.value, "throughput": result.throughput}
        line |= {"providers": result.providers_used, "error": result.error}
    print(json.dumps(line), flush=True)
    out.write_text(json.dumps(line, indent=1))


def table(paths: list[Path]) -> str:
    rows = [r for p in paths for r in json.loads(p.read_text())]
    results = [ConfigurationResult.from_dict(r) for r in rows]
    shares = distance.copy_shares(results)
    head = (
        f"{'model':<10} {'configuration':<48} {'samples/s':>10} {'p50 ms':>8} {'copy':>6} "
        f"{'TFLOP/s':>8} {'%FP16pk':>7} {'%own pk':>7} {'GPU MB':>7}"
    )
    lines = [head, "-" * len(head)]
    for row, result in zip(rows, results, strict=True):
        config = Configuration.from_dict(result.configuration)
        if not result.ok or result.latency is None:
            lines.append(f"{row['model']:<10} {config.label:<48} {result.error or result.status}")
            continue
        share = shares.get(distance.io_pair_key(config))
        dist = distance.distance(result)
        fp16 = distance.device_peak(dist.device, "fp16") if dist else None
        own = dist.fraction if dist else None
        lines.append(
            f"{row['model']:<10} {config.label:<48} {result.throughput:>10,.0f} "
            f"{result.latency.p50:>8.3f} {'' if share is None else f'{share:.0%}':>6} "
            f"{'' if dist is None else f'{dist.achieved_flops / 1e12:.1f}':>8} "
            f"{'' if not (dist and fp16) else f'{dist.achieved_flops / fp16:.1%}':>7} "
            f"{'' if own is None else f'{own:.1%}':>7} {result.gpu_memory_mb or 0:>7.0f}"
        )
    for model in dict.fromkeys(row["model"] for row in rows):  # one reference line per model
        ran = [r for row, r in zip(rows, results, strict=True) if row["model"] == model and r.ok]
        best = max(ran, key=lambda r: r.throughput or 0.0, default=None)
        if best is not None and (line := distance.mlperf_line(best)):
            lines.append(f"{model}: best {best.throughput:,.0f}/s. {line}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("export").add_argument("folder", type=Path)
    p = sub.add_parser("measure")
    p.add_argument("model", type=Path)
    p.add_argument("name")
    p.add_argument("out", type=Path)
    p.add_argument("--dim", action="append", default=[])
    p.add_argument("--budget-s", type=float, default=500)
    p = sub.add_parser("limits")
    p.add_argument("model", type=Path)
    p.add_argument("out", type=Path)
    sub.add_parser("table").add_argument("paths", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "export":
        export(args.folder)
    elif args.command == "measure":
        dims = {k: int(v) for k, v in (d.split("=") for d in args.dim)}
        measure_plan(args.model, args.name, dims, args.out, args.budget_s)
    elif args.command == "limits":
        limits_check(args.model, args.out)
    else:
        print(table(args.paths))


if __name__ == "__main__":
    main()
