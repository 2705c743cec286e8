"""The worker's reading of a measurement child's answer: the files it names are copied into the
store, read and then deleted with the worker's own rights, so only files in the task's output
folder are taken; a real child's answer, and the same answer as a child the model took over
would write it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backend.engine.run import ConfigurationTask
from backend.jobs.measuring import MEASURE_PRELOAD, measurement_binds, result_of_child
from backend.launch.forks import Forks
from backend.measure_settings import MeasureSettings
from backend.models.ingest import ingest_file
from backend.results import ResultStatus
from backend.specs import SweepSpec

QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=3, accuracy_samples=1
)


@pytest.fixture
def measured(data_dir: Path, mlp_path: Path, tmp_path: Path) -> tuple[ConfigurationTask, dict]:
    """A real configuration measured in its sandboxed child, profile on: (task, its answer)."""
    ingest_file(mlp_path, "mlp.onnx")  # the database now exists in the data folder
    spec = SweepSpec(precisions=("int8_dynamic",), batch_sizes=(1,), profile=True)
    task = ConfigurationTask(str(mlp_path), spec.configurations()[0], QUICK, str(tmp_path / "o"))
    with Forks(MEASURE_PRELOAD) as forks:
        outcome = forks.call(
            "backend.jobs.measuring:child_measure",
            task.to_dict(),
            timeout_s=120,
            what="The configuration",
            sandboxed=True,
            binds=measurement_binds(task),
        )
    assert outcome.ok, outcome.error
    return task, outcome.value


def test_a_real_childs_files_are_taken_from_its_output_folder(measured: Any) -> None:
    task, answer = measured

    result = result_of_child(answer, task)

    assert result.status == ResultStatus.OK, result.error
    for key in ("optimized_path", "profile_path"):
        assert Path(result.environment[key]).parent.is_relative_to(Path(task.output_dir))


@pytest.mark.parametrize("how", ["named", "linked"])
def test_a_child_naming_the_database_gets_nothing_stored_and_the_file_stays(
    measured: Any, data_dir: Path, how: str
) -> None:
    """Until 2026-12-07 the worker copied such a file into the store as the result's built
    graph (where a viewer could download it), then deleted it: the database, here."""
    task, answer = measured
    database = data_dir / "optiboard.db"
    named = database
    if how == "linked":  # a link in its own output folder, to the same file
        named = Path(task.output_dir) / "model.onnx"
        named.symlink_to(database)
    answer["environment"]["optimized_path"] = str(named)
    before = database.read_bytes()

    result = result_of_child(answer, task)

    assert result.status == ResultStatus.FAILED and result.latency is None
    assert result.error == (
        "Not stored: the measurement child named a file (optimized_path) outside its output "
        "folder, which only a child the model took over does; none of its figures are kept."
    )
    assert "optimized_path" not in result.environment
    assert database.read_bytes() == before
