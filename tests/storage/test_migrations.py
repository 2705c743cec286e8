"""Migrations on a real SQLite file that holds data: 0003 keeps latency in the payload, 0011
keeps the configuration there, 0012 reads each job's kind out of its spec, 0014 reads each
model's origin out of its artifacts, events and sha256, 0015 keeps a load point's samples in
the point's transaction (the last four on a real PostgreSQL server too)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, create_engine, inspect, text

import settings
from backend.records import JobKind, job_kind
from backend.results import ConfigurationResult, StoredResult
from storage import db
from storage.db import MIGRATIONS_DIR
from storage.repo import jobs as job_store
from storage.repo import results as result_store
from storage.repo import workers as worker_store

LATENCY = {"p50": 1.5, "p90": 2.0, "p99": 3.0}


def _migrate(url: str, revision: str, down: bool = False, make: Callable = create_engine) -> None:
    """make=storage.db.make_engine runs it as the app connects (SQLite's foreign keys on)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = make(url)  # create_engine: foreign keys off, the seeded result has no job row
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)
    engine.dispose()


def _seed_at_0001(url: str) -> None:
    _migrate(url, "0001")
    with create_engine(url).begin() as conn:
        payload = {"config_key": "k", "status": "ok", "latency": LATENCY}
        conn.execute(
            text(
                "INSERT INTO results (id, job_id, config_key, configuration, status, p50_ms, "
                "p90_ms, p99_ms, payload, created_at) VALUES (1, 1, 'k', '{}', 'ok', 1.5, 2.0, "
                "3.0, :payload, '2026-01-01')"
            ),
            {"payload": json.dumps(payload)},
        )


def _columns(url: str) -> set[str]:
    return {c["name"] for c in inspect(create_engine(url)).get_columns("results")}


def test_0003_drops_latency_copies_keeps_the_payload_and_downgrades_back(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _seed_at_0001(url)
    _migrate(url, "0003_typed_results")
    assert not {"p50_ms", "p90_ms", "p99_ms"} & _columns(url)
    with create_engine(url).connect() as conn:
        payload = json.loads(conn.execute(text("SELECT payload FROM results")).scalar_one())
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    assert payload["latency"] == LATENCY and version == "0003_typed_results"

    _migrate(url, "0001", down=True)
    with create_engine(url).connect() as conn:
        row = conn.execute(text("SELECT p50_ms, p90_ms, p99_ms FROM results")).one()
    assert tuple(row) == (1.5, 2.0, 3.0)  # filled again from the payload


def test_0005_adds_serving_points_and_downgrades_without_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'serving.db'}"
    _migrate(url, "0004_cluster_nodes")
    assert "serving_points" not in inspect(create_engine(url)).get_table_names()
    _migrate(url, "0005_serving_points")
    columns = {c["name"] for c in inspect(create_engine(url)).get_columns("serving_points")}
    assert {"job_id", "point_key", "configuration", "kind", "payload"} <= columns
    _migrate(url, "0004_cluster_nodes", down=True)
    assert "serving_points" not in inspect(create_engine(url)).get_table_names()


def test_0010_adds_baselines_and_downgrades_without_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'baselines.db'}"
    _migrate(url, "0009_session_generation")
    assert "baselines" not in inspect(create_engine(url)).get_table_names()
    _migrate(url, "0010_baselines")
    columns = {c["name"] for c in inspect(create_engine(url)).get_columns("baselines")}
    assert columns == {"job_id", "pinned_by", "pinned_at"}
    _migrate(url, "0009_session_generation", down=True)
    assert "baselines" not in inspect(create_engine(url)).get_table_names()


