"""Migrations on a real SQLite file that holds data: 0003 keeps latency in the payload."""

from __future__ import annotations

import json
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

from storage.db import MIGRATIONS_DIR

LATENCY = {"p50": 1.5, "p90": 2.0, "p99": 3.0}


def _migrate(url: str, revision: str, down: bool = False) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = create_engine(url)  # foreign keys off: the seeded result has no job row
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
