"""Serve page: the recommendation from a real sweep's latency curve, charts, URL state."""

from __future__ import annotations

from pathlib import Path

from backend.specs import Precision
from tests.pages.seed import add_model, finished_sweep, open_page, texts


def test_empty_serve_page_points_to_optimize(data_dir: Path) -> None:
    at = open_page("serve")
    assert not at.exception
    assert "No measured sweep yet" in texts(at)


def test_serve_recommends_from_a_measured_sweep_and_keeps_its_settings_in_the_url(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 8))
    at = open_page("serve", job=job.id, slo=50, overhead=0.5)
    assert not at.exception
    assert at.number_input(key="url_slo").value == 50.0
    sentence = at.success[0].value
    assert sentence.startswith("In 20 predicted configurations")  # one variant x 20 policies
    assert "meets the p99 bound of 50 ms" in sentence and "more than the default" in sentence
    assert len(at.get("plotly_chart")) == 3
    table = at.dataframe[0].value
    assert (table["p99 (ms)"].iloc[0] <= 50) and (table["source"] == "predicted").all()

    at.number_input(key="url_slo").set_value(0.01).run()  # below the 0.5 ms overhead alone
    assert not at.exception
    assert at.query_params["slo"] == "0.01"
    assert "none meets the p99 bound of 0.01 ms; the closest is" in at.warning[0].value


def test_a_pasted_config_with_slash_comments_gets_one_sentence(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 4))
    at = open_page("serve", job=job.id)
    at.text_area(key="pasted_config").input("// from a blog\nmax_batch_size: 8\n")
    at.button(key="check_config").click().run()
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]  # shown as escaped plain text
    assert any("does not parse at line 1, column 1" in e and "no // comments" in e for e in errors)
    at.text_area(key="pasted_config").input("max_batch_size: 8\ndynamic_batching { }\n")
    at.button(key="check_config").click().run()
    assert "Parses as Triton's ModelConfig: max_batch_size 8" in texts(at)
