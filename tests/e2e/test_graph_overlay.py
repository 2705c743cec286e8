"""Overlays and the INT8 diff on the Graph page, in a real headless Chromium against a real
`streamlit run serve.py` (tests/dashboard.py), on a ResNet-style CNN and a BERT-style encoder
swept by the real worker with per-node profiling: the time overlay's hottest nodes are the
profile table's, the SQNR overlay carries the stored layer-loss ranking, the INT8 diff's Q/DQ
count is the variant's, and a hostile node name stays text everywhere it is shown."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import onnx
import pytest

from backend import viewer
from backend.engine.evidence import per_source_us
from backend.engine.profile import stored_profile
from backend.graphview import overlay as ov
from backend.graphview.diff import COLOURS, QDQ
from backend.models.inspect import op_histogram
from backend.reporting.profilecharts import hottest_rows
from backend.results import StoredResult
from tests.browsing import chromium, skip_without_chromium
from tests.dashboard import seeding, serve_py
from tests.e2e.test_browser import ARTIFACTS
from tests.e2e.test_signin import PASSWORD, _sign_in
from tests.graph_evidence import HOSTILE
from tests.models import make_cnn, make_transformer, save

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Swept:
    model_id: int
    source: Path
    int8: StoredResult
    int8_artifact: int  # the optimized artifact the INT8 result built
    int8_ops: dict[str, int]  # that variant's operator counts
    uploaded: list[str]  # the upload's node names as profiles name them
    hottest: list[dict]  # the Jobs page's hottest-node table of the INT8 profile
    overlay_top: list[str]  # uploaded nodes by their time share (per_source_us)
    fp32: StoredResult | None  # the CNN's FP32 result: ORT fuses each Conv+Relu into one kernel


@dataclass(frozen=True)
class Site:
    url: str
    models: dict[str, Swept]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    skip_without_chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    tmp = tmp_path_factory.mktemp("graph-overlay")
    data_dir = tmp / "data"
    swept = {}
    with seeding(data_dir):
        from backend.auth import accounts
        from backend.auth.cli import cli_principal
        from backend.models import library
        from backend.queue import jobs
        from backend.specs import SweepSpec
        from tests.pages.seed import add_model, run_sweep

        accounts.add_account(cli_principal(), "viewer", "viewer", PASSWORD)
        cnn = make_cnn(channels=8, blocks=2)
        cnn.graph.node[0].name = HOSTILE
        for kind, model, dims in (("cnn", cnn, {}), ("bert", make_transformer(), {"seq": 16})):
            path = save(model, tmp / f"{kind}.onnx")
            row = add_model(path, kind)
            spec = SweepSpec(
                # its profile, ranking and variant suffice; the CNN's FP32 run fuses Conv+Relu
                precisions=("fp32", "int8_static") if kind == "cnn" else ("int8_static",),
                batch_sizes=(1,),
                profile=True,
                calibration_samples=4,
                symbolic_dims=dims,
            )
            job = run_sweep(row.id, spec)
            stored = {s.configuration.precision.value: s for s in jobs.stored_results(job.id)}
            int8 = stored["int8_static"]
            artifact = next(
                a
                for a in library.list_artifacts(row.id)
                if a.sha256 == int8.result.optimized_sha256
            )
            source = library.onnx_path(row.id)
            variant = onnx.load(
                str(library.artifact_path(artifact.sha256)), load_external_data=False
            )
            profile = stored_profile(int8.result.telemetry)
            nodes = onnx.load(str(source), load_external_data=False).graph.node
            names = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(nodes)]
            swept[kind] = Swept(
                row.id,
                source,
                int8,
                artifact.id,
                op_histogram(variant),
                names,
                hottest_rows(profile, viewer.focus_keys(source)),
                sorted(
                    (k for k in per_source_us(profile) if k in names),
                    key=lambda k: -per_source_us(profile)[k],
                ),
                stored.get("fp32"),
            )
    log = tmp / "streamlit.log"
    with serve_py(data_dir, log, keep_as="e2e-graph-overlay-streamlit.log") as (url, _):
        yield Site(url, swept)


@pytest.fixture(scope="module")
def page(site: Site) -> Iterator[object]:
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        page.goto(f"{site.url}/")
        _sign_in(page, "viewer")
        # "Signed in as" is drawn only once the session cookie is set (the page loaded with it),
        # so every new address below is signed in without waiting for the cookie
        expect(page.get_by_text("Signed in as viewer")).to_be_visible(timeout=60_000)
        yield page


def _painted(page, url: str, kind: str) -> dict[str, str]:  # noqa: ANN001
    """Open the Graph page at `url`; once Netron has painted the overlay, {title: fill}."""
    from playwright.sync_api import expect

    page.goto(url)
    frame = page.frame_locator("iframe[title='st.iframe'], iframe").first
    expect(frame.locator("body")).to_have_attribute("data-optiboard-overlay", kind, timeout=90_000)
    # netron replaces window.eval, so attributes are read one element at a time
    return {
        node.get_attribute("data-optiboard-title"): node.get_attribute("data-optiboard-fill")
        for node in frame.locator("g.node[data-optiboard-fill]").all()
    }


def marks_of(marks: dict[str, str], node: str) -> str:
    return next(fill for title, fill in marks.items() if title.startswith(f"{node} ("))


@pytest.mark.parametrize("kind", ["cnn", "bert"])
def test_time_overlay_hottest_nodes_match_the_profile_table(
    site: Site,
    page,  # noqa: ANN001
    kind: str,
) -> None:
    swept = site.models[kind]
    result = swept.int8
    url = f"{site.url}/graph?model={swept.model_id}&overlay=time&result={result.id}"
    marks = _painted(page, url, "time")
    table = [r for r in swept.hottest if r["focus"]]
    assert table and marks
    # the browser's ranking, read back from each painted node's tooltip ("12.3% of the ...")
    share = {t.split(" (")[0]: float(t.split("): ")[1].split("%")[0]) for t in marks}
    ranked = sorted(share, key=lambda node: -share[node])
    # as backend/graphview ranks them (compared by value: equal shares may swap places)
    assert [share[k] for k in ranked[:3]] == [share[k] for k in swept.overlay_top[:3]]
    assert marks_of(marks, ranked[0]) == ov.SCALE[-1]  # the hottest is painted darkest
    for row in table[:3]:  # each row of the table is on its uploaded node, with its numbers
        title = next(t for t in marks if t.startswith(f"{row['uploaded_node']} ("))
        assert f"{row['node']} ({row['op_type']}, " in title, (row, title)
        assert f"{row['us_per_run']:.1f} us)" in title, (row, title)
    page.screenshot(path=str(ARTIFACTS / f"e2e-graph-overlay-time-{kind}.png"), full_page=True)
    legend = page.frame_locator("iframe").first.locator("#optiboard-legend")
    assert legend.locator(".optiboard-legend-row").count() == 5


def test_fused_conv_relu_time_is_painted_on_the_conv_not_the_relu(site: Site, page) -> None:  # noqa: ANN001
    """The walkthrough's defect: ORT's Conv+Relu kernel ('x0_nchwc', named after the Relu's
    output) painted the Relu dark red and left the Conv unpainted."""
    swept = site.models["cnn"]
    assert swept.fp32 is not None
    url = f"{site.url}/graph?model={swept.model_id}&overlay=time&result={swept.fp32.id}"
    marks = _painted(page, url, "time")
    ops = {t.split(" (")[0]: t.split(" (")[1].split(")")[0] for t in marks}
    share = {t.split(" (")[0]: float(t.split("): ")[1].split("%")[0]) for t in marks}
    convs = [n for n, op in ops.items() if op == "Conv"]
    assert len(convs) == 5, ops  # every Conv of the upload is painted
    relus = [n for n, op in ops.items() if op == "Relu"]
    assert max(share[n] for n in relus) < min(share[n] for n in convs) / 10, share
    assert all(marks_of(marks, n) == ov.SCALE[0] for n in relus)  # the lightest bin
    hottest = max(share, key=share.__getitem__)
    assert ops[hottest] != "Relu" and marks_of(marks, hottest) == ov.SCALE[-1]
    fused = next(t for t in marks if t.startswith("Conv_") and " (Conv): " in t)
    assert "fused with Relu_" in fused and "(by counted FLOPs)" in fused, fused
    note = page.get_by_text("split among all the nodes it ran by their FLOPs")
    assert note.count() == 1
    page.screenshot(path=str(ARTIFACTS / "e2e-graph-overlay-fused-fp32.png"), full_page=True)


@pytest.mark.parametrize("kind", ["cnn", "bert"])
def test_sqnr_overlay_matches_the_layer_loss_table(site: Site, page, kind: str) -> None:  # noqa: ANN001
    swept = site.models[kind]
    rows = swept.int8.result.environment["accuracy_loss"]
    url = f"{site.url}/graph?model={swept.model_id}&overlay=sqnr&result={swept.int8.id}"
    marks = _painted(page, url, "sqnr")
    uploaded = {
        n.name or f"{n.op_type}_{i}" for i, n in enumerate(onnx.load(str(swept.source)).graph.node)
    }
    mapped = [r for r in rows if r["node"] in uploaded]
    assert mapped, rows
    for row in mapped:
        title = next(t for t in marks if t.startswith(f"{row['node']} ("))
        assert f"loses {row['loss_db']:.1f} dB of SQNR" in title, title
        assert f"{row['input_sqnr_db']:.1f} dB in, {row['output_sqnr_db']:.1f} dB out" in title


def test_int8_diff_counts_match_the_variants_node_counts(site: Site, page) -> None:  # noqa: ANN001
    swept = site.models["cnn"]
    url = f"{site.url}/graph?model={swept.model_id}&artifact={swept.int8_artifact}"
    marks = _painted(page, url, "diff")
    ops = swept.int8_ops
    qdq = ops["QuantizeLinear"] + ops["DequantizeLinear"]
    assert sum(fill == COLOURS[QDQ][0] for fill in marks.values()) == qdq
    metric = page.get_by_test_id("stMetric").filter(has_text=QDQ)
    assert metric.get_by_test_id("stMetricValue").inner_text().strip() == str(qdq)
    page.screenshot(path=str(ARTIFACTS / "e2e-graph-overlay-int8-diff.png"), full_page=True)
    summary = page.locator("p", has_text="nodes uploaded").first.inner_text()
    assert f"{sum(ops.values())} in this variant" in summary, summary


def test_hostile_node_names_render_as_text(site: Site, page) -> None:  # noqa: ANN001
    swept = site.models["cnn"]
    url = (
        f"{site.url}/graph?model={swept.model_id}&overlay=time&result={swept.int8.id}"
        f"&node={quote(HOSTILE, safe='')}"
    )
    marks = _painted(page, url, "time")
    assert any(t.startswith(f"{HOSTILE} (Conv)") for t in marks)
    frame = page.frame_locator("iframe").first
    assert frame.locator("img[src=x]").count() == 0 and page.locator("img[src=x]").count() == 0
    assert frame.locator("body").get_attribute("data-optiboard-focused") == HOSTILE
    title = frame.locator(f"g.node[data-optiboard-title^='{HOSTILE[:4]}'] title").first
    assert title.text_content().startswith(HOSTILE)  # the tooltip is that text, unparsed
    assert page.title() != "pwned" and page.get_by_text(f"selects node {HOSTILE}").count() == 1
