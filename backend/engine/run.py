"""One configuration end to end: build the variant, open a session, measure, check accuracy.

Runs in a child (backend.launch.children): a runtime's crash fails only that configuration.
Peak memory covers the session and the timed loop (PeakRss), not calibration or the reference.
"""

from __future__ import annotations

import shutil
import tempfile
import traceback
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from backend import energy
from backend.engine.measure import Measurement, PeakRss, measure
from backend.engine.profile import artifact_stem, write_profile
from backend.errors import UnavailableError, UserError, runtime_error_line
from backend.hardware import gpu_memory_used_mb, visible_gpu_index
from backend.host import TelemetrySampler, contention_note, describe_environment
from backend.knobs.serialize import from_json, to_json
from backend.launch.limits import limit_hit_by_exception
from backend.measure_settings import DEFAULT_MIN_COSINE
from backend.results import ConfigurationResult, LatencyStats, ResultStatus
from backend.runtimeenvs import current_env_name
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions, is_out_of_memory
from backend.specs import GPU_PROVIDERS, Configuration, IoMode, MeasureSettings, Precision

if TYPE_CHECKING:  # variants is imported lazily: the worker imports this module too
    from backend.engine.evaluation import EvaluationSet
    from backend.engine.variants import Variant

ACCURACY_SEED = 1234


@dataclass(frozen=True)
class ConfigurationTask:
    """Everything a child needs, typed; to_dict/from_dict (the one serializer) carry it across
    the process boundary, so neither side handles the configuration as a dict."""

    source_path: str
    configuration: Configuration
    measure: MeasureSettings
    output_dir: str  # where the optimized model is left for the parent to store
    calibration_path: str | None = None
    evaluation_path: str | None = None  # the user's evaluation .npz, scored for every config
    evaluation_sha256: str | None = None
    evaluation_name: str | None = None  # the name it was uploaded under, for the result's note
    min_cosine: float = DEFAULT_MIN_COSINE  # below it against FP32 outputs are wrong (accuracy)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConfigurationTask:
        return from_json(cls, data)


def _reference_outputs(
    source: Path, feeds: list[dict[str, np.ndarray]], threads: int
) -> list[list[np.ndarray]]:
    """FP32 outputs of the uploaded model on the CPU: the accuracy reference for every config."""
    runtime = get_runtime("onnxruntime")
    options = SessionOptions.plain(optimization_level="basic", intra_op_threads=threads)
    with runtime.open(source, options) as runner:
        wanted = {spec["name"]: spec["dtype"] for spec in runner.input_specs()}
        # FP16 with float16 I/O feeds float16 arrays; the FP32 source takes them as float32
        return [
            runner.infer({k: v.astype(wanted.get(k, v.dtype)) for k, v in feed.items()})
            for feed in feeds
        ]


@dataclass
class _Session:
    """What the session + timed loop step hands back to the steps that record it."""

    measurement: Measurement
    telemetry: dict[str, Any]
    peak: PeakRss
    rss_before_session_mb: float
    accuracy_feeds: list[dict[str, np.ndarray]]
    candidate: list[list[np.ndarray]]
    output_names: list[str]
    evaluation: list[list[np.ndarray]] = field(default_factory=list)  # per evaluation batch
    energy: energy.EnergyReport | None = None


def _build(
    task: ConfigurationTask, config: Configuration, workdir: Path, result: ConfigurationResult
) -> Variant:
    """Build the variant (calibrating static INT8 with the task's .npz when there is one)."""
    from backend.engine import inputs, npzfeeds, tensorsize, variants

    source = Path(task.source_path)
    dims = dict(config.symbolic_dims)
    inputs.check_input_size(inputs.input_specs_of(source), config.batch_size, dims)  # first
    if config.provider in GPU_PROVIDERS:  # 32-bit kernel indexing, before any session opens
        tensorsize.check_gpu_tensor_sizes(source, config.batch_size, dims, config.provider)
    calibration = None
    if config.precision == Precision.INT8_STATIC and task.calibration_path:
        calibration = npzfeeds.load_calibration_npz(
            Path(task.calibration_path), inputs.input_specs_of(source), dict(config.symbolic_dims)
        )
    variant = variants.build_variant(source, config, workdir, calibration=calibration)
    result.node_count_before = variant.node_count_before
    result.node_count_after = variant.node_count_after
    result.model_size_bytes = variant.size_bytes
    result.steps.extend(variant.steps)
    result.notes.extend(variant.notes)
    return variant


