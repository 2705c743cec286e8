"""Names that come from uploads are shown as text on every page, never as links or images."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from streamlit.testing.v1 import AppTest

from pages.components.formatting import plain
from tests import models as model_factory
from tests.pages.seed import add_model, finished_sweep, open_page

EVIL = '[x](http://evil)![b](http://evil/b.png)<a href="http://evil/a">a</a>'
PAGES = {
    "home": {},
    "models": {},
    "graph": {},
    "optimize": {},
    "jobs": {},
    "compare": {"jobs": "1"},
    "compatibility": {},
}
# Elements whose text Streamlit shows verbatim (no Markdown): untrusted text may appear raw there.
VERBATIM = {"text", "code", "arrow_data_frame", "dataframe", "json", "iframe"}
# Plotly reads a small HTML subset in its text (links included) but no Markdown.
PLOTLY = "plotly_chart"
PLOTLY_TAG = re.compile(r"<(a|img)\b", re.IGNORECASE)
# Option lists of these widgets are plain text in the browser; their label and help are Markdown.
PLAIN_OPTIONS = {"selectbox", "multiselect"}
# Markdown a link or image needs: "](" or "![" with no backslash before it, or a bare URL.
RENDERS_AS_LINK = re.compile(r"(?<!\\)\]\(|(?<!\\)!\[|https?://")


def _proto_strings(message: object) -> Iterator[str]:
    """Every string in a protobuf message, nested messages and repeated fields included."""
    for _, value in message.ListFields():  # type: ignore[attr-defined]
        items = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        for item in items:
            if isinstance(item, str):
                yield item
            elif hasattr(item, "ListFields"):
                yield from _proto_strings(item)


def _json_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def _leaks(at: AppTest) -> list[tuple[str, str]]:
    """Text that would render as a link or image: Markdown ones, or HTML tags inside Plotly."""
    found = []
    for kind, text in _markdown_strings(at):
        pattern = PLOTLY_TAG if kind == PLOTLY else RENDERS_AS_LINK
        if pattern.search(text):
            found.append((kind, text))
    return found


def _strings(node: object) -> Iterator[tuple[str, str]]:
    """(element type, text) for every string of every element that renders Markdown."""
    proto = getattr(node, "proto", None)
    kind = str(getattr(node, "type", ""))
    if proto is not None and kind == PLOTLY:
        yield from ((kind, text) for text in _json_strings(json.loads(proto.spec)))
    elif proto is not None and kind in PLAIN_OPTIONS:
        yield from ((kind, text) for text in (proto.label, proto.help, proto.placeholder))
    elif proto is not None and kind not in VERBATIM and hasattr(proto, "ListFields"):
        yield from ((kind, text) for text in _proto_strings(proto))
    for child in getattr(node, "children", {}).values():
        yield from _strings(child)


def _markdown_strings(at: AppTest) -> list[tuple[str, str]]:
    return [item for root in (at.main, at.sidebar) for item in _strings(root)]


def test_a_model_named_like_markdown_links_renders_no_link_or_image_on_any_page(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, name=EVIL)
    finished_sweep(model.id, batch_sizes=(1,), label=EVIL)
    for page, query in PAGES.items():
        at = open_page(page, model=model.id, **query)
        assert not at.exception, (page, at.exception)
        leaks = _leaks(at)
        assert not leaks, (page, leaks)
        if page == "models":  # the scan reads the page's text: the name is there, escaped
            assert any(plain(EVIL) in text for _, text in _markdown_strings(at))
            assert any(EVIL in str(v) for v in at.dataframe[0].value["name"])
        if page == "compare":  # and it reads chart text: the name is there, tag-escaped
            assert any("&lt;a href" in t for k, t in _markdown_strings(at) if k == PLOTLY)


def test_an_op_domain_and_node_name_shaped_like_links_render_as_text(
    data_dir: Path, tmp_path: Path
) -> None:
    model = model_factory.make_custom_op_model(domain="[d](http://evil/d)", op_type="MyOp")
    model.graph.node[1].name = "![n](http://evil/n.png)"
    added = add_model(model_factory.save(model, tmp_path / "custom.onnx"), name="custom")
    assert any("http://evil/d" in w for w in added.warnings)  # ingest quotes the domain
    op = "[d](http://evil/d)::MyOp"
    for page, query in {"models": {}, "graph": {}, "compatibility": {"op": op}}.items():
        at = open_page(page, model=added.id, **query)
        assert not at.exception, (page, at.exception)
        assert not _leaks(at), (page, _leaks(at))
    nodes = at.dataframe[0].value  # the compatibility page's nodes behind the custom op
    assert list(nodes["node"]) == ["![n](http://evil/n.png)"]  # a table cell: shown as written


def test_a_reopened_sweeps_evaluation_file_named_like_markdown_shows_its_name_as_text(
    data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    """The Optimize page's radio labels render Markdown; the stored evaluation file's name (as
    uploaded) is one of them."""
    import numpy as np

    from backend.queue import jobs
    from backend.specs import SweepSpec

    name = "[x](http://evil) ![i](http://evil/i.png).npz"
    model = add_model(mlp_path, "mlp")
    npz = tmp_path / "holdout.npz"
    np.savez(npz, x=np.ones((4, 16), np.float32))
    sha = jobs.store_evaluation(model.id, npz, filename=name)
    query = jobs.spec_to_query(SweepSpec(evaluation_sha256=sha))
    at = open_page("optimize", model=model.id, **query)
    assert not at.exception
    radio = at.radio(key="evaluation_source")
    assert radio.value == "stored"
    label = radio.options[0]
    assert not RENDERS_AS_LINK.search(label), label
    assert label.endswith(plain(name))  # the whole name is there, each character literal
    assert not _leaks(at), _leaks(at)
