"""Serve page: the recommendation from a real sweep's latency curve, charts, URL state."""

from __future__ import annotations

import re
from pathlib import Path

from backend.specs import Precision
from tests.pages.seed import (
    add_model,
    finished_sweep,
    open_page,
    recommendation,
    stored_again,
    texts,
    verdict_box,
)


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
    sentence = recommendation(at)
    # one variant: its upload batches, so max 8 (the largest batch measured) with each delay,
    # and no batching, one instance each (how two share the host was not measured)
    assert sentence.startswith("In 4 predicted configurations")
    assert "meets the p99 bound of 50 ms" in sentence and "more than the default" in sentence
    assert len(at.get("plotly_chart")) == 3
    table = at.dataframe[0].value
    assert (table["p99 (ms)"].iloc[0] <= 50) and (table["source"] == "predicted").all()

    at.number_input(key="url_slo").set_value(0.01).run()  # below the 0.5 ms overhead alone
    assert not at.exception
    assert at.query_params["slo"] == "0.01"
    assert "none meets the p99 bound of 0.01 ms; the closest is" in verdict_box(at).value
    # no row is under the bound, so none quotes a rate or a cost there (a confirmation measured
    # p99 23 ms against 5 ms showed 285 req/s "under the bound" and its cost)
    table = at.dataframe[0].value
    assert table["rate under the bound (req/s)"].isna().all(), table


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


def test_a_fixed_shape_sweep_is_predicted_conservatively_with_one_rate_per_configuration(
    data_dir: Path, mlp_path: Path
) -> None:
    """The walkthrough's sweep (FP32 and INT8 static, fixed shapes, batches 1 and 8): no max
    batch beyond 8, no dynamic batching for a file that cannot batch, a second instance not
    predicted to scale, what the prediction rests on said, and one rate per configuration in
    the sentence, the evidence table and the cost."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, batch_sizes=(1, 8))
    at = open_page("serve", job=job.id, slo=10)
    assert not at.exception
    sentence = recommendation(at)
    rests_on = (
        "Predicted, not measured: it rests on the sweep's in-process latency at batch sizes 1, 8"
    )
    assert rests_on in sentence, sentence
    assert "no per-request CPU work of the server or the load generator is counted" in sentence
    # no study of this model yet: the one action that measures those costs, as words (in the
    # "Uncalibrated: ..." line above the verdict, not again in its list) and a link
    remedy = f"`optiboard serve recommend {job.id} --slo 10 --confirm 3`"
    headline = at.main.warning[0].value
    assert "run a serving study of this model" in headline and remedy in headline, headline
    assert remedy not in sentence, sentence
    command = f"optiboard serve recommend {job.id} --slo 10 --confirm 3"
    assert command in [c.value for c in at.code]
    links = [link.proto for link in at.get("page_link")]
    assert any("serving study" in link.label for link in links), links
    assert "Only one instance is predicted: how more would share this host was not measured" in (
        sentence
    )
    # why INT8 is predicted without dynamic batching, said once: in the clause naming its file
    assert "only no dynamic batching is predicted for INT8 static (QDQ) on CPU" in sentence
    assert sentence.count("cannot batch") == 1, sentence
    table = at.dataframe[0].value
    labels = list(table["configuration"])
    assert not [label for label in labels if label.endswith("x2")], labels  # no unmeasured gain
    assert not [label for label in labels if re.search(r"max (16|32)", label)], labels
    int8 = [label for label in labels if label.startswith("INT8 static")]
    assert int8 and all("no batching" in label for label in int8), int8  # its file cannot batch
    best = re.search(r"\), (.+?) meets the p99 bound of 10 ms at ([\d,]+) req/s", sentence)
    assert best is not None, sentence
    rate = int(best.group(2).replace(",", ""))
    if ", max " in best.group(1):
        assert "The max batch stops at 8, the largest batch size measured" in sentence
    # one rate for the configuration: the sentence, its evidence row and its cost
    row = table[table["configuration"] == best.group(1)].iloc[0]
    assert row["rate under the bound (req/s)"] == rate
    cost = next(i.value for i in at.info if i.value.startswith("The cheapest")).replace("\\", "")
    assert f"ms at {best.group(2)} req/s predicted" in cost, cost
    # the perf_analyzer line offers the rate the prediction was fed; where that is not the
    # quoted rate, the caption says both
    [reproduce] = [c.value for c in at.caption if c.value.startswith("Reproduce the quoted")]
    offered = re.search(r"--request-rate-range=([\d.]+):", "\n".join(c.value for c in at.code))
    if offered and abs(float(offered.group(1)) / rate - 1) > 0.03:
        assert f"{best.group(2)} req/s is what it predicts" in reproduce, reproduce


def test_each_predicted_row_says_which_file_it_serves_and_why_it_batches_or_not(
    data_dir: Path, mlp_path: Path
) -> None:
    """The walkthrough's fixed-shape sweep: FP32 serves the upload (its batch axis is dynamic)
    with dynamic batching, INT8 its own fixed-batch file without; each row and the sentence say
    which file and why one may batch and the other not."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, batch_sizes=(1, 8))
    at = open_page("serve", job=job.id, slo=10)
    assert not at.exception
    table = at.dataframe[0].value
    fp32 = (
        "the uploaded model, which may batch: its batch axis is dynamic, unlike the sweep's files"
    )
    int8 = (  # of the sweep's two INT8 files (batches 1 and 8), the one served
        "the sweep's INT8 static (QDQ) file for batch size 1, which cannot batch: its batch size "
        "is fixed and the FP32 upload cannot stand in for it"
    )
    for label, served in zip(table["configuration"], table["serves"], strict=True):
        assert served == (fp32 if label.startswith("FP32") else int8), (label, served)
    assert set(table["serves"]) == {fp32, int8}  # both kinds of row are ranked
    sentence = recommendation(at)
    for said in (f"FP32 on CPU serves {fp32}", f"INT8 static (QDQ) on CPU serves {int8}"):
        assert said in sentence, sentence  # in the order ranked