def _run_session(
    source: Path,
    variant_path: Path,
    config: Configuration,
    settings: MeasureSettings,
    result: ConfigurationResult,
    eval_feeds: list[dict[str, np.ndarray]],
) -> _Session:
    """Open the session, time the loop, run the accuracy (and evaluation) inputs; peak RSS spans
    the first two."""
    from backend.engine import inputs

    runtime = get_runtime(config.backend)
    peak = PeakRss()
    rss_before_session = peak.start().stop()
    peak.start()  # the peak of what follows: session creation and the timed loop
    options = SessionOptions(config)
    with runtime.open(variant_path, options) as runner:
        result.session_create_ms = runner.session_create_ms
        result.providers_used = list(runner.providers_used)
        result.runtime_facts = dict(runner.facts)  # what the runtime says it really runs
        result.notes.extend(runner.notes)
        specs = runner.input_specs()
        ranges = inputs.value_ranges(source)
        dims = dict(config.symbolic_dims)
        feed = inputs.random_inputs(specs, config.batch_size, dims, count=1, ranges=ranges)[0]
        gpu_index = visible_gpu_index() if config.provider in ("cuda", "tensorrt") else None
        infer = runner.infer  # host arrays in and out: the copies are timed
        call = partial(runner.infer, feed)
        if config.io_mode == IoMode.DEVICE:  # inputs and outputs stay on the GPU
            bound = runner.bind_on_device(feed)
            call, infer = bound.run, bound.infer
        gpus = [gpu_index] if gpu_index is not None else []
        with energy.meter_for(config.provider, gpus) as meter:
            idle = meter.idle(energy.IDLE_SECONDS)  # apart, before the loop: devices at rest
            with TelemetrySampler(gpu_index=gpu_index) as telemetry:
                measurement = measure(call, settings, meter)
            energy_report = measurement.energy(meter, idle, config.batch_size)
        peak.stop()
        if gpu_index is not None:  # ORT's arena keeps what the loop needed: read it before close
            result.telemetry["gpu_memory_after_loop_mb"] = gpu_memory_used_mb(gpu_index)
        feeds = inputs.random_inputs(
            specs, config.batch_size, dims, settings.accuracy_samples, ACCURACY_SEED, ranges
        )
        candidate = [infer(f) for f in feeds]
        result.layer_profile = runner.layer_profile()
        names = list(runner.output_names())
        # the bound buffers again when device-resident: a captured CUDA graph replays only those
        evaluated = [infer(f) for f in eval_feeds]
    summary = telemetry.summary()
    parts = (measurement, summary, peak, rss_before_session, feeds, candidate, names, evaluated)
    return _Session(*parts, energy=energy_report)


def _evaluation_batches(
    task: ConfigurationTask, config: Configuration
) -> tuple[EvaluationSet | None, list[tuple[dict[str, np.ndarray], int]]]:
    """The user's evaluation set joined into batches of this configuration's size."""
    from backend.engine import evaluation, inputs

    if not task.evaluation_path:
        return None, []
    eval_set = evaluation.read_evaluation_npz(
        Path(task.evaluation_path),
        inputs.input_specs_of(Path(task.source_path)),
        dict(config.symbolic_dims),
    )
    return eval_set, evaluation.batches(eval_set, config.batch_size)


def _score_evaluation(
    task: ConfigurationTask,
    config: Configuration,
    eval_set: EvaluationSet,
    batches: list[tuple[dict[str, np.ndarray], int]],
    session: _Session,
    result: ConfigurationResult,
) -> None:
    """Task accuracy on the evaluation set next to agreement with FP32 on the same inputs."""
    from backend.engine import evaluation

    reference = _reference_outputs(
        Path(task.source_path), [feed for feed, _ in batches], config.intra_op_threads
    )
    report = evaluation.evaluate(
        eval_set,
        task.evaluation_sha256 or "",
        [rows for _, rows in batches],
        reference,
        session.evaluation,
        session.output_names,
    )
    result.evaluation = report
    result.notes.append(evaluation.evaluation_line(report, task.evaluation_name))


