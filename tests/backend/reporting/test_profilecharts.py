"""Profile figures drawn from real profiles of a real model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from backend.engine.profile import Profile, profile_model
from backend.engine.variants import build_variant
from backend.reporting import profilecharts
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration
from tests import models as model_factory
from tests.evidence_models import make_hardswish_net

CPU = SessionOptions.plain()  # ORT's CPU provider, defaults


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Profile]:
    work = tmp_path_factory.mktemp("profiles")
    source = model_factory.save(make_hardswish_net(), work / "hs.onnx")
    feed = {"input": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    found = {}
    for precision in ("fp32", "int8_static"):
        variant = build_variant(source, Configuration(precision=precision), work / precision)
        found[precision] = profile_model(variant.path, onnx.load(str(source)), CPU, feed)
    return found


def test_node_bars_show_each_hot_node_once_with_its_time_and_kind(
    profiles: dict[str, Profile],
) -> None:
    profile = profiles["int8_static"]
    fig = profilecharts.node_bars(profile, top=12)
    shown = {y: x for trace in fig.data for x, y in zip(trace.x, trace.y, strict=True)}
    hottest = profile.hottest(12)
    assert set(shown) == {n.name for n in hottest} and len(shown) == len(hottest)
    assert all(shown[n.name] == pytest.approx(n.per_run_us) for n in hottest)
    kinds = {trace.name for trace in fig.data}
    assert "int8 kernel" in kinds or "conversion" in kinds
    qdq = [n for n in profile.nodes if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert all(profilecharts.node_kind(profile, n) == "conversion" for n in qdq)


def test_op_type_bars_add_up_to_the_whole_profile(profiles: dict[str, Profile]) -> None:
    fig = profilecharts.op_type_bars(profiles["fp32"], top=100)
    assert sum(fig.data[0].x) == pytest.approx(100.0)


def test_diff_bars_compare_the_same_uploaded_nodes(profiles: dict[str, Profile]) -> None:
    before, after = profiles["fp32"], profiles["int8_static"]
    fig = profilecharts.diff_bars(before, after, ("FP32", "INT8"))
    fp32_bars, int8_bars = fig.data
    assert list(fp32_bars.y) == list(int8_bars.y) and "Conv_0" in fp32_bars.y
    per_source = profilecharts.per_source_us(after)
    assert sum(per_source.values()) == pytest.approx(after.total_us / after.runs)
    assert dict(zip(int8_bars.y, int8_bars.x, strict=True))["Conv_0"] == pytest.approx(
        per_source["Conv_0"]
    )


def _figure_strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _figure_strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _figure_strings(item)]
    return []


def test_node_and_op_names_shaped_like_html_are_shown_as_text_in_every_chart(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Plotly reads <a href>, <b> and the like in ticks, hovers and legends; names come from the
    upload (nodes) and the runtime, so they reach the chart entity-escaped."""
    work = tmp_path_factory.mktemp("html_names")
    model = make_hardswish_net(blocks=2)
    for index, node in enumerate(model.graph.node):
        node.name = f'<a href="http://evil/{index}">n{index}</a>&<img src=x>'
    source = model_factory.save(model, work / "evil.onnx")
    feed = {"input": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    profile = profile_model(source, onnx.load(str(source)), CPU, feed)
    assert any("<a href" in n.name for n in profile.nodes)  # ORT kept the names as written
    figures = [
        profilecharts.node_bars(profile),
        profilecharts.op_type_bars(profile),
        profilecharts.diff_bars(profile, profile, ("FP32", "<b>mine</b>")),
    ]
    texts = [s for fig in figures for s in _figure_strings(fig.to_plotly_json())]
    assert not [t for t in texts if "<a" in t or "<img" in t or "<b>" in t]
    escaped = '&lt;a href="http://evil/0"&gt;n0&lt;/a&gt;&amp;&lt;img src=x&gt;'
    assert any(escaped in t for t in texts)
    assert any("&lt;b&gt;mine&lt;/b&gt;" in t for t in texts)
