"""Jobs, results, links and command lines written by the code before knobs were declared (41aae78)
still read the same: tests/backend/data/stored_41aae78.json was written by that code itself
(tests/backend/data/make_stored_41aae78.py, run in a checkout of that commit)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from backend import cli
from backend.cluster.dispatch import node_task
from backend.engine.run import ConfigurationTask
from backend.engine.side import SideTask
from backend.jobs.regressspec import RegressionSpec
from backend.knobs.serialize import to_json
from backend.queue import jobs
from backend.results import ConfigurationResult, ResultStatus
from backend.specs import MEASURE_PRESETS, Configuration, OrtOptions, SweepSpec

STORED = json.loads((Path(__file__).parent / "data" / "stored_41aae78.json").read_text())


def nested(old: dict[str, Any]) -> dict[str, Any]:
    """The old dict in today's shape: OpenVINO's two knobs in their group, the ORT group, the
    runtime environment and the baseline added (at their defaults)."""
    new = dict(old)
    new["openvino"] = {
        "performance_hint": new.pop("performance_hint"),
        "streams": new.pop("streams"),
    }
    new["onnxruntime"] = to_json(OrtOptions())  # knobs added since, at their defaults
    new["prices"] = {}  # no price given: OPTIBOARD_PRICE_PER_HOUR's when read or queued
    new["runtime_env"], new["baseline_of"] = "default", None
    new["int8_reduce_range"] = False  # 7-bit INT8 weights, added since
    return new


def test_the_blob_was_written_by_the_old_code() -> None:
    assert STORED["commit"].startswith("41aae78")
    assert "performance_hint" in STORED["sweep_specs"][0]  # the old, flat shape
    assert len(STORED["configurations"]) > 40


@pytest.mark.parametrize("index", range(len(STORED["sweep_specs"])))
def test_stored_sweeps_load_and_make_the_same_points(index: int) -> None:
    old = STORED["sweep_specs"][index]
    spec = SweepSpec.from_dict(old)
    assert spec.to_dict() == nested(old)
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    keys = {c["key"] for c in STORED["configurations"]}
    assert {c.key for c in spec.configurations()} <= keys


def test_stored_configurations_keep_their_keys_and_labels() -> None:
    for stored in STORED["configurations"]:
        config = Configuration.from_dict(stored["dict"])
        assert (config.key, config.label) == (stored["key"], stored["label"])
        assert Configuration.from_dict(config.to_dict()) == config


def test_a_stored_result_loads_and_writes_back_the_same() -> None:
    old = STORED["result"]
    result = ConfigurationResult.from_dict(old)
    assert result.latency is not None and result.latency.p50 > 0
    assert result.evaluation is not None and result.evaluation.top1_accuracy == 0.75
    # the configuration is read as a Configuration and written in today's shape (OpenVINO's
    # two knobs in their group, the ORT group added); the rest writes back exactly as stored
    written = result.to_dict(with_samples=True)
    config = dict(old["configuration"])
    config["openvino"] = {"performance_hint": config.pop("performance_hint")}
    config["openvino"]["streams"] = config.pop("streams")
    config["onnxruntime"] = to_json(OrtOptions())
    config["int8_reduce_range"] = False
    assert written["configuration"] == config
    # the accuracy report's fields added since, at their defaults (no count was kept then)
    accuracy = old["accuracy"] | {"top1_rows": 0, "top1_flip_margin": None}
    assert written["accuracy"] == accuracy
    assert {**written, "configuration": old["configuration"], "accuracy": old["accuracy"]} == old
    assert result.configuration.key == result.config_key


def test_a_task_and_a_result_carry_a_stored_configuration_typed_and_write_it_unchanged() -> None:
    """What crosses into a child (the task) and into a results row (the result) holds the
    Configuration itself; its JSON there is Configuration.to_dict's, nested in the same place."""
    for stored in STORED["configurations"]:
        config = Configuration.from_dict(stored["dict"])
        task = ConfigurationTask("model.onnx", config, MEASURE_PRESETS["quick"], "out")
        sent = json.loads(json.dumps(task.to_dict()))
        assert sent["configuration"] == config.to_dict()
        assert sent["measure"] == asdict(MEASURE_PRESETS["quick"])
        assert ConfigurationTask.from_dict(sent) == task
        result = ConfigurationResult(config.key, config, ResultStatus.FAILED)
        row = json.loads(json.dumps(result.to_dict()))
        assert row["configuration"] == config.to_dict()
        assert ConfigurationResult.from_dict(row).configuration == config


@pytest.mark.parametrize("index", range(len(STORED["queries"])))
def test_links_written_before_still_open_the_same_sweep(index: int) -> None:
    old_query, old_spec = STORED["queries"][index], STORED["sweep_specs"][index]
    spec = jobs.spec_from_query(old_query)
    assert spec == SweepSpec.from_dict(old_spec)
    assert jobs.spec_to_query(spec) == old_query  # the same keys and values as before


@pytest.mark.parametrize("index", range(len(STORED["cli"])))
def test_command_lines_written_before_make_the_same_sweep(index: int) -> None:
    argv, old = STORED["cli"][index]["argv"], STORED["cli"][index]["spec"]
    spec = cli._spec(cli.build_parser().parse_args(argv))
    assert spec.to_dict() == nested(old)


def test_a_result_sent_back_without_its_configuration_is_stored_the_same() -> None:
    """A child (or a cluster node) writes its result without the configuration its parent sent
    and holds; the parent reads it back with that one, and the row's payload is the same."""
    old = ConfigurationResult.from_dict(STORED["result"])
    sent = json.loads(json.dumps(old.to_dict(with_samples=True, with_configuration=False)))
    assert "configuration" not in sent
    back = ConfigurationResult.from_dict(sent, configuration=old.configuration)
    assert back == old and back.configuration is old.configuration
    assert back.to_dict() == old.to_dict()  # what store_result writes


def test_a_node_and_a_side_read_their_task_back_in_one_from_dict() -> None:
    """The Ray request and a regression check's side carry the configuration and the
    measurement settings as the one serializer writes them (no asdict, no hand-built dict)."""
    quick = MEASURE_PRESETS["quick"]
    spec = SweepSpec(measure=quick, min_cosine=0.5)
    for stored in STORED["configurations"]:
        config = Configuration.from_dict(stored["dict"])
        task = ConfigurationTask.from_dict(json.loads(json.dumps(node_task(config, spec))))
        assert (task.configuration, task.measure, task.min_cosine) == (config, quick, 0.5)
        side = SideTask("model.onnx", config, quick, "out", "default")
        assert SideTask.from_dict(json.loads(json.dumps(side.to_dict()))) == side
    check = RegressionSpec(env_b="default", dims=(("seq", 8),), measure=quick)
    assert check.to_dict()["measure"] == asdict(quick)  # the settings' JSON as before
    assert RegressionSpec.from_dict({**check.to_dict(), "dims": [["seq", 8]]}) == check  # older
