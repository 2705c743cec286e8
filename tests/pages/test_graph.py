"""Graph page: the Netron iframe with a private model URL, operators and I/O."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from backend.specs import Precision
from tests import hostile, models
from tests.pages.seed import add_model, metric_rows, open_page, texts
from tests.rss import MB, rss_bytes


def _iframe_src(at) -> str:  # noqa: ANN001 - AppTest
    frames = at.get("iframe")
    assert frames, "the Graph page must embed the viewer"
    return frames[0].proto.src


def test_empty_graph_page_points_to_upload(data_dir: Path) -> None:
    at = open_page("graph")
    assert not at.exception
    assert "No models yet" in texts(at)
    assert not at.get("iframe")


def test_graph_embeds_netron_from_the_dashboard_with_a_session_private_model_url(
    data_dir: Path, cnn_path: Path
) -> None:
    model = add_model(cnn_path, "cnn")
    at = open_page("graph", model=model.id)
    assert not at.exception
    src = _iframe_src(at)
    parsed = urlparse(src)
    assert parsed.path == "/app/static/netron/index.html" and not parsed.netloc
    query = parse_qs(parsed.query)
    assert query["identifier"] == ["cnn.onnx"]
    assert "/media/" in query["url"][0]  # Streamlit's media store (AppTest mounts it at /mock)
    # Another session (a teammate opening the same link) gets its own URL for the same model.
    other = _iframe_src(open_page("graph", model=model.id))
    assert parse_qs(urlparse(other).query)["url"] != query["url"]
    # The viewer's files were prepared, never the model itself.
    static = Path(__file__).resolve().parents[2] / "static"
    assert not list(static.rglob("*.onnx"))


def test_graph_shows_operator_histogram_and_io_table(data_dir: Path, cnn_path: Path) -> None:
    model = add_model(cnn_path, "cnn")
    at = open_page("graph", model=model.id)
    charts = at.get("plotly_chart")
    assert charts
    io = at.dataframe[0].value
    assert list(io["role"]) == ["input", "output"]
    assert list(io["name"]) == ["input", "logits"]


def test_a_fixed_batch_variants_inputs_and_cost_are_its_own_not_the_uploads(
    data_dir: Path, cnn_path: Path
) -> None:
    """A walkthrough saw [batch, 3, 32, 32] beside Netron's 1x3x32x32 for a fixed-b1 variant:
    the table showed the upload's inputs for every graph picked. Another saw a fixed-b8
    variant's "Batch size" at 1 beside "Batch 8" and 8 samples' FLOPs: the input did nothing."""
    from backend.models import library
    from backend.models.cost import model_cost
    from tests.pages.seed import finished_sweep

    model = add_model(cnn_path, "cnn")
    finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(2,))
    variant = next(a for a in library.list_artifacts(model.id) if a.kind == "optimized")
    at = open_page("graph", model=model.id, artifact=variant.id)
    assert not at.exception, at.exception
    io = next(d.value for d in at.dataframe if "role" in d.value.columns).set_index("role")
    assert io.loc["input", "shape"].startswith("[2, "), io
    batch = at.number_input[0]
    assert (batch.value, batch.proto.disabled) == (2, True)
    # the diff against the upload counts seven kinds, four to a row: seven cut "Q/DQ inse..."
    assert {"Q/DQ inserted", "removed"} <= {m.label for m in at.metric}
    diff_rows = [row for row in metric_rows(at.main) if {"kept", "removed"} & set(row)]
    assert [len(row) for row in diff_rows] == [4, 3], diff_rows
    assert batch.help == "This graph's inputs fix its batch at 2."
    nodes = next(d.value for d in at.dataframe if "FLOPs" in d.value.columns)
    assert int(nodes["FLOPs"].sum()) == model_cost(cnn_path, batch_size=2).flops
    plain = open_page("graph", model=model.id)
    upload = next(d.value for d in plain.dataframe if "role" in d.value.columns).set_index("role")
    assert not upload.loc["input", "shape"].startswith("[2, "), upload  # symbolic there
    assert not plain.number_input[0].proto.disabled  # the upload's batch is the count's to set


def test_graph_shows_the_static_compute_cost_per_node_and_for_a_batch(
    data_dir: Path, cnn_path: Path, transformer_path: Path
) -> None:
    from backend.models.cost import model_cost

    model = add_model(cnn_path, "cnn")
    at = open_page("graph", model=model.id)
    assert not at.exception and "Compute cost" in texts(at)
    nodes = next(d.value for d in at.dataframe if "FLOPs" in d.value.columns)
    expected = model_cost(cnn_path, batch_size=1)
    assert int(nodes["FLOPs"].sum()) == expected.flops and len(nodes) == len(expected.nodes)
    at.number_input[0].set_value(4).run()
    nodes = next(d.value for d in at.dataframe if "FLOPs" in d.value.columns)
    assert int(nodes["FLOPs"].sum()) == 4 * expected.flops
    transformer = add_model(transformer_path, "tiny-bert")
    at = open_page("graph", model=transformer.id)
    # a prompt naming the dimension, not an error nobody caused; its box's example is the same
    assert not at.exception and not at.error
    prompt = " ".join(i.value for i in at.info).replace("\\", "")  # plain() escapes
    assert "This graph has a free dimension 'seq' without a value" in prompt, prompt
    assert at.text_input(key="cost_dims").placeholder == "seq=128"
    # the example one click away: the LLM's four dimensions had to be typed from the placeholder
    at.button(key="cost_dims_example").click().run()
    assert at.text_input(key="cost_dims").value == "seq=128" and not at.info
    assert any("FLOPs" in d.value.columns for d in at.dataframe)
    at.text_input(key="cost_dims").set_value("seq=16").run()
    assert any("FLOPs" in d.value.columns for d in at.dataframe)


def test_a_cost_bomb_is_counted_outside_the_web_process_and_a_huge_dim_is_refused(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shape -> Concat -> ConstantOfShape at seq = 20,000: ORT's symbolic shape inference holds
    seq^2 int64 (3.2 GB). Counted in the page (as on 51ca28b) that grows this process by
    gigabytes; counted in the limited child it ends at the child's memory limit with a sentence."""
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "2048")
    model = add_model(hostile.cost_bomb(tmp_path / "cost_bomb.onnx"), "bomb")
    at = open_page("graph", model=model.id)
    assert not at.exception
    before = rss_bytes()
    at.text_input(key="cost_dims").set_value("seq=20000").run()
    grown = (rss_bytes() - before) / MB
    assert not at.exception
    errors = " ".join(e.value for e in at.error).replace("\\", "")  # show_error escapes Markdown
    assert "memory limit" in errors and "compute cost" in errors, errors
    assert grown < 150, f"the page process grew by {grown:.0f} MB"
    at.text_input(key="cost_dims").set_value("seq=5000000").run()
    errors = " ".join(e.value for e in at.error).replace("\\", "")  # show_error escapes Markdown
    assert "seq = 5,000,000 is outside 0 to 1,048,576" in errors, errors
    assert not any("FLOPs" in d.value.columns for d in at.dataframe)


