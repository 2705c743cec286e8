"""Server-side render time of Compare (200 configurations x 1,000 samples) and Jobs (5,000 jobs).

Run: .venv/bin/python bench/dashboard_render.py
It fills a temporary database with synthetic result rows (tests/synthetic.py: payloads in the
worker's format from numpy samples) on a model added through the real ingest, then
times AppTest runs of each page: the first run (cold caches) and the median of the next runs.
Goal: under one second each. The modules Compare imports (pandas, the frames and charts) are
loaded before the first timed run, so it times cold caches and not imports: which of them the
setup happened to load first changed with unrelated moves (at b80beb3 it loaded pandas and the
frames, later it did not, and the first run looked 0.19 s slower for imports alone).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas  # noqa: E402, F401  loaded before the first timed run (see the docstring)

import backend.reporting.charts  # noqa: E402, F401
import backend.reporting.frames  # noqa: E402, F401
import settings  # noqa: E402
from backend.specs import Precision, SweepSpec  # noqa: E402
from storage.db import session_scope  # noqa: E402
from storage.repo import jobs as job_store  # noqa: E402
from storage.schema import Job  # noqa: E402
from storage.states import JobState  # noqa: E402
from tests import models as model_factory  # noqa: E402
from tests.pages.seed import add_model, open_page  # noqa: E402
from tests.synthetic import save_synthetic_result  # noqa: E402

CONFIGS = 200
SAMPLES = 1000
JOBS = 5000
REPEATS = 5


def populate() -> list[int]:
    """200 results over 5 jobs (4 precisions x 10 batch sizes each) and 5,000 jobs in all."""
    path = model_factory.save(model_factory.make_mlp(), Path(tempfile.mkdtemp()) / "mlp.onnx")
    model = add_model(path, "mlp")
    rng = np.random.default_rng(0)
    result_jobs = []
    spec = SweepSpec(precisions=tuple(Precision), batch_sizes=tuple(range(1, 11)))
    for _ in range(CONFIGS // len(spec.configurations())):
        job = job_store.create_job(
            model.id, spec.to_dict(), total=len(spec.configurations()), kind="sweep"
        )
        for config in spec.configurations():
            save_synthetic_result(job.id, config, rng.gamma(20.0, 0.05, SAMPLES))
        result_jobs.append(job.id)
    states = [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.QUEUED]
    small = SweepSpec().to_dict()
    with session_scope() as session:  # bulk insert; the page reads them through the job store
        session.add_all(
            Job(
                model_id=model.id,
                kind="sweep",
                spec=small,
                state=states[i % len(states)].value,
                progress_total=1,
                progress_done=0,
                error="Traceback...\nRuntimeError: boom" if i % 4 == 1 else None,
            )
            for i in range(JOBS - len(result_jobs))
        )
    return result_jobs


def time_page(page: str, **query: object) -> tuple[float, float, int]:
    times = []
    for _ in range(REPEATS + 1):
        started = time.perf_counter()
        at = open_page(page, **query)
        times.append(time.perf_counter() - started)
        if at.exception:
            raise RuntimeError(at.exception[0].value)
    return times[0], statistics.median(times[1:]), len(at.get("plotly_chart"))


def main() -> None:
    settings.DATA_DIR.set(tempfile.mkdtemp(prefix="optiboard-bench-"))
    settings.DATABASE_URL.set(None)  # the fresh SQLite file under that directory
    started = time.perf_counter()
    job_ids = populate()
    print(
        f"populated {CONFIGS} configurations x {SAMPLES} samples and {JOBS} jobs "
        f"in {time.perf_counter() - started:.1f} s"
    )
    jobs_csv = ",".join(str(j) for j in job_ids)
    cold, warm, charts = time_page("compare", jobs=jobs_csv)
    print(
        f"Compare, {CONFIGS} configurations selected, {charts} charts: "
        f"first run {cold:.3f} s, median of next {REPEATS} runs {warm:.3f} s (goal < 1 s)"
    )
    cold, warm, _ = time_page("jobs")
    print(
        f"Jobs, {JOBS} jobs: first run {cold:.3f} s, "
        f"median of next {REPEATS} runs {warm:.3f} s (goal < 1 s)"
    )


if __name__ == "__main__":
    main()
