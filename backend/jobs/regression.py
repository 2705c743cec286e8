"""The regression kind: each model's configurations on environment A and B, timed interleaved,
judged.

For each model, one after another, and each of its configurations two dialog children start
through the one launcher (backend/launch/dialog.py), each under its environment's interpreter
(backend/runtimeenvs.py) and inside the sandbox; each builds the variant and keeps its
session open. The parent then asks them for one timed window in turn, A B A B ...
(backend/engine/interleave.py interleaved_windows), so drift of the host lands on both. That is
done `processes` times, one pair after another, sharing the rounds and the time cap: a process
has its own offset of a few percent for its whole life, and only several a side let the interval
see it (backend/reporting/regression.py process_ratio). The first pair is then asked for their
outputs on the same seeded inputs (B against A: cosine, max abs) and their per-node profiles.
Both sides are stored as ordinary results (every process's samples one after another, with each
process's count, the profile, environment and the runtime version that really ran); B's carries
the comparison: the bootstrap interval of the ratio of medians with each process's median, the
verdict, the accuracy against A and the per-op profile diff. At the end
the job's log says each model's verdict in one line and, for several models, an overall line
(backend/jobs/regressview.py summary_lines).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import settings
from backend.engine import accuracy
from backend.engine.interleave import Interleaved, Window, interleaved_windows
from backend.engine.npzfeeds import check_npz_arrays
from backend.engine.profile import read_profile
from backend.engine.side import SideTask, read_outputs
from backend.errors import UserError
from backend.host import own_cpu_s
from backend.jobs.context import JobContext, JobOutcome
from backend.jobs.regressspec import SIDES, RegressionSpec
from backend.jobs.regressview import pair_rows, summary_lines
from backend.launch import sandbox
from backend.launch.dialog import Dialog, DialogFailed, dialog
from backend.launch.folders import file_inside, owned_folder
from backend.launch.limits import ChildLimits
from backend.records import JobKind, stored_results
from backend.reporting import regression as stats
from backend.results import ConfigurationResult, LatencyStats, ResultStatus
from backend.runtimeenvs import get_env, pins_digest, ready_env
from backend.specs import Configuration
from storage.repo import models as model_store
from storage.states import JobState


@dataclass
class PairRun:
    """What one configuration's two sides left: facts, timing (one loop per pair of processes),
    outputs and profiles (facts, first inference, outputs and profiles: the first pair's)."""

    facts: dict[str, dict[str, Any]]
    first_ms: dict[str, float]
    timings: list[Interleaved]
    outputs: dict[str, Path]
    profiles: dict[str, Path]

    @property
    def timing(self) -> Interleaved:
        """Every process's loop read as one (samples one process after another)."""
        return Interleaved.joined(self.timings)

    def by_process(self, side: str) -> list[list[float]]:
        """One side's samples, one list per process."""
        return [loop.timed[side].samples_ms for loop in self.timings]


def _binds(source: Path, env_root: tuple[Path, ...], out: Path) -> sandbox.Binds:
    return sandbox.Binds.of(read_only=[source, *env_root], writable=[out])


def _open_sides(
    spec: RegressionSpec,
    config: Configuration,
    sources: dict[str, Path],
    out: Path,
    stack: ExitStack,
    should_cancel: Callable[[], bool] | None,
    process: int = 0,
) -> dict[str, Dialog]:
    """Start both sides (A first), each under its environment's interpreter, in the sandbox;
    process: which pair of the check's processes (each its own folder: a, b, then a2, b2 ...)."""
    envs = {side: ready_env(spec.env_of(side)) for side in SIDES}  # both, before any child
    opened = {}
    for side, env in envs.items():
        folder = out / (f"{side}{process + 1}" if process else side)
        folder.mkdir(parents=True, exist_ok=True)
        task = SideTask(
            source_path=str(sources[side]),
            configuration=spec.side_configuration(config, side),
            measure=spec.measure,
            output_dir=str(folder),
            env=env.name,
        ).to_dict()
        opened[side] = stack.enter_context(
            dialog(
                "backend.engine.side:open_side",
                task,
                what=f"Side {side.upper()} ({env.name}) of {config.key}"
                + (f", process {process + 1}" if process else ""),
                python=env.python,
                sandboxed=True,
                binds=_binds(sources[side], env.read_only(), folder),
                limits=ChildLimits.from_settings(),
                should_cancel=should_cancel,
            )
        )
    return opened


def run_pair(
    spec: RegressionSpec,
    config: Configuration,
    sources: dict[str, Path],
    out: Path,
    should_cancel: Callable[[], bool] | None = None,
) -> PairRun:
    """Both sides of one configuration in spec.processes pairs of processes, one pair after
    another, each pair timed interleaved for its share of the rounds and the time cap;
    DialogFailed/UserError say why not."""
    timeout = spec.measure.max_seconds + settings.CONFIG_TIMEOUT_S.get()
    run = PairRun({}, {}, [], {}, {})
    for process in range(spec.processes):
        if process and should_cancel is not None and should_cancel():
            raise DialogFailed("cancelled")
        with ExitStack() as stack:
            sides = _open_sides(spec, config, sources, out, stack, should_cancel, process)
            if process == 0:
                run.facts = {s: d.ask({"op": "facts"}, timeout) for s, d in sides.items()}
            warm = {s: d.ask({"op": "warm"}, timeout) for s, d in sides.items()}
            run.timings.append(_timed(spec, sides, timeout))
            if process == 0:  # the first pair's: session facts, outputs and profiles
                run.first_ms = {s: w["first_inference_ms"] for s, w in warm.items()}
                run.outputs = {s: Path(d.ask({"op": "outputs"}, timeout)) for s, d in sides.items()}
                if spec.profile:
                    run.profiles = {
                        s: Path(d.ask({"op": "profile"}, timeout)) for s, d in sides.items()
                    }
    # checked once every side has ended: the worker reads, stores and deletes these files
    run.outputs = {s: checked_outputs(out / s, p) for s, p in run.outputs.items()}
    run.profiles = {s: _inside(out / s, p) for s, p in run.profiles.items()}
    return run


def _inside(folder: Path, named: Path) -> Path:
    """The file a side named, when it lies in that side's folder (launch/folders.file_inside);
    DialogFailed else: only a side the model took over names another."""
    inside = file_inside(folder, str(named))
    if inside is None:
        raise DialogFailed(
            f"A side named a file outside its folder ({named.name!r}); only a side the model "
            "took over does, so nothing it measured is kept"
        )
    return inside


def checked_outputs(folder: Path, named: Path) -> Path:
    """A side's outputs .npz, inside its folder and with headers that do not lie (sizes, no
    object arrays, under OPTIBOARD_MAX_INPUT_MB): the worker loads it whole to compare."""
    path = _inside(folder, named)
    try:
        check_npz_arrays(path)
    except UserError as exc:
        raise DialogFailed(f"A side's outputs were not read: {exc}") from None
    return path


def _timed(spec: RegressionSpec, sides: dict[str, Dialog], timeout: float) -> Interleaved:
    """One pair of processes timed interleaved, A B A B, for its share of rounds and time."""
    cpu = dict.fromkeys(SIDES, 0.0)

    def window(side: str) -> Window:
        def call(deadline: float) -> list[float]:
            answer = sides[side].ask({"op": "window", "deadline": deadline}, timeout)
            cpu[side] = answer["cpu_s"]  # the child's CPU time so far: its own, not others'
            return answer["samples_ms"]

        return call

    return interleaved_windows(
        {s: window(s) for s in SIDES},
        spec.process_measure(),
        own_cpu=lambda: own_cpu_s() + sum(cpu.values()),
        min_rounds=spec.process_rounds(),
        keep_all=True,
    )


def side_result(
    spec: RegressionSpec, config: Configuration, side: str, run: PairRun, model: int
) -> ConfigurationResult:
    """One side as an ordinary stored result: its samples, what ran (and which model: the
    check's `model`, or B's own upload), its profile."""
    facts = dict(run.facts[side])
    timed = run.timing.timed[side]
    env = get_env(spec.env_of(side))
    configuration = spec.side_configuration(config, side)
    result = ConfigurationResult(
        config_key=spec.key_of(side, model, config),
        configuration=configuration,
        status=ResultStatus.OK,
        providers_requested=[config.provider],
        providers_used=facts.pop("providers_used"),
        runtime_facts=facts.pop("runtime_facts"),
        session_create_ms=facts.pop("session_create_ms"),
        first_inference_ms=run.first_ms[side],
        samples_ms=timed.samples_ms,
        latency=LatencyStats.from_samples(timed.samples_ms),
        stable=timed.stable,
        windows=timed.window_p50_ms,
        steps=facts.pop("steps"),
        notes=facts.pop("notes"),
        model_size_bytes=facts.pop("model_size_bytes"),
    )
    result.throughput = config.batch_size * 1000.0 / result.latency.mean  # type: ignore[union-attr]
    facts.pop("output_names", None)
    pins = {"pins": env.pinned, "pins_digest": pins_digest(env)}
    result.environment = {**facts, "side": side, **pins}
    # the samples are every process's, one after another: these counts cut them back apart
    result.environment["process_samples"] = [len(p) for p in run.by_process(side)]
    result.environment["model_id"] = spec.model_of(side, model)
    result.notes.append(run.timing.verdict())
    if side in run.profiles:
        result.environment["profile_path"] = str(run.profiles[side])
    return result


def compare_sides(spec: RegressionSpec, run: PairRun) -> dict[str, Any]:
    """B against A: the interval (with each process's median: interval.process_medians_*),
    the verdict, outputs and the per-op profile diff."""
    interval = stats.process_ratio(
        run.by_process("a"),
        run.by_process("b"),
        spec.resamples,
        spec.confidence,
        spec.seed,
        spec.processes,
    )
    verdict = stats.verdict(interval, spec.min_change)
    report: dict[str, Any] = {
        "env_a": spec.env_a,
        "env_b": spec.env_b,
        "version_a": run.facts["a"]["backend_version"],
        "version_b": run.facts["b"]["backend_version"],
        "interval": asdict(interval),
        "verdict": verdict,
        "line": stats.verdict_line(interval, verdict, spec.env_a, spec.env_b, spec.min_change),
        "min_change": spec.min_change,
        "timing": run.timing.verdict(),
    }
    names = run.facts["a"].get("output_names")
    versus = accuracy.compare_outputs(
        read_outputs(run.outputs["a"]), read_outputs(run.outputs["b"]), names
    )
    report["accuracy_vs_a"] = asdict(versus)
    profiles = {side: read_profile(path) for side, path in run.profiles.items()}
    if profiles and None not in profiles.values():
        diff = stats.profile_diff(profiles["a"], profiles["b"])  # type: ignore[arg-type]
        report["profile_diff"] = stats.diff_to_dict(diff)
    return report


def _failed(key: str, config: Configuration, error: str) -> ConfigurationResult:
    return ConfigurationResult(
        config_key=key,
        configuration=config,
        status=ResultStatus.FAILED,
        error=error,
        providers_requested=[config.provider],
    )


class RegressionRun:
    """One regression check on this host: its models, and each one's configurations, one after
    another."""

    def __init__(self, context: JobContext) -> None:
        self.context = context
        self.spec = RegressionSpec.from_dict(context.job.spec)

    def sources(self, model: int) -> dict[str, Path]:
        """Each side's model file: `model` on A, and on B too unless B runs its own upload."""
        artifacts = self.context.artifacts
        return {
            side: artifacts.path_for(model_store.model_file(self.spec.model_of(side, model)).sha256)
            for side in SIDES
        }

    def run(self) -> JobOutcome:
        context, spec = self.context, self.spec
        done = {r.config_key for r in stored_results(context.job.id)}
        state = sandbox.available()
        models = spec.model_ids(context.job.model_id)
        for model in models:
            sources = self.sources(model)
            for config in spec.configurations():
                if context.should_stop():
                    return self.conclude()
                keys = {s: spec.key_of(s, model, config) for s in SIDES}
                if all(k in done for k in keys.values()):
                    continue
                which = f"model {model} " if len(models) > 1 else ""
                versus = f"{spec.env_a} against {spec.env_b}"
                context.log(f"{which}{config.label}: {versus}, interleaved")
                self.measure(config, sources, keys, state, model)
        rows = pair_rows(spec, stored_results(context.job.id), context.job.model_id)
        for line in summary_lines(spec, rows, context.job.model_id):
            context.log(line)
        return self.conclude()

    def measure(
        self,
        config: Configuration,
        sources: dict[str, Path],
        keys: dict[str, str],
        state: sandbox.Availability,
        model: int,
    ) -> None:
        """Store both sides' results, B's with the comparison, or two failed ones saying why."""
        if not state.ok:
            why = (
                "Not measured: a regression check runs uploads only in the sandbox, "
                f"and {state.reason}."
            )
            for side in SIDES:
                self.context.store_result(_failed(keys[side], config, why))
            return
        with owned_folder("regress") as tmp:  # swept if the worker is SIGKILLed
            try:
                run = run_pair(self.spec, config, sources, tmp, self.context.should_stop)
            except (DialogFailed, UserError) as exc:
                if not self.context.should_stop():
                    for side in SIDES:
                        self.context.store_result(_failed(keys[side], config, str(exc)))
                return
            results = [side_result(self.spec, config, s, run, model) for s in SIDES]
            report = compare_sides(self.spec, run)
            results[1].environment["regression"] = report
            results[1].notes.insert(0, report["line"])
            self.context.log(report["line"])
            # the files are copied into the store by store_result before tmp goes
            for result in results:
                self.context.store_result(result)

    def conclude(self) -> JobOutcome:
        stopped = self.context.interrupted()
        if stopped is not None:
            return stopped
        results = stored_results(self.context.job.id)
        failed = [r for r in results if not r.ok]
        if results and len(failed) == len(results):
            error = f"every side failed; first: {failed[0].error}"
            return self.context.finish(JobState.FAILED, error)
        return self.context.finish(JobState.SUCCEEDED)


class RegressionKind:
    """A regression check between two runtime environments, on this host only."""

    name = JobKind.REGRESSION.value
    launchers = ("local",)

    def run(self, context: JobContext) -> JobOutcome:
        return RegressionRun(context).run()

    def conclude(self, context: JobContext) -> JobOutcome:
        return RegressionRun(context).conclude()
