"""Triton with ONNX Runtime's CUDA provider against the CPU provider on the same host.

A small CNN from tests/models.py (FP32, and FP16 through onnxconverter-common's float16 pass with
FP32 inputs/outputs, the call backend/engine/variants.py makes) is served by the real
tritonserver through backend/serving/server.py under one dynamic-batching policy; the project's
load generator measures a closed-loop concurrency sweep and one Server-scenario point at 70% of
the highest rate the sweep reached. Every point records the provider asked for and the providers
ONNX Runtime's session really used (from the model's line in Triton's log). A configuration
that cannot be served is reported with the server's sentence and the run goes on.

A CUDA config may name ONNX Runtime's cuDNN convolution search as a third field
(cuda:fp32:EXHAUSTIVE): the served model's config then asks for that search instead of the
project's choice (repository.CUDA_CONV_ALGO_SEARCH), so the two are measured side by side.

    python3 bench/serving_gpu.py --venv /tmp/tv --out /tmp/out [--configs cuda:fp32,cpu:fp32]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.errors import UnavailableError, UserError  # noqa: E402
from backend.serving import repository as serving_repository  # noqa: E402
from backend.serving.loadgen import run_load_in_child  # noqa: E402
from backend.serving.repository import plan_model, write_repository  # noqa: E402
from backend.serving.server import TritonServer, find_environment, serve  # noqa: E402
from backend.serving.types import (  # noqa: E402
    BatchingPolicy,
    LoadPoint,
    LoadSpec,
    Scenario,
    ServingProvider,
)
from backend.specs import MEASURE_PRESETS  # noqa: E402
from tests import models as model_factory  # noqa: E402

POLICY = BatchingPolicy(max_batch_size=32, max_queue_delay_us=500)
HEADERS = (
    "config               session providers          load            req/s   p50 ms   p99 ms"
    "  queue ms  compute ms  mean batch  batches formed (size:executions)"
)


def cnn_files(folder: Path) -> dict[str, Path]:
    """The served variants: the CNN in FP32 and its FP16 conversion (FP32 inputs/outputs)."""
    model = model_factory.make_cnn(channels=64, blocks=2, image=32)
    files = {"fp32": model_factory.save(model, folder / "cnn_fp32.onnx")}
    try:
        from onnxconverter_common import float16

        half = float16.convert_float_to_float16(model, keep_io_types=True)
        files["fp16"] = model_factory.save(half, folder / "cnn_fp16.onnx")
    except ImportError as exc:
        print(f"fp16 variant not built: {exc}")
    return files


def file_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", label)


def histogram(point: LoadPoint) -> str:
    return " ".join(f"{size}:{count}" for size, count in sorted(point.batch_histogram.items()))


def row(config: str, point: LoadPoint) -> str:
    if point.scenario is Scenario.SERVER:
        load = f"server {point.spec.target_rps:.0f}/s"
    else:
        load = f"{point.spec.concurrency} in flight"
    used = ",".join(p.replace("ExecutionProvider", "") for p in point.session_providers) or "?"
    return (
        f"{config:<20} {used:<26} {load:<15} {point.achieved_rps:7.1f} {point.latency.p50:8.2f} "
        f"{point.latency.p99:8.2f} {point.queue_ms:9.2f} {point.compute_ms:11.2f} "
        f"{point.mean_batch:11.1f}  {histogram(point)}"
        + ("  (client saturated)" if point.generator_saturated else "")
        + (f"  errors {point.errors}" if point.errors else "")
    )


def sweep(args: argparse.Namespace, server: TritonServer, label: str, started: float) -> list:
    """The concurrency sweep, then one Server point at 70% of the best rate, on a ready server."""
    measure = MEASURE_PRESETS["quick"]
    points: list[LoadPoint] = []
    print(
        f"{label}: ready in {time.monotonic() - started:.1f} s, session providers "
        f"{server.endpoint.session_providers} {server.endpoint.session_options}",
        flush=True,
    )
    (Path(args.out) / f"triton_{file_name(label)}.log").write_text(server.log_text())
    for level in args.concurrency:
        spec = LoadSpec(Scenario.CONCURRENCY, duration_s=args.duration, concurrency=level)
        points.append(run_load_in_child(server.endpoint, spec, measure))
        print(row(label, points[-1]), flush=True)
    rate = 0.7 * max(p.achieved_rps for p in points)
    spec = LoadSpec(Scenario.SERVER, duration_s=args.duration, target_rps=round(rate), seed=1)
    points.append(run_load_in_child(server.endpoint, spec, measure))
    print(row(label, points[-1]), flush=True)
    return [{"config": label, **p.to_dict()} for p in points]


def run_config(args: argparse.Namespace, provider: str, path: Path, label: str) -> list[dict]:
    """One server through backend/serving/server.py's serve(), as the CLI and worker start it."""
    environment = find_environment(Path(args.venv))
    started = time.monotonic()
    with serve(path, POLICY, environment=environment, provider=ServingProvider(provider)) as server:
        return sweep(args, server, label, started)


