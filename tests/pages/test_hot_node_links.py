"""The hottest nodes of a real profile link into the Graph page's Netron view with that node
selected (the selection itself is checked in Chromium by tests/backend/test_viewer_focus.py)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import onnx

from backend.models import library
from backend.queue import jobs
from tests.pages.seed import open_page, texts
from tests.pages.test_profile_views import _profiled_job


def test_hottest_nodes_link_to_the_graph_page_focused_on_each_node(
    data_dir: Path, tmp_path: Path
) -> None:
    job_id = _profiled_job(tmp_path, profile=True)
    model_id = jobs.get_job(job_id).model_id
    at = open_page("jobs", job=job_id)
    at.selectbox(key="profile").select_index(1).run()  # the INT8 configuration
    assert not at.exception
    table = next(d.value for d in at.dataframe if "graph" in d.value.columns)
    linked = table.dropna(subset=["graph"])
    assert len(linked) >= len(table) // 2, table  # most hot nodes map to an uploaded node
    graph = onnx.load(str(library.onnx_path(model_id))).graph
    findable = {n.name for n in graph.node} | {t for n in graph.node for t in n.output}
    for link in linked["graph"]:
        parsed = urlparse(link)
        assert parsed.path == "graph"
        query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
        assert query["model"] == str(model_id) and query["node"] in findable

    query = {k: v[0] for k, v in parse_qs(urlparse(linked["graph"].iloc[0]).query).items()}
    page = open_page("graph", **query)
    assert not page.exception
    src = parse_qs(urlparse(page.get("iframe")[0].proto.src).query)
    assert src["node"] == [query["node"]]
    assert query["overlay"] == "time" and "/media/" in src["overlay"][0]  # coloured by its profile
    assert f"Time share: job {job_id}" in texts(page).replace("\\", "")
    shown = linked["uploaded_node"].iloc[0]  # as the table names it (OP_INDEX if unnamed)
    assert f"Netron selects node {shown} once" in texts(page).replace("\\", "")

    page = open_page("graph", **(query | {"result": "999"}))  # a result since deleted
    assert not page.exception
    assert "The link's result=999 names no result here; showing " in texts(page).replace("\\", "")
