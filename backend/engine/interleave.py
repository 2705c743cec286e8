"""Several candidates timed in turn, window by window, so a busy spell hits them all alike.

Timing candidates one after another lets a change in the machine's load (another job, a
thermal step) land on one of them only and pick the winner. Here every round runs one window of
each candidate (warmed up once, first), and the loop stops when each candidate's last
`stable_windows` window medians agree within the tolerance (the sweep's rule,
backend.engine.measure) or at the time cap, which is max_seconds per candidate. Rounds stay
paired: the round the time cap cut short (a window that ended past the deadline, or began after
it and timed a single call) is dropped for every candidate, unless it is the only round. A
difference between two candidates smaller than the spread of their own window medians is noise,
not a winner.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from backend.engine.measure import timed_window, windows_agree
from backend.host import HostWatch, contention_note
from backend.specs import MeasureSettings

Window = Callable[[float], list[float]]  # one timed window (ms per call) before the deadline


@dataclass
class Timed:
    """One candidate's kept windows: their samples and every window's median."""

    samples_ms: list[float] = field(default_factory=list)
    window_p50_ms: list[float] = field(default_factory=list)
    stable: bool = False

    @property
    def p50_ms(self) -> float:
        return float(np.median(self.samples_ms))

    def spread(self, windows: int) -> float:
        """Largest relative distance of the last `windows` window medians from their mean."""
        recent = self.window_p50_ms[-windows:]
        mean = sum(recent) / len(recent)
        return max(abs(v - mean) for v in recent) / mean if mean > 0 else float("inf")


@dataclass
class Interleaved:
    """Every candidate's timing from one interleaved loop, and how stable it was."""

    timed: dict[str, Timed]
    rounds: int
    settings: MeasureSettings
    contention: str | None = None  # backend.host.contention_note, when others took the CPUs
    dropped: int = 0  # rounds the time cap cut short, dropped for every candidate (0 or 1 a loop)
    processes: int = 1  # loops joined (joined): each candidate timed in this many processes

    @property
    def stable(self) -> bool:
        return all(t.stable for t in self.timed.values())

    def noise(self, *names: str) -> float:
        """The run's own noise between these candidates: the larger spread of their windows."""
        return max(self.timed[n].spread(self.settings.stable_windows) for n in names)

    def to_dict(self) -> dict:
        """JSON for the trip out of a measurement child (samples left out: p50s, windows)."""
        return {
            "timed": {
                name: {"p50_ms": t.p50_ms, "window_p50_ms": t.window_p50_ms, "stable": t.stable}
                for name, t in self.timed.items()
            },
            "rounds": self.rounds,
            "contention": self.contention,
            "dropped": self.dropped,
            "processes": self.processes,
        }

    @classmethod
    def from_dict(cls, data: dict, settings: MeasureSettings) -> Interleaved:
        timed = {
            name: Timed([t["p50_ms"]], list(t["window_p50_ms"]), bool(t["stable"]))
            for name, t in data["timed"].items()
        }
        return cls(
            timed,
            int(data["rounds"]),
            settings,
            data.get("contention"),
            int(data.get("dropped", 0)),
            int(data.get("processes", 1)),
        )

    @classmethod
    def joined(cls, loops: Sequence[Interleaved]) -> Interleaved:
        """Several loops, one per process of every candidate (a regression check's A_k B_k
        pairs), read as one: samples and window medians in order, rounds and dropped rounds
        summed, stable only where every loop was, each distinct contention note once."""
        first = loops[0]
        timed = {
            name: Timed(
                [s for loop in loops for s in loop.timed[name].samples_ms],
                [w for loop in loops for w in loop.timed[name].window_p50_ms],
                all(loop.timed[name].stable for loop in loops),
            )
            for name in first.timed
        }
        notes = dict.fromkeys(loop.contention for loop in loops if loop.contention)
        return cls(
            timed,
            sum(loop.rounds for loop in loops),
            first.settings,
            " ".join(notes) or None,
            sum(loop.dropped for loop in loops),
            sum(loop.processes for loop in loops),
        )

    def verdict(self) -> str:
        """The sweep's stability rule, said of every candidate, with the contention note."""
        windows, tolerance = self.settings.stable_windows, self.settings.stability_tolerance
        unstable = sorted(name for name, t in self.timed.items() if not t.stable)
        several = self.processes > 1
        cut = (
            ", and a last one cut short by the time cap dropped on every side"
            if self.dropped == 1
            else f", and {self.dropped} cut short by the time cap (the last of a process) "
            "dropped on every side"
            if self.dropped
            else ""
        )
        head = (
            f"timed interleaved: {self.rounds} rounds of one window per candidate "
            f"({len(self.timed)} candidates"
            + (f", each in {self.processes} processes one after another" if several else "")
            + cut
            + "); "
        )
        if unstable:
            head += (
                f"unstable: the last {windows} window medians of {', '.join(unstable)} did not "
                f"agree within {tolerance:.0%} in {self.settings.max_seconds:.0f} s per "
                + ("candidate and process" if several else "candidate")
                + "; treat the verdict with care"
            )
        else:
            head += (
                f"stable: the last {windows} window medians of each agree within {tolerance:.0%}"
            )
        return head + (f". {self.contention}" if self.contention else ".")


