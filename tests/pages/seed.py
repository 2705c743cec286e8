"""Real rows for page tests and the render bench: real ONNX files, real SQLite, real payloads."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from streamlit.testing.v1 import AppTest

from backend.results import AccuracyReport, ConfigurationResult, LatencyStats, ResultStatus
from backend.specs import Configuration, Precision, SweepSpec
from storage.artifacts import ArtifactStore
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo.jobs import JobRow
from storage.repo.models import ModelRow, NewArtifact
from storage.repo.results import ResultRow
from storage.states import JobState


def _dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def add_model(path: Path, name: str | None = None) -> ModelRow:
    """Store an ONNX file as an uploaded model, with the metadata ingestion would record."""
    model = onnx.load(str(path))
    stored = ArtifactStore().put_file(path)
    params = sum(int(np.prod(init.dims)) for init in model.graph.initializer)
    init_names = {init.name for init in model.graph.initializer}
    elem = onnx.helper.tensor_dtype_to_np_dtype
    metadata = {
        "opset": model.opset_import[0].version,
        "ir_version": model.ir_version,
        "producer": model.producer_name or "tests",
        "inputs": [
            {"name": i.name, "dtype": str(elem(i.type.tensor_type.elem_type)), "shape": _dims(i)}
            for i in model.graph.input
            if i.name not in init_names
        ],
        "outputs": [
            {"name": o.name, "dtype": str(elem(o.type.tensor_type.elem_type)), "shape": _dims(o)}
            for o in model.graph.output
        ],
        "op_histogram": dict(Counter(node.op_type for node in model.graph.node)),
        "parameter_count": params,
        "node_count": len(model.graph.node),
    }
    return model_store.create_model(
        name=name or path.stem,
        sha256=stored.sha256,
        format="onnx",
        size_bytes=stored.size_bytes,
        metadata=metadata,
        artifacts=[NewArtifact("original", stored.sha256, stored.size_bytes, path.name)],
    )


def add_job(model_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    return job_store.create_job(
        model_id, spec.to_dict(), total=len(spec.configurations()), label=label
    )


def add_result(
    job_id: int,
    config: Configuration,
    samples_ms: np.ndarray,
    accuracy: AccuracyReport | None = None,
    status: ResultStatus = ResultStatus.OK,
    error: str | None = None,
) -> ResultRow:
    """A result shaped exactly as the worker writes it, from real latency samples."""
    ok = status == ResultStatus.OK
    stats = LatencyStats.from_samples(samples_ms) if ok else None
    result = ConfigurationResult(
        config_key=config.key,
        configuration=config.to_dict(),
        status=status,
        error=error,
        providers_requested=["CPUExecutionProvider"],
        providers_used=["CPUExecutionProvider"] if ok else [],
        session_create_ms=12.5 if ok else None,
        first_inference_ms=float(samples_ms[0]) * 3 if ok else None,
        latency=stats,
        throughput=config.batch_size * 1000.0 / stats.mean if stats else None,
        stable=True if ok else None,
        windows=[stats.p50] * 3 if stats else [],
        measure_seconds=float(np.sum(samples_ms)) / 1000 if ok else None,
        peak_rss_mb=180.0 + config.batch_size * 0.5 if ok else None,
        peak_rss_scope="session + timed loop" if ok else None,
        model_size_bytes=4096 if ok else None,
        node_count_before=6,
        node_count_after=6,
        accuracy=accuracy,
        notes=["INT8 kernels ran with VNNI"] if config.precision == Precision.INT8_STATIC else [],
        environment={"onnxruntime": "1.32.0"},
    )
    return result_store.save_result(
        job_id, result.to_dict(), [float(x) for x in samples_ms] if ok else []
    )


def finished_sweep(
    model_id: int,
    precisions: tuple[Precision, ...] = (Precision.FP32, Precision.INT8_STATIC),
    batch_sizes: tuple[int, ...] = (1, 4),
    samples: int = 200,
    seed: int = 0,
    label: str | None = "seeded sweep",
) -> tuple[JobRow, list[ResultRow]]:
    """A succeeded job with one realistic result per configuration (INT8 faster, less exact)."""
    rng = np.random.default_rng(seed)
    spec = SweepSpec(precisions=precisions, batch_sizes=batch_sizes)
    job = add_job(model_id, spec, label=label)
    claimed = job_store.claim_job("seed-worker", 60)
    assert claimed is not None and claimed.id == job.id, "seed finished sweeps before queued jobs"
    rows = []
    for config in spec.configurations():
        base = 0.4 * config.batch_size**0.8
        speed = {Precision.FP32: 1.0, Precision.FP16: 0.9, Precision.INT8_DYNAMIC: 0.7}
        factor = speed.get(config.precision, 0.5)
        draws = rng.gamma(20.0, base * factor / 20.0, samples)
        exact = config.precision == Precision.FP32
        accuracy = AccuracyReport(
            max_abs_error=0.0 if exact else float(rng.uniform(1e-3, 2e-2)),
            mean_rel_error=0.0 if exact else float(rng.uniform(1e-3, 1e-2)),
            cosine_similarity=1.0 if exact else 0.999,
            top1_agreement=1.0 if exact else 0.98,
            compared_outputs=1,
            samples=4,
        )
        rows.append(add_result(job.id, config, draws, accuracy))
    job_store.finish_job(job.id, JobState.SUCCEEDED)
    return job_store.get_job(job.id), rows


ROOT = Path(__file__).resolve().parents[2]


ACCOUNT_PASSWORD = "correct horse battery"


def make_account(role: str) -> str:
    """A real account of that role, named after it (made on first use); returns its name."""
    from backend.auth import accounts
    from backend.auth.cli import cli_principal

    if accounts.principal_for(role) is None:
        accounts.add_account(cli_principal(), role, role, ACCOUNT_PASSWORD)
    return role


def sign_in_as(at: AppTest, role: str) -> AppTest:
    """A session signed in to a real account of that role, as the sign-in form leaves it."""
    from pages.access import ACCOUNT_KEY

    at.session_state[ACCOUNT_KEY] = make_account(role)
    return at


def open_page(page: str, role: str | None = "admin", **query: object) -> AppTest:
    """Run app.py (router, gate, sidebar and all) on one page, with the given URL query.

    The session is signed in with that role; role=None leaves it signed out.
    """
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    if role is not None:
        sign_in_as(at, role)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page(f"pages/{page}.py")
    return at.run()


def texts(at: AppTest) -> str:
    """Everything a user reads on the page, in one string, for `in` checks."""
    parts = [e.value for e in at.markdown] + [e.value for e in at.caption]
    parts += [e.value for e in at.title] + [e.value for e in at.subheader]
    for kind in ("info", "warning", "error", "success"):
        parts += [e.value for e in getattr(at, kind)]
    parts += [f"{m.label}={m.value}" for m in at.metric]
    return "\n".join(str(p) for p in parts)
