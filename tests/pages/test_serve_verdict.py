"""Serve page, predicted view: how the verdict, its caveats, its figures and its inputs read
(a browser walkthrough found a 330-word green paragraph, a cut cost column and wrapped labels)."""

from __future__ import annotations

import json
from pathlib import Path

from backend.serving.servercosts import remedy
from backend.serving.view import serve_view
from backend.specs import Precision
from tests.pages.seed import (
    add_model,
    finished_sweep,
    open_page,
    recommendation,
    texts,
    verdict_box,
)

UNCALIBRATED = "Uncalibrated: the rates below are predicted from the sweep's in-process latency"


def test_an_uncalibrated_prediction_is_headed_as_such_and_not_shown_as_a_firm_answer(
    data_dir: Path, mlp_path: Path
) -> None:
    """A sweep alone: the CLI's first line is the page's first alert, the verdict is one
    sentence in an info box (not a green success), and what it rests on is a list below it,
    every sentence of the CLI's paragraph kept."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 8))
    at = open_page("serve", job=job.id, slo=50)
    assert not at.exception
    rec = serve_view(job.id, 50.0).recommendation
    assert rec.best is not None and rec.details
    first = at.main.warning[0].value
    assert first.startswith(UNCALIBRATED) and "run a serving study of this model" in first, first
    assert not at.main.success, [s.value for s in at.main.success]  # the answer is not firm
    assert verdict_box(at).value == rec.verdict in [i.value for i in at.main.info]
    assert "Predicted, not measured" not in rec.verdict  # the detail is the list's
    listed = next(m.value for m in at.main.markdown if m.value.startswith("- "))
    assert listed.splitlines() == [f"- {detail}" for detail in rec.details]
    assert recommendation(at) == rec.sentence  # every fact the CLI prints


def test_the_remedy_is_said_once_in_the_headline_not_again_as_the_first_detail(
    data_dir: Path, mlp_path: Path
) -> None:
    """The "Uncalibrated: ..." line ended with the action that measures the server's costs, and
    the list's first bullet ended with the same sentence again: now the headline says it, the
    bullet says what the prediction rests on."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 8))
    at = open_page("serve", job=job.id, slo=50)
    assert not at.exception
    action = remedy(job.id, 50.0)  # no study of this model: "To count them, run a serving ..."
    assert action.startswith("To count them, run a serving study of this model"), action
    page = texts(at)
    assert page.count(action) == 1, page
    assert at.main.warning[0].value.endswith(action)  # in the headline, above the figures
    listed = next(m.value for m in at.main.markdown if m.value.startswith("- "))
    assert "- Predicted, not measured: it rests on the sweep's in-process" in listed, listed


def test_the_cost_column_has_the_registry_digits_and_a_short_header(
    data_dir: Path, mlp_path: Path
) -> None:
    """The column read "$ per M inferences (at that rate" and "0.04" beside $0.049 in the
    sentence: now the registry's 4 significant digits and a header that fits."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 8))
    at = open_page("serve", job=job.id, slo=50)
    assert not at.exception
    table = at.dataframe[0]
    assert "$ per M inferences" in table.value.columns
    columns = json.loads(table.proto.columns)
    cost = columns["$ per M inferences"]
    assert cost["type_config"]["format"] == "%.4g", cost
    assert "at the rate under the bound" in cost["help"], cost
    # its rates grouped as the sentences write them (30,180, not 30180)
    assert columns["rate under the bound (req/s)"]["type_config"]["format"] == "localized"


def test_the_prediction_inputs_have_short_labels_and_say_the_rest_in_help(
    data_dir: Path, mlp_path: Path
) -> None:
    """At 1100 px "Per-request overhead (ms)" wrapped to four lines and pushed its input out of
    line with the others: every label fits one line, the detail is in its help."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 8))
    at = open_page("serve", job=job.id)
    assert not at.exception
    for key in ("slo", "rate", "overhead", "exec"):
        field = at.number_input(key=f"url_{key}")
        assert len(field.label) <= 16, field.label
    assert at.number_input(key="url_overhead").help.startswith("Per-request overhead")
    assert at.number_input(key="url_exec").help.startswith("Server cost per batch")
