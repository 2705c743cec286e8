"""The providers a sweep may ask for: the alive workers' tables merged, else this machine's."""

from __future__ import annotations

from pathlib import Path

from backend.queue import capabilities
from backend.queue.worker import register
from backend.runtimes import all_provider_statuses


def test_without_workers_the_table_is_this_machines_and_says_so(data_dir: Path) -> None:
    table = capabilities.provider_table()
    assert "no worker is alive" in table.where
    local = all_provider_statuses()
    assert table.usable()["onnxruntime"] == [s.name for s in local["onnxruntime"] if s.available]
    unavailable = {(u.runtime, u.provider) for u in table.unavailable()}
    assert unavailable == {(r, s.name) for r, ss in local.items() for s in ss if not s.available}
    assert all(u.reason for u in table.unavailable())  # each one says why


def test_alive_workers_tables_are_used_and_named_by_host(data_dir: Path) -> None:
    register("w-a")
    register("w-b")
    table = capabilities.provider_table()
    assert table.where.startswith("on the workers (") and len(table.hosts) == 1
    names = [s["name"] for s in table.providers["onnxruntime"]]
    assert len(names) == len(set(names))  # two workers, one row per provider
    assert "cpu" in table.usable()["onnxruntime"]