def interleaved(
    candidates: Mapping[str, Callable[[], object]], settings: MeasureSettings
) -> Interleaved:
    """Warm every candidate up, then time them round-robin, one window each per round."""
    for infer in candidates.values():
        for _ in range(settings.warmup_runs + 1):
            infer()
    windows = {name: partial(_local_window, infer, settings) for name, infer in candidates.items()}
    return interleaved_windows(windows, settings)


def _local_window(
    infer: Callable[[], object], settings: MeasureSettings, deadline: float
) -> list[float]:
    return timed_window(infer, settings, deadline).tolist()


def interleaved_windows(
    windows: Mapping[str, Window],
    settings: MeasureSettings,
    own_cpu: Callable[[], float] | None = None,
    min_rounds: int = 1,
    keep_all: bool = False,
) -> Interleaved:
    """Round-robin over warmed-up candidates, each call of windows[name](deadline) timing one
    window of that candidate (here, or in a child that holds its session: perf_counter is the
    host's monotonic clock, so the deadline means the same there); own_cpu: the CPU seconds that
    are this measurement's own (this process's, plus the children timing for it). At least
    min_rounds rounds unless the time cap comes first; keep_all: every round's samples count,
    not only the last stable windows' (many short alternations cancel drift best). A round in
    which the deadline passed may give one candidate a full window and the next a single call:
    it is dropped for all of them, unless it is the only round, so every candidate keeps the
    same rounds."""
    samples: dict[str, list[list[float]]] = {name: [] for name in windows}
    timed = {name: Timed() for name in windows}
    need = settings.stable_windows
    deadline = time.perf_counter() + settings.max_seconds * max(len(windows), 1)
    rounds = 0
    with HostWatch(own_cpu) as host:
        while True:
            rounds += 1
            for name, window in windows.items():
                kept = window(deadline)
                samples[name].append(kept)
                timed[name].window_p50_ms.append(float(np.median(kept)))
            cut = time.perf_counter() > deadline  # a window of this round was cut short
            _judge_stable(timed, settings)
            settled = rounds >= min_rounds and all(t.stable for t in timed.values())
            if settled or cut:
                break
    dropped = int(cut and rounds > 1)
    if dropped:
        rounds -= 1
        for name, t in timed.items():
            samples[name].pop()
            t.window_p50_ms.pop()
        _judge_stable(timed, settings)
    for name, t in timed.items():
        kept = samples[name] if keep_all else samples[name][-need:]
        t.samples_ms = [s for window in kept for s in window]
    telemetry = host.share.as_telemetry() if host.share else {}
    return Interleaved(timed, rounds, settings, contention_note(telemetry), dropped)


def _judge_stable(timed: Mapping[str, Timed], settings: MeasureSettings) -> None:
    """Each candidate's stability by its last stable_windows window medians."""
    need = settings.stable_windows
    for t in timed.values():
        t.stable = len(t.window_p50_ms) >= need and windows_agree(
            t.window_p50_ms[-need:], settings.stability_tolerance
        )