def test_0013_a_worker_registered_before_is_alive_by_its_heartbeat_and_can_stop(
    data_dir: Path,
) -> None:
    """A worker row from before 0013 has no stopped_at: its heartbeat alone says it is alive,
    as before; marked stopped, it is not; downgrade drops the column in place, rows kept."""
    url = settings.database_url()
    _migrate(url, "0012_job_kind")
    now = datetime.now(UTC).replace(tzinfo=None)  # the database's clock is UTC, naive
    with create_engine(url).begin() as conn:
        conn.execute(
            text(
                "INSERT INTO workers (id, hostname, pid, hardware, providers, started_at, "
                "heartbeat_at) VALUES ('w1', 'h', 1, '{}', '{}', :now, :now)"
            ),
            {"now": now},
        )
    # the first use upgrades to head
    assert [w.id for w in worker_store.list_workers(alive_within_seconds=600)] == ["w1"]
    worker_store.worker_stopped("w1")
    assert worker_store.list_workers(alive_within_seconds=600) == []
    assert worker_store.list_workers()[0].stopped_at is not None
    _migrate(url, "0012_job_kind", down=True, make=db.make_engine)
    engine = create_engine(url)
    columns = {c["name"] for c in inspect(engine).get_columns("workers")}
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM workers")).scalar_one()
    engine.dispose()
    assert "stopped_at" not in columns and rows == 1


def _insert_model(conn: Connection) -> None:
    conn.execute(
        text(
            "INSERT INTO models (id, name, sha256, format, size_bytes, inputs, outputs, "
            "op_histogram, parameter_count, node_count, warnings, created_at) VALUES "
            "(1, 'm', :sha, 'onnx', 1, '[]', '[]', '{}', 0, 0, '[]', '2026-01-01')"
        ),
        {"sha": "a" * 64},
    )


# a result stored by the code of 41aae78 (tests/backend/data/make_stored_41aae78.py wrote it)
OLD = json.loads(
    (Path(__file__).parents[1] / "backend" / "data" / "stored_41aae78.json").read_text()
)["result"]


def _seed_old_rows(url: str, revision: str) -> dict[int, ConfigurationResult]:
    """Two rows as the code before 0011 wrote them (the configuration in its column and in
    the payload), and one whose payload lacks it; what each must read as afterwards."""
    _migrate(url, revision)
    payload = {k: v for k, v in OLD.items() if k != "samples_ms"}  # samples: their own table
    bare = {k: v for k, v in payload.items() if k != "configuration"}
    rows = {1: payload, 2: {**payload, "config_key": "other"}, 3: {**bare, "config_key": "bare"}}
    engine = create_engine(url)
    with engine.begin() as conn:
        _insert_model(conn)
        conn.execute(
            text(
                "INSERT INTO jobs (id, model_id, state, spec, created_at, attempts, "
                "max_attempts, progress_done, progress_total, cancel_requested) VALUES "
                "(1, 1, 'succeeded', '{}', '2026-01-01', 1, 3, 3, 3, false)"
            )
        )
        for row_id, data in rows.items():
            conn.execute(
                text(
                    "INSERT INTO results (id, job_id, config_key, configuration, status, "
                    "throughput, peak_rss_mb, payload, created_at) VALUES (:id, 1, :key, "
                    ":configuration, 'ok', :throughput, :rss, :payload, '2026-01-01')"
                ),
                {
                    "id": row_id,
                    "key": data["config_key"],
                    "configuration": json.dumps(OLD["configuration"]),
                    "throughput": data["throughput"],
                    "rss": data["peak_rss_mb"],
                    "payload": json.dumps(data),
                },
            )
            conn.execute(
                text("INSERT INTO result_samples (result_id, samples_ms) VALUES (:id, :s)"),
                {"id": row_id, "s": json.dumps(OLD["samples_ms"])},
            )
    engine.dispose()
    # what the code before read from each row: the payload, with the column's configuration
    # where the payload had none
    return {
        row_id: ConfigurationResult.from_dict({"configuration": OLD["configuration"], **data})
        for row_id, data in rows.items()
    }