def _record(
    result: ConfigurationResult,
    session: _Session,
    config: Configuration,
    settings: MeasureSettings,
    variant_ops: dict[str, int],
) -> None:
    """Latency, throughput, stability, memory and telemetry from the session step."""
    measurement = session.measurement
    result.first_inference_ms = measurement.first_inference_ms
    result.samples_ms = measurement.samples_ms
    result.latency = LatencyStats.from_samples(measurement.samples_ms)
    result.throughput = config.batch_size * 1000.0 / result.latency.mean
    result.stable = measurement.stable
    result.windows = measurement.window_p50_ms
    result.measure_seconds = measurement.seconds
    result.telemetry = {
        **result.telemetry,
        **session.telemetry,
        "stop_reason": measurement.stop_reason,
        "rss_before_session_mb": session.rss_before_session_mb,
        "variant_op_histogram": variant_ops,
    }
    if not measurement.stable:
        why = (  # the loop's own reason where the windows agreed but the calls stalled
            measurement.stop_reason
            if "stalled" in measurement.stop_reason
            else f"window medians did not agree within {settings.stability_tolerance:.0%} "
            f"in {settings.max_seconds:.0f} s"
        )
        result.notes.append(
            f"Unstable: {why}; the machine was busy or the run too short. Treat these numbers "
            "with care."
        )
    busy = contention_note(result.telemetry)  # why a rerun may differ, with its figures
    if busy:
        result.notes.append(busy)
    result.energy = session.energy
    result.peak_rss_mb = session.peak.peak_mb
    result.peak_rss_scope = session.peak.scope
    readings = [
        result.telemetry.get(k) for k in ("gpu_memory_used_mb_max", "gpu_memory_after_loop_mb")
    ]
    readings = [r for r in readings if r is not None]
    if readings:  # NVML's whole-device figure: what this configuration's process held at most
        result.gpu_memory_mb = max(readings)


def _evidence(
    task: ConfigurationTask,
    config: Configuration,
    variant_path: Path,
    session: _Session,
    result: ConfigurationResult,
) -> None:
    """The per-node profile, and for static INT8 where accuracy is lost, left for the parent."""
    from backend.engine import inputs, layerloss

    source = Path(task.source_path)
    options = SessionOptions(config)
    out = Path(task.output_dir)
    feeds = session.accuracy_feeds or inputs.random_inputs(  # accuracy_samples may be 0
        inputs.input_specs_of(source),
        config.batch_size,
        dict(config.symbolic_dims),
        ranges=inputs.value_ranges(source),
    )
    profiler = None
    if config.backend == "openvino":  # its performance counters, not ONNX Runtime's profiler
        from backend.engine.ovprofile import profile_openvino as profiler
    written = write_profile(variant_path, source, options, feeds[0], out, config.key, profiler)
    result.environment["profile_path"] = str(written)
    if config.precision == Precision.INT8_STATIC and session.accuracy_feeds:
        losses = layerloss.rank_nodes(source, variant_path, session.accuracy_feeds)
        result.environment["accuracy_loss"] = layerloss.to_dicts(losses)


def _keep_outputs(
    task: ConfigurationTask, config: Configuration, variant_path: Path, result: ConfigurationResult
) -> None:
    """Leave the built graph (and ORT's optimized FP32 graph) where the parent stores them."""
    from backend.engine import variants

    output = Path(task.output_dir) / f"{artifact_stem(config.key)}.onnx"  # keys can be long
    output.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(variant_path, output)
    result.environment["optimized_path"] = str(output)
    ort_graph_wanted = config.backend == "onnxruntime" and config.precision == Precision.FP32
    if ort_graph_wanted and config.optimization_level != "disable":  # ORT's fused graph too
        ort_graph = output.with_name(f"{output.stem}.ort-{config.optimization_level}.onnx")
        variants.save_ort_optimized(variant_path, config.optimization_level, ort_graph)
        result.environment["ort_optimized_path"] = str(ort_graph)


