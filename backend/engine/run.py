"""One configuration end to end: build the variant, open a session, measure, check accuracy.

run_configuration runs inside a child process (backend.queue.children) so that peak memory is the
configuration's own and a crash in a runtime only fails that configuration.
"""

from __future__ import annotations

import resource
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backend.engine.host import TelemetrySampler, describe_environment
from backend.engine.measure import measure
from backend.engine.profile import write_profile
from backend.errors import UnavailableError, UserError
from backend.results import ConfigurationResult, LatencyStats
from backend.runtimes import get_backend
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, MeasureSettings, Precision

ACCURACY_SEED = 1234


@dataclass(frozen=True)
class ConfigurationTask:
    """Everything a child needs; plain data so it crosses the process boundary."""

    source_path: str
    configuration: dict[str, Any]
    measure: dict[str, Any]
    output_dir: str  # where the optimized model is left for the parent to store
    calibration_path: str | None = None


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _reference_outputs(
    source: Path, feeds: list[dict[str, np.ndarray]], threads: int
) -> list[list[np.ndarray]]:
    """FP32 outputs of the uploaded model on the CPU: the accuracy reference for every config."""
    backend = get_backend("onnxruntime")
    options = SessionOptions(provider="cpu", optimization_level="basic", intra_op_threads=threads)
    with backend.open(source, options) as runner:
        return [runner.infer(feed) for feed in feeds]


def run_configuration(task: ConfigurationTask) -> dict[str, Any]:
    """Measure one configuration; returns ConfigurationResult.to_dict(with_samples=True)."""
    from backend.engine import accuracy, inputs, layerloss, variants

    config = Configuration.from_dict(task.configuration)
    settings = MeasureSettings(**task.measure)
    source = Path(task.source_path)
    result = ConfigurationResult(
        config_key=config.key,
        configuration=config.to_dict(),
        status="failed",
        providers_requested=[config.provider],
        environment=describe_environment(),
    )
    backend = get_backend(config.backend)
    result.environment = {
        **result.environment,
        "backend": backend.name,
        "backend_version": backend.version(),
    }
    try:
        backend.require(config.provider)
    except UnavailableError as exc:
        result.status, result.error = "unavailable", str(exc)
        return result.to_dict(with_samples=True)

    workdir = Path(tempfile.mkdtemp(prefix="optiboard-config-"))
    try:
        inputs.check_input_size(  # before anything is allocated for a huge batch or dim
            inputs.input_specs_of(source), config.batch_size, dict(config.symbolic_dims)
        )
        calibration = None
        if config.precision == Precision.INT8_STATIC and task.calibration_path:
            calibration = inputs.load_calibration_npz(
                Path(task.calibration_path),
                inputs.input_specs_of(source),
                dict(config.symbolic_dims),
            )
        variant = variants.build_variant(source, config, workdir, calibration=calibration)
        result.node_count_before = variant.node_count_before
        result.node_count_after = variant.node_count_after
        result.model_size_bytes = variant.size_bytes
        result.steps.extend(variant.steps)
        result.notes.extend(variant.notes)
        variant_ops = variants.op_histogram(onnx.load(str(variant.path), load_external_data=False))

        rss_before_session = _peak_rss_mb()
        options = SessionOptions(
            provider=config.provider,
            optimization_level=config.optimization_level,
            intra_op_threads=config.intra_op_threads,
        )
        with backend.open(variant.path, options) as runner:
            result.session_create_ms = runner.session_create_ms
            result.providers_used = list(runner.providers_used)
            specs = runner.input_specs()
            ranges = inputs.value_ranges(source)
            dims = dict(config.symbolic_dims)
            feed = inputs.random_inputs(specs, config.batch_size, dims, count=1, ranges=ranges)[0]
            gpu_index = 0 if config.provider in ("cuda", "tensorrt") else None
            with TelemetrySampler(gpu_index=gpu_index) as telemetry:
                measurement = measure(lambda: runner.infer(feed), settings)
            accuracy_feeds = inputs.random_inputs(
                specs,
                config.batch_size,
                dims,
                count=settings.accuracy_samples,
                seed=ACCURACY_SEED,
                ranges=ranges,
            )
            candidate = [runner.infer(f) for f in accuracy_feeds]
        reference = _reference_outputs(source, accuracy_feeds, config.intra_op_threads)
        result.accuracy = accuracy.compare_outputs(reference, candidate, runner.output_names())
        if config.profile:  # its own session, after the clean timing: never mixed with it
            written = write_profile(
                variant.path, source, options, feed, Path(task.output_dir), config.key
            )
            result.environment["profile_path"] = str(written)
            if config.precision == Precision.INT8_STATIC:  # where accuracy is lost, node by node
                losses = layerloss.rank_nodes(source, variant.path, accuracy_feeds)
                result.environment["accuracy_loss"] = layerloss.to_dicts(losses)
        result.first_inference_ms = measurement.first_inference_ms
        result.samples_ms = measurement.samples_ms
        result.latency = LatencyStats.from_samples(measurement.samples_ms)
        result.throughput = config.batch_size * 1000.0 / result.latency.mean
        result.stable = measurement.stable
        result.windows = measurement.window_p50_ms
        result.measure_seconds = measurement.seconds
        result.telemetry = {
            **telemetry.summary(),
            "stop_reason": measurement.stop_reason,
            "rss_before_session_mb": rss_before_session,
            "variant_op_histogram": variant_ops,
        }
        if not measurement.stable:
            result.notes.append(
                f"Unstable: window medians did not agree within "
                f"{settings.stability_tolerance:.0%} in {settings.max_seconds:.0f} s; "
                "the machine was busy or the run too short. Treat these numbers with care."
            )
        result.peak_rss_mb = _peak_rss_mb()
        if "gpu_memory_used_mb_max" in result.telemetry:
            result.gpu_memory_mb = result.telemetry["gpu_memory_used_mb_max"]
        output = Path(task.output_dir) / f"{config.key.replace('/', '_')}.onnx"
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(variant.path, output)
        result.status = "ok"
        result.environment["optimized_path"] = str(output)
        if config.precision == Precision.FP32 and config.optimization_level != "disable":
            # the graph ORT really runs after its own fusions, for download and Netron
            ort_graph = output.with_name(f"{output.stem}.ort-{config.optimization_level}.onnx")
            variants.save_ort_optimized(variant.path, config.optimization_level, ort_graph)
            result.environment["ort_optimized_path"] = str(ort_graph)
    except UnavailableError as exc:
        result.status, result.error = "unavailable", str(exc)
    except UserError as exc:
        result.status, result.error = "failed", str(exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result.to_dict(with_samples=True)
