"""One configuration measured in a limited, sandboxed child, and the order a sweep's
configurations run in.

Shared by the local worker (backend/queue/worker.py) and every cluster node
(backend/cluster/task.py), so a number measured anywhere comes from the same call. The child
opens ONNX Runtime / OpenVINO sessions on an uploaded model, so it runs under bubblewrap
(launch/sandbox.py): the model, calibration and evaluation files read-only, the output folder
(and TensorRT's cache folders) writable, no network, the GPU device nodes when the provider uses
a GPU; it returns JSON only. Without a working sandbox a configuration is refused with the
reason, as a SavedModel conversion is: untrusted models never run unsandboxed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import settings
from backend.engine.run import ConfigurationTask, run_configuration
from backend.errors import UserError, last_line
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.folders import file_inside
from backend.launch.forks import Forks
from backend.launch.limits import ChildLimits
from backend.results import PRODUCED_KEYS, ConfigurationResult, ResultStatus
from backend.runtimeenvs import DEFAULT, RuntimeEnv, ready_env
from backend.specs import GPU_PROVIDERS, Configuration, Precision, SweepSpec

log = logging.getLogger(__name__)
# what a job's fork server imports once: the measuring child's code, numpy and onnx with it
# (ONNX Runtime starts a thread when imported, so each fork imports it)
MEASURE_PRELOAD = ("backend.jobs.measuring",)


def ordered_configurations(spec: SweepSpec) -> list[Configuration]:
    """FP32 first, so every other precision can be explained against its FP32 baseline."""
    return sorted(spec.configurations(), key=lambda c: c.precision != Precision.FP32)


def measurement_binds(task: ConfigurationTask, runtime: RuntimeEnv | None = None) -> sandbox.Binds:
    """What a measurement child may read and write, and whether it gets the GPU."""
    config = task.configuration
    writable = [Path(task.output_dir)]
    env: tuple[tuple[str, str], ...] = ()
    if config.provider == "tensorrt":  # caches under the data folder: only those folders
        data = settings.data_dir().resolve()
        for folder in config.tensorrt.folders(data).values():
            folder.mkdir(parents=True, exist_ok=True)
            if folder.resolve() != data:  # never the data folder itself (it holds the database)
                writable.append(folder)
        env = ((settings.DATA_DIR.name, str(data)),)
    for folder in writable:
        folder.mkdir(parents=True, exist_ok=True)
    return sandbox.Binds.of(
        read_only=[
            task.source_path,
            task.calibration_path,
            task.evaluation_path,
            *(runtime.read_only() if runtime else ()),
        ],
        writable=writable,
        gpu=config.provider != "cpu",
        env=env,
        energy=True,
    )


def measure_in_child(
    task: ConfigurationTask,
    timeout_s: float,
    should_cancel: Callable[[], bool] | None = None,
    runtime_env: str = DEFAULT,
    forks: Forks | None = None,
) -> ConfigurationResult | None:
    """The engine on one configuration in a limited, sandboxed child: the local worker and every
    cluster node measure through this one call. The child runs under the runtime environment's
    interpreter (its result records the environment and the runtime version that ran). forks: a
    fork server of the job's (Forks(MEASURE_PRELOAD)), whose fresh fork per configuration skips
    Python's start and the engine's imports. A failed child becomes a failed result; None:
    cancelled."""
    config = task.configuration
    try:
        env = ready_env(runtime_env)
    except UserError as exc:  # this host lacks the environment: the configuration fails, says why
        return _failed(config, f"Not measured: {exc}")
    refused = sandbox.needed_for("a configuration runs the uploaded model")
    if refused:
        return _failed(config, f"Not measured: {refused}.")
    try:
        binds = measurement_binds(task, env)
    except OSError as exc:  # no output folder: this configuration fails, never the job
        return _failed(config, f"Not measured: its output folder cannot be made ({exc}).")
    outcome = (forks.call if forks else call_in_child)(
        "backend.jobs.measuring:child_measure",
        task.to_dict(),
        timeout_s=timeout_s,
        should_cancel=should_cancel,
        what=f"Configuration {config.key}",
        sandboxed=True,
        binds=binds,
        limits=ChildLimits.from_settings(gpu=config.provider in GPU_PROVIDERS),
        python=env.python,
    )
    if outcome.cancelled:
        return None
    if outcome.ok:
        return result_of_child(outcome.value, task, outcome.notes)
    error = outcome.error or "the configuration's child failed without a reason"
    if outcome.value == "error":  # a bug's traceback: the log keeps it, the result one line
        log.warning("configuration %s failed:\n%s", config.key, error)
        error = last_line(error)[:500]
    return _failed(config, error, outcome.notes)


def result_of_child(
    answer: dict[str, Any], task: ConfigurationTask, notes: list[str] | None = None
) -> ConfigurationResult:
    """The measurement child's answer as its result, when every file it names lies in the
    task's output folder; else a failed result: the worker would copy, read and delete a file
    named elsewhere (the database, the link secret), and a child that names one was taken over,
    so none of its figures stand."""
    try:
        result = ConfigurationResult.from_dict(answer, configuration=task.configuration)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        return _failed(task.configuration, f"Not stored: the child's answer does not read ({exc}).")
    result.notes.extend(notes or [])
    output_dir = Path(task.output_dir)
    for key in PRODUCED_KEYS:
        named = result.environment.get(key)
        if named is None:
            continue
        inside = file_inside(output_dir, named)
        if inside is None:
            log.warning(
                "configuration %s named %s=%r outside its output folder",
                result.config_key,
                key,
                named,
            )
            return _failed(
                result.configuration,
                f"Not stored: the measurement child named a file ({key}) outside its output "
                "folder, which only a child the model took over does; none of its figures are "
                "kept.",
            )
        result.environment[key] = str(inside)
    return result


def _failed(
    config: Configuration, error: str | None, notes: list[str] | None = None
) -> ConfigurationResult:
    return ConfigurationResult(
        config_key=config.key,
        configuration=config,
        status=ResultStatus.FAILED,
        error=error,
        notes=list(notes or []),
        providers_requested=[config.provider],
    )


# ---- child side -------------------------------------------------------------------------------


def child_measure(task: dict[str, Any]) -> dict[str, Any]:
    """run_configuration on the task as JSON (inside the sandbox): the child's one read of the
    task and one write of its result, without the configuration the parent sent and holds."""
    result = run_configuration(ConfigurationTask.from_dict(task))
    return result.to_dict(with_samples=True, with_configuration=False)