@pytest.mark.parametrize("revision", ["0002_users_audit", "0010_baselines"])
def test_0011_keeps_the_configuration_once_and_old_rows_read_the_same(
    database: str, revision: str
) -> None:
    """A database at an older revision with rows the old code wrote is upgraded on first use,
    as the app does (foreign keys on), and every row reads back as the same StoredResult with
    its samples (0003 and 0011 drop columns in place, never by copying the table);
    downgrade restores the column."""
    url = settings.database_url()
    expected = _seed_old_rows(url, revision)
    stored = [StoredResult.from_row(row) for row in result_store.list_results(job_ids=[1])]
    assert "configuration" not in _columns(url)
    assert {s.id: s.result for s in stored} == expected
    assert all(s.configuration == expected[s.id].configuration for s in stored)
    assert stored[0].configuration.key == OLD["config_key"]  # the old flat shape, read typed
    assert result_store.result_samples([1]) == {1: OLD["samples_ms"]}

    _migrate(url, "0010_baselines", down=True)
    with create_engine(url).connect() as conn:
        columns = conn.execute(text("SELECT id, configuration FROM results ORDER BY id")).all()
    assert [json.loads(c) if isinstance(c, str) else c for _, c in columns] == [
        OLD["configuration"]
    ] * 3


SERVING_SPEC = {"kind": "serving", "slo_p99_ms": 50.0}  # as a study's spec carries it
SWEEP_SPEC = {"precisions": ["fp32"], "batch_sizes": [1]}  # a sweep's: no kind key, ever


def test_0012_moves_each_jobs_kind_from_its_spec_to_a_column(database: str) -> None:
    """A database at 0011 holding a serving study (its spec says "kind": "serving") and a sweep
    (its spec names no kind) is upgraded on first use, as the app does (foreign keys on): the
    column holds "serving" and "sweep", the specs keep what they held (older workers read the
    study's kind there), and the jobs' events stay. Downgrade, foreign keys on too, drops the
    column in place: nothing cascades away."""
    url = settings.database_url()
    _migrate(url, "0011_configuration_once")
    engine = create_engine(url)
    with engine.begin() as conn:
        _insert_model(conn)
        for job_id, spec in ((1, SERVING_SPEC), (2, SWEEP_SPEC)):
            conn.execute(
                text(
                    "INSERT INTO jobs (id, model_id, state, spec, created_at, attempts, "
                    "max_attempts, progress_done, progress_total, cancel_requested) VALUES "
                    "(:id, 1, 'succeeded', :spec, '2026-01-01', 1, 3, 1, 1, false)"
                ),
                {"id": job_id, "spec": json.dumps(spec)},
            )
            conn.execute(
                text(
                    "INSERT INTO events (job_id, level, message, created_at) VALUES "
                    "(:id, 'info', 'queued 1 configurations', '2026-01-01')"
                ),
                {"id": job_id},
            )
    engine.dispose()

    jobs = {j.id: j for j in job_store.list_jobs()}  # the first use upgrades to head
    assert {i: j.kind for i, j in jobs.items()} == {1: "serving", 2: "sweep"}
    assert (job_kind(jobs[1]), job_kind(jobs[2])) == (JobKind.SERVING, JobKind.SWEEP)
    assert (jobs[1].spec, jobs[2].spec) == (SERVING_SPEC, SWEEP_SPEC)
    assert len(job_store.list_events()) == 2

    _migrate(url, "0011_configuration_once", down=True, make=db.make_engine)
    engine = create_engine(url)
    with engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("jobs")}
        events = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
        specs = conn.execute(text("SELECT spec FROM jobs ORDER BY id")).scalars().all()
    engine.dispose()
    assert "kind" not in columns and events == 2
    assert [json.loads(s) if isinstance(s, str) else s for s in specs] == [SERVING_SPEC, SWEEP_SPEC]