def test_a_node_link_selects_by_the_shown_name_and_says_that_name(
    data_dir: Path, tmp_path: Path
) -> None:
    """node= takes the name the cost table, Compatibility and profiles show (Relu_3, unnamed in
    the file), or the tensor a Jobs link names it by (r); Netron gets what it can select (the
    node's first output) and the caption names the node as shown. A body's node selects its If;
    a name that matches nothing selects nothing and is said so."""
    path = models.save(models.make_unnamed_if(), tmp_path / "unnamed_if.onnx")
    model = add_model(path, "unnamed_if")
    for asked, netron, said in (
        ("Relu_3", ["r"], "Netron selects node Relu_3 once the graph is drawn."),
        ("r", ["r"], "Netron selects node Relu_3 once the graph is drawn."),
        (
            "Sigmoid_1",
            ["y"],
            "Node Sigmoid_1 is inside If_2's else_branch: Netron selects If_2, the node "
            "holding that body, once the graph is drawn.",
        ),
        (
            "Relu_9",
            None,
            "No node of this graph is named Relu_9 or produces a tensor of that name, so "
            "Netron selects none.",
        ),
    ):
        at = open_page("graph", model=model.id, node=asked)
        assert not at.exception
        assert parse_qs(urlparse(_iframe_src(at)).query).get("node") == netron, asked
        shown = texts(at).replace("\\", "")
        assert said in shown, shown
        assert shown.count("Netron selects") == 1


def test_the_compute_cost_counts_the_parameters_the_models_page_counts(
    data_dir: Path, tmp_path: Path
) -> None:
    """`wt` (16x16) is read only inside the If's then_branch: the Graph page's cost counted it
    nowhere (137 against the Models page's 138 in the walkthrough)."""
    path = models.save(models.make_unnamed_if(), tmp_path / "unnamed_if.onnx")
    model = add_model(path, "unnamed_if")
    assert model.parameter_count == 1 + 16 * 16 + 16 * 8 + 8
    at = open_page("graph", model=model.id)
    assert not at.exception
    assert f"Parameters={model.parameter_count}" in texts(at)
