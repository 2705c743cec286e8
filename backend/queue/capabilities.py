"""Which runtimes and execution providers a sweep may ask for: the alive workers', merged.

Workers run the jobs, so their provider tables (stored with each worker's registration) decide
what the Optimize page offers. With no worker alive, this machine's own table is shown instead,
and the page says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from backend.queue.jobs import list_workers
from backend.records import WorkerRow
from backend.runtimes import all_provider_statuses

# This machine's table is read by probing runtimes, which is slow; it changes only with installs.
LOCAL_TABLE_TTL_S = 30.0
_local_cache: tuple[float, dict[str, list[dict[str, Any]]]] | None = None


@dataclass(frozen=True)
class UnavailableProvider:
    runtime: str
    provider: str
    reason: str


@dataclass(frozen=True)
class ProviderTable:
    """Providers per runtime, with where they were found ("on the workers (host-a)")."""

    providers: dict[str, list[dict[str, Any]]]
    where: str
    hosts: list[str] = field(default_factory=list)

    def usable(self) -> dict[str, list[str]]:
        """Runtime -> names of its available providers; runtimes with none are left out."""
        usable = {
            runtime: [s["name"] for s in statuses if s.get("available")]
            for runtime, statuses in self.providers.items()
        }
        return {runtime: names for runtime, names in usable.items() if names}

    def unavailable(self) -> list[UnavailableProvider]:
        return [
            UnavailableProvider(runtime, str(s["name"]), str(s.get("reason") or ""))
            for runtime, statuses in self.providers.items()
            for s in statuses
            if not s.get("available")
        ]

    def why_unavailable(self, runtime: str, provider: str) -> str:
        """The reason one provider cannot be asked for ("" when it can, or is not listed); the
        Optimize page says it where TensorRT's settings would be."""
        return next(
            (
                u.reason
                for u in self.unavailable()
                if (u.runtime, u.provider) == (runtime, provider)
            ),
            "",
        )


def merge_worker_providers(workers: list[WorkerRow]) -> dict[str, list[dict[str, Any]]]:
    """One table over several workers: a provider is available if any worker has it."""
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    for worker in workers:
        for runtime, statuses in (worker.providers or {}).items():
            for status in statuses:
                known = merged.setdefault(runtime, {}).get(status["name"])
                if known is None or (status.get("available") and not known.get("available")):
                    merged[runtime][status["name"]] = status
    return {runtime: list(by_name.values()) for runtime, by_name in merged.items()}


def local_providers() -> dict[str, list[dict[str, Any]]]:
    """This machine's providers, probed at most every LOCAL_TABLE_TTL_S seconds."""
    global _local_cache
    now = time.monotonic()
    if _local_cache is None or now - _local_cache[0] > LOCAL_TABLE_TTL_S:
        table = {
            runtime: [dict(s.__dict__) for s in statuses]
            for runtime, statuses in all_provider_statuses().items()
        }
        _local_cache = (now, table)
    return _local_cache[1]


def provider_table() -> ProviderTable:
    """Providers of the alive workers (they run the jobs), else of this machine."""
    workers = list_workers()
    if workers:
        hosts = sorted({w.hostname for w in workers})
        where = f"on the workers ({', '.join(hosts)})"
        return ProviderTable(merge_worker_providers(workers), where, hosts)
    return ProviderTable(local_providers(), "on this machine (no worker is alive right now)")