def test_head_revision_is_the_newest_migration_and_a_migrated_database_is_recognised(
    tmp_path: Path,
) -> None:
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert ScriptDirectory.from_config(config).get_heads() == [db.HEAD_REVISION]
    engine = db.make_engine(f"sqlite:///{tmp_path / 'head.db'}")
    with engine.connect() as connection:
        assert not db._at_head(connection)  # fresh: no alembic_version table
    db.upgrade(engine)
    with engine.connect() as connection:
        assert db._at_head(connection)
    _migrate(str(engine.url), "0010_baselines", down=True)
    with engine.connect() as connection:
        assert not db._at_head(connection)  # one behind: upgrade() runs Alembic again
    db.upgrade(engine)
    with engine.connect() as connection:
        assert db._at_head(connection)
        columns = {c["name"] for c in inspect(connection).get_columns("results")}
    assert "configuration" not in columns  # 0011 ran again
    engine.dispose()


def _seed_library_at_0013(url: str) -> None:
    """A library as the code before 0014 left it: #1 an upload, #2 its copy (the same sha256),
    #3 the INT4 variant job #1 made from #1 (its artifact meta and its job's event say so),
    #4 a variant of a model deleted before (#99), #5 another upload."""
    _migrate(url, "0013_worker_stopped")
    models = [(1, "a"), (2, "a"), (3, "b"), (4, "c"), (5, "d")]
    variants = {3: 1, 4: 99}
    engine = create_engine(url)
    with engine.begin() as conn:
        for model_id, sha in models:
            conn.execute(
                text(
                    "INSERT INTO models (id, name, sha256, format, size_bytes, inputs, outputs, "
                    "op_histogram, parameter_count, node_count, warnings, created_at) VALUES "
                    "(:id, :name, :sha, 'genai', 1, '[]', '[]', '{}', 0, 0, '[]', '2026-01-01')"
                ),
                {"id": model_id, "name": f"m{model_id}", "sha": sha * 64},
            )
            meta = {"role": "decoder"}
            if model_id in variants:
                meta |= {"variant_of": variants[model_id], "variant": {"kind": "weight-only"}}
            conn.execute(
                text(
                    "INSERT INTO artifacts (model_id, kind, sha256, size_bytes, filename, meta, "
                    "created_at) VALUES (:id, 'genai', :sha, 1, 'model.onnx', :meta, "
                    "'2026-01-01')"
                ),
                {"id": model_id, "sha": sha * 64, "meta": json.dumps(meta)},
            )
        conn.execute(
            text(
                "INSERT INTO jobs (id, model_id, state, kind, spec, created_at, attempts, "
                "max_attempts, progress_done, progress_total, cancel_requested) VALUES "
                "(1, 1, 'succeeded', 'generation', '{}', '2026-01-01', 1, 3, 1, 1, false)"
            )
        )
        for message in ("quantizing the model to int4 rtn b32 sym", "stored m3 as model 3"):
            conn.execute(
                text(
                    "INSERT INTO events (job_id, level, message, created_at) VALUES "
                    "(1, 'info', :message, '2026-01-01')"
                ),
                {"message": message},
            )
    engine.dispose()


def test_0014_records_each_models_origin_and_a_variant_outlives_its_source(
    database: str,
) -> None:
    """A database at 0013 is upgraded on first use (foreign keys on): the copy, the variant
    and the job that made it are read from what the rows already said. Deleting the source
    keeps its variant and copy, their source and job ids NULL (ON DELETE SET NULL on both
    databases); downgrade drops the columns in place, no artifact cascaded away."""
    from storage.repo import models as model_store

    url = settings.database_url()
    _seed_library_at_0013(url)
    origins = {
        m.id: (m.origin, m.source_model_id, m.source_job_id) for m in model_store.list_models()
    }
    assert origins == {
        1: ("upload", None, None),
        2: ("copy", 1, None),
        3: ("variant", 1, 1),
        4: ("variant", None, None),  # its source was gone before 0014
        5: ("upload", None, None),
    }
    model_store.delete_model(1)
    kept = {m.id: (m.origin, m.source_model_id, m.source_job_id) for m in model_store.list_models()}
    assert kept == {
        2: ("copy", None, None),
        3: ("variant", None, None),
        4: ("variant", None, None),
        5: ("upload", None, None),
    }
    assert job_store.list_jobs() == []  # the source's job went with it, as before

    _migrate(url, "0013_worker_stopped", down=True, make=db.make_engine)
    engine = create_engine(url)
    with engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("models")}
        artifacts = conn.execute(text("SELECT count(*) FROM artifacts")).scalar_one()
    engine.dispose()
    assert not {"origin", "source_model_id", "source_job_id"} & columns and artifacts == 4