def kept_server(args: argparse.Namespace, provider: str, path: Path, label: str, kind: str):
    """The same repository in a kept folder (serve() removes its own), instance kind replaced
    by `kind` when given: the whole Triton log comes back, ORT's own lines included."""
    folder = Path(args.models) / f"kept_{file_name(label)}_{kind or 'asis'}"
    served = plan_model(path, POLICY, provider=ServingProvider(provider))
    repository = write_repository(folder / "models", path, served)
    if kind:
        config = repository / served.name / "config.pbtxt"
        config.write_text(config.read_text().replace("KIND_GPU gpus: [ 0 ]", kind))
    return TritonServer(find_environment(Path(args.venv)), served, folder), repository


def after_failure(args: argparse.Namespace, provider: str, path: Path, label: str) -> list:
    """Keep the failed start's whole log; for CUDA, try once more with the CUDA provider on
    KIND_CPU instances (ORT still on the GPU) so a KIND_GPU-only failure is told apart."""
    server, repository = kept_server(args, provider, path, label, "")
    try:
        server.start(repository, timeout_s=120)
        server.stop()
    except UnavailableError:
        pass
    (Path(args.out) / f"failed_{file_name(label)}.log").write_text(server.log_text())
    if provider != "cuda":
        return []
    server, repository = kept_server(args, provider, path, label, "KIND_CPU")
    started = time.monotonic()
    try:
        server.start(repository, timeout_s=120)
    except UnavailableError as exc:
        print(f"{label} on KIND_CPU instances: NOT served either: {exc}", flush=True)
        return [{"config": f"{label}+KIND_CPU", "error": str(exc)}]
    try:
        return sweep(args, server, f"{label}+KIND_CPU", started)
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", required=True, help="the serving environment (tritonserver)")
    parser.add_argument("--out", required=True, help="folder for the JSON points and logs")
    parser.add_argument("--models", default="/tmp/serving_gpu_models", help="ONNX files here")
    parser.add_argument("--configs", default="cuda:fp32,cpu:fp32,cuda:fp16")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per point")
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    Path(args.models).mkdir(parents=True, exist_ok=True)
    files = cnn_files(Path(args.models))
    print(f"policy: {POLICY.label}; CNN make_cnn(channels=64, blocks=2, image=32)")
    print(HEADERS, flush=True)
    results: list[dict] = []
    chosen_search = serving_repository.CUDA_CONV_ALGO_SEARCH
    for config in args.configs.split(","):
        provider, precision, *search = config.split(":")
        if precision not in files:
            continue
        # the bench's A/B of the served CUDA model's cuDNN search; the product never changes it
        serving_repository.CUDA_CONV_ALGO_SEARCH = search[0] if search else chosen_search
        try:
            results += run_config(args, provider, files[precision], config)
        except (UnavailableError, UserError, RuntimeError) as exc:
            print(f"{config}: NOT served: {exc}", flush=True)
            results.append({"config": config, "error": str(exc)})
            results += after_failure(args, provider, files[precision], config)
        finally:
            serving_repository.CUDA_CONV_ALGO_SEARCH = chosen_search
        (out / "serving_gpu.json").write_text(json.dumps(results, indent=1))  # after each
    return 0


if __name__ == "__main__":
    sys.exit(main())