def _static_cost(source: Path, config: Configuration, result: ConfigurationResult) -> None:
    """FLOPs per sample of the source graph (static count), for FLOP/s and distance to peak."""
    from backend.engine.inputs import input_specs_of
    from backend.models.cost import model_cost, resnet50_like

    try:
        cost = model_cost(source, config.batch_size, dict(config.symbolic_dims))
    except (UserError, onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        result.notes.append(f"No FLOP count for this model: {str(exc).splitlines()[0][:200]}")
        return
    except MemoryError:  # shape inference at these dims (cost.py no longer hides it)
        result.notes.append("No FLOP count for this model: its shape inference ran out of memory.")
        return
    result.telemetry["flops_per_sample"] = cost.flops_per_sample
    if cost.uncounted_ops:
        result.telemetry["flops_uncounted_ops"] = list(cost.uncounted_ops)
    convs = sum(1 for node in cost.nodes if node.op_type == "Conv")
    image = next((list(spec["shape"]) for spec in input_specs_of(source)), [])
    result.telemetry["resnet50_like"] = resnet50_like(cost.flops_per_sample, convs, image)


def _runtime_failure(exc: Exception, config: Configuration, result: ConfigurationResult) -> None:
    """A failed result with one line: GPU out of memory, else the runtime's words (the traceback
    goes to the child's log only); a hit child limit re-raises and names itself (launch/limits)."""
    gpu_full = config.provider in GPU_PROVIDERS and is_out_of_memory(exc)
    if limit_hit_by_exception(exc) and not gpu_full:
        raise exc
    result.status = ResultStatus.FAILED
    if gpu_full:
        result.error = f"Out of GPU memory at batch {config.batch_size}: {runtime_error_line(exc)}"
        result.telemetry["out_of_memory"] = True  # a knee search stops here
    else:
        traceback.print_exc()
        result.error = f"The runtime failed: {runtime_error_line(exc)}"


def run_configuration(task: ConfigurationTask) -> ConfigurationResult:
    """Measure one configuration (the child's side: jobs/measuring.child_measure serializes it)."""
    from backend.engine import accuracy, variants

    config, settings = task.configuration, task.measure
    source = Path(task.source_path)
    runtime = get_runtime(config.backend)
    result = ConfigurationResult(
        config_key=config.key,
        configuration=config,
        status=ResultStatus.FAILED,
        providers_requested=[config.provider],
        environment={
            **describe_environment(),
            "backend": runtime.name,  # stored keys: the runtime under its first name
            "backend_version": runtime.version(),
            "runtime_env": current_env_name(),
        },
    )
    workdir = Path(tempfile.mkdtemp(prefix="optiboard-config-"))
    try:
        runtime.require(config.provider)
        reason = runtime.precision_unavailable(config.precision, config.provider)
        if reason:
            raise UnavailableError(reason)
        variant = _build(task, config, workdir, result)
        variant_ops = variants.op_histogram(onnx.load(str(variant.path), load_external_data=False))
        eval_set, batches = _evaluation_batches(task, config)
        session = _run_session(
            source, variant.path, config, settings, result, [f for f, _ in batches]
        )
        reference = _reference_outputs(source, session.accuracy_feeds, config.intra_op_threads)
        result.accuracy = accuracy.compare_outputs(
            reference, session.candidate, session.output_names
        )
        if eval_set is not None:
            _score_evaluation(task, config, eval_set, batches, session, result)
        _record(result, session, config, settings, variant_ops)
        if config.profile:  # its own session, after the clean timing: never mixed with it
            _evidence(task, config, variant.path, session, result)
        _keep_outputs(task, config, variant.path, result)
        _static_cost(source, config, result)
        accuracy.judge(result, task.min_cosine)  # ok, or wrong outputs with the numbers why
    except UnavailableError as exc:
        result.status, result.error = ResultStatus.UNAVAILABLE, str(exc)
    except UserError as exc:
        result.status, result.error = ResultStatus.FAILED, str(exc)
    except Exception as exc:
        _runtime_failure(exc, config, result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result