def _seed_points_at_0014(url: str) -> None:
    """Two models, a serving job of each, and one load point each, as the code before 0015
    stored them: no samples."""
    _migrate(url, "0014_model_origin")
    engine = create_engine(url)
    with engine.begin() as conn:
        for n in (1, 2):
            conn.execute(
                text(
                    "INSERT INTO models (id, name, sha256, format, size_bytes, inputs, outputs, "
                    "op_histogram, parameter_count, node_count, warnings, created_at) VALUES "
                    "(:n, 'm', :sha, 'onnx', 1, '[]', '[]', '{}', 0, 0, '[]', '2026-01-01')"
                ),
                {"n": n, "sha": str(n) * 64},
            )
            conn.execute(
                text(
                    "INSERT INTO jobs (id, model_id, state, kind, spec, created_at, attempts, "
                    "max_attempts, progress_done, progress_total, cancel_requested) VALUES "
                    "(:n, :n, 'succeeded', 'serving', :spec, '2026-01-01', 1, 3, 1, 3, false)"
                ),
                {"n": n, "spec": json.dumps(SERVING_SPEC)},
            )
            conn.execute(
                text(
                    "INSERT INTO serving_points (job_id, point_key, configuration, kind, "
                    "payload, created_at) VALUES (:n, 'old', 'c', 'point', '{}', "
                    "'2026-01-01')"
                ),
                {"n": n},
            )
    engine.dispose()


def test_0015_keeps_a_points_samples_in_its_transaction_and_its_job_takes_them_along(
    database: str,
) -> None:
    """A database at 0014 with points stored before is upgraded on first use (foreign keys
    on): those points have no samples. A new point and its samples are stored together, read
    back byte for byte; a samples row the database refuses leaves no point either (one
    transaction), and a point refused as a duplicate writes no samples. Deleting a model (and
    so its job) deletes its points' samples, not another's; downgrade drops the table in place,
    every point kept."""
    from storage.repo import models as model_store
    from storage.repo import serving as point_store

    url = settings.database_url()
    _seed_points_at_0014(url)
    assert point_store.point_samples([1, 2]) == {}  # the first use upgrades to head
    kept = point_store.StoredSamples("f8le-byteplanes-zlib", 2, 3, b"\x01\x02", b"\x03", b"\x04")
    new = point_store.save_point(1, "new", "c", point_store.POINT, {"n": 1}, samples=kept)
    other = point_store.save_point(2, "new", "c", point_store.POINT, {"n": 2}, samples=kept)
    assert new is not None and other is not None
    assert point_store.point_samples([new.id, other.id, 1]) == {new.id: kept, other.id: kept}
    assert job_store.get_job(1).progress_done == 2  # the old point and the new one

    again = point_store.save_point(1, "new", "c", point_store.POINT, {"n": 3}, samples=kept)
    assert again is None  # already stored: the first point and its samples stay
    refused = point_store.StoredSamples("f8le-byteplanes-zlib", 1, 1, None, b"")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="(?i)null"):
        point_store.save_point(1, "half", "c", point_store.POINT, {"n": 4}, samples=refused)
    assert [p.point_key for p in point_store.list_points([1])] == ["old", "new"]
    assert job_store.get_job(1).progress_done == 2

    model_store.delete_model(1)
    assert point_store.point_samples([new.id, other.id]) == {other.id: kept}
    _migrate(url, "0014_model_origin", down=True, make=db.make_engine)
    engine = create_engine(url)
    with engine.connect() as conn:
        tables = inspect(conn).get_table_names()
        points = conn.execute(text("SELECT count(*) FROM serving_points")).scalar_one()
    engine.dispose()
    assert "serving_point_samples" not in tables and points == 2