def test_one_variant_says_which_file_it_serves_without_a_comparison(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 8))
    at = open_page("serve", job=job.id, slo=50, overhead=0.5)
    assert not at.exception
    assert set(at.dataframe[0].value["serves"]) == {"the uploaded model"}
    assert "Triton would serve the uploaded model." in recommendation(at)


def test_the_perf_analyzer_line_names_the_model_serve_export_writes(
    data_dir: Path, mlp_path: Path, cnn_path: Path
) -> None:
    """`serve export MODEL` names the Triton model model_MODEL; the line a sweep's prediction
    offers must name that, not the sweep's job number (job 1 of model 2 here)."""
    add_model(cnn_path, "cnn")
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, batch_sizes=(1, 8))
    assert (model.id, job.id) == (2, 1)
    at = open_page("serve", job=job.id, slo=10)
    assert not at.exception
    lines = [c.value for c in at.code if c.value.startswith("perf_analyzer ")]
    assert lines and all(line.startswith("perf_analyzer -m model_2 ") for line in lines), lines


def test_the_chart_says_which_configurations_it_draws_and_the_table_lists_them_all(
    data_dir: Path, mlp_path: Path
) -> None:
    """The walkthrough's three-precision fixed-shape sweep: six configurations ranked, the chart
    draws the best four and the default, and its caption says so (the sentence counts six)."""
    model = add_model(mlp_path, "mlp")
    precisions = (Precision.FP32, Precision.INT8_STATIC, Precision.INT8_DYNAMIC)
    job, _ = finished_sweep(model.id, precisions=precisions, batch_sizes=(1, 2))
    at = open_page("serve", job=job.id, slo=50)
    assert not at.exception
    sentence = recommendation(at)
    assert sentence.startswith("In 6 predicted configurations"), sentence
    labels = list(at.dataframe[0].value["configuration"])
    assert len(labels) == 6, labels
    default = "FP32 on CPU, no batching x1"
    also = " (the default among them)" if default in labels[:4] else f" and the default, {default}"
    caption = (
        f"The chart draws the best 4 of the 6 configurations{also}; the evidence table below "
        "lists all 6."
    )
    assert caption in [c.value for c in at.caption], [c.value for c in at.caption]


def test_a_prediction_resting_on_unstable_sweep_measurements_says_so_and_marks_its_rows(
    data_dir: Path, mlp_path: Path
) -> None:
    """The walkthrough's sweep measured most configurations unstable: the sentence names the
    pick (and the default it is compared with) resting on them, which batch size, and the
    remedy; the evidence table marks every such row. Stored again all stable, nothing is said."""
    model = add_model(mlp_path, "mlp")
    job, results = finished_sweep(model.id, batch_sizes=(1, 2))
    shaky = stored_again(job, {r.config_key for r in results})  # every measurement unstable
    at = open_page("serve", job=shaky, slo=50)
    assert not at.exception
    sentence = recommendation(at)
    table = at.dataframe[0].value.set_index("configuration")
    marks = table["rests on an unstable sweep measurement at"]
    # no dynamic batching forms batches of 1; max 2 rests on batches 1 and 2
    for label, mark in marks.items():
        sizes = "batch sizes 1, 2" if ", max 2," in label else "batch size 1"
        assert mark == sizes, (label, mark)
    pick = re.search(r"\), (.+?) meets the p99 bound of 50 ms", sentence)
    assert pick is not None, sentence
    variant = pick.group(1).split(", ")[0]
    said = (
        f"{pick.group(1)} rests on the sweep's unstable measurement of {variant} at "
        f"{marks[pick.group(1)]}"
    )
    assert said in sentence, sentence
    assert "may not hold: re-run the sweep on a quiet host." in sentence
    if "more than the default" in sentence or "less than the default" in sentence:
        assert "; the default it is compared with rests on the sweep's unstable measurement" in (
            sentence
        )

    steady = stored_again(job, set())
    at = open_page("serve", job=steady, slo=50)
    assert not at.exception
    assert "unstable" not in recommendation(at)
    assert (at.dataframe[0].value["rests on an unstable sweep measurement at"] == "").all()
