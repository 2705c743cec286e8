"""Stored seeding steps (tests/pages/stored.py): a copy is the data directory the real step left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.auth import accounts
from backend.queue import jobs
from backend.specs import Precision, SweepSpec
from tests.pages import seed, stored


@pytest.fixture
def store(tmp_path: Path) -> Iterator[stored.Store]:
    """A store of its own, so the run's shared one neither helps nor sees this test."""
    own = stored.Store(tmp_path / "store")
    previous = stored.use(own)
    yield own
    stored.use(previous)


def _fresh_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    directory = tmp_path / name
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("OPTIBOARD_DATA_DIR", str(directory))
    return directory


def test_the_same_step_from_the_same_state_is_a_copy_with_the_same_rows_and_files(
    store: stored.Store, tmp_path: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPTIBOARD_DATABASE_URL", raising=False)
    first_dir = _fresh_dir(tmp_path, monkeypatch, "first")
    first = seed.add_model(mlp_path, "mlp")
    queued = seed.add_job(first.id, SweepSpec(precisions=(Precision.FP32,), batch_sizes=(1,)))
    assert (store.ran, store.copied) == (2, 0)

    second_dir = _fresh_dir(tmp_path, monkeypatch, "second")
    second = seed.add_model(mlp_path, "mlp")
    again = seed.add_job(second.id, SweepSpec(precisions=(Precision.FP32,), batch_sizes=(1,)))
    assert (store.ran, store.copied) == (2, 2)  # both steps chained from the copies
    assert second == first  # the row the real ingest returned, read from the copied database
    assert again.id == queued.id and again.spec == queued.spec
    assert [j.id for j in jobs.list_jobs()] == [queued.id]
    blob = f"artifacts/{first.sha256[:2]}/{first.sha256}"
    assert (second_dir / blob).read_bytes() == (first_dir / blob).read_bytes()

    seed.add_job(second.id, SweepSpec(precisions=(Precision.FP32,), batch_sizes=(4,)))
    assert (store.ran, store.copied) == (3, 2)  # another spec: run for real
    assert len(jobs.list_jobs()) == 2


def test_a_data_directory_changed_by_the_test_runs_the_step_for_real(
    store: stored.Store, tmp_path: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPTIBOARD_DATABASE_URL", raising=False)
    _fresh_dir(tmp_path, monkeypatch, "first")
    seed.add_model(mlp_path, "mlp")
    _fresh_dir(tmp_path, monkeypatch, "second")
    seed.make_account("viewer")  # a row the stored step did not start from
    seed.add_model(mlp_path, "mlp")
    assert (store.ran, store.copied) == (2, 0)
    assert accounts.principal_for("viewer") is not None  # the test's own row is still there
