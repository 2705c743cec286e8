"""One configuration measured in a limited child, and the order a sweep's configurations run in.

Shared by the local worker (backend/queue/worker.py) and every cluster node
(backend/cluster/task.py), so a number measured anywhere comes from the same call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from backend.engine.run import ConfigurationTask, run_configuration
from backend.launch.children import run_in_child
from backend.launch.limits import ChildLimits
from backend.results import ConfigurationResult, ResultStatus
from backend.specs import GPU_PROVIDERS, Configuration, Precision, SweepSpec

log = logging.getLogger(__name__)


def ordered_configurations(spec: SweepSpec) -> list[Configuration]:
    """FP32 first, so every other precision can be explained against its FP32 baseline."""
    return sorted(spec.configurations(), key=lambda c: c.precision != Precision.FP32)


def measure_in_child(
    task: ConfigurationTask,
    timeout_s: float,
    should_cancel: Callable[[], bool] | None = None,
) -> ConfigurationResult | None:
    """The engine on one configuration in a limited child: the local worker and every cluster
    node measure through this one call. A failed child becomes a failed result; None: cancelled.
    """
    config = Configuration.from_dict(task.configuration)
    outcome = run_in_child(
        run_configuration,
        task,
        timeout_s=timeout_s,
        should_cancel=should_cancel,
        what=f"Configuration {config.key}",
        limits=ChildLimits.from_settings(gpu=config.provider in GPU_PROVIDERS),
    )
    if outcome.cancelled:
        return None
    if outcome.ok:
        result = ConfigurationResult.from_dict(outcome.value)
        result.notes.extend(outcome.notes)
        return result
    error = outcome.error or "the configuration's child failed without a reason"
    if outcome.value == "error":  # a bug's traceback: the log keeps it, the result one line
        log.warning("configuration %s failed:\n%s", config.key, error)
        error = error_line(error)
    return ConfigurationResult(
        config_key=config.key,
        configuration=config.to_dict(),
        status=ResultStatus.FAILED,
        error=error,
        notes=list(outcome.notes),
        providers_requested=[config.provider],
    )


def error_line(text: str) -> str:
    """A traceback's last line ("RuntimeError: ..."): what went wrong, without the code path."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else text
