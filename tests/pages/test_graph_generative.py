"""Graph page on a generative model: it draws the small model.onnx graph and never reads the
weights file beside it (which may be several GB)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

from backend.models import library
from backend.models.ingest import ingest_file
from tests import llm_models
from tests.pages.seed import open_page, texts


def test_graph_of_a_genai_model_never_reads_its_weights(data_dir: Path, tmp_path: Path) -> None:
    upload = llm_models.genai_zip(tmp_path)
    model = ingest_file(upload, upload.name)
    weights = next(a for a in library.list_artifacts(model.id) if a.filename == "model.onnx.data")
    blob = library.artifact_path(weights.sha256)
    blob.chmod(0o600)
    blob.write_bytes(b"")  # were the page to read the weights, it would fail on this

    at = open_page("graph", model=model.id)
    assert not at.error  # nothing asked yet: a prompt in the graph's own names, no refusal
    prompt = " ".join(i.value for i in at.info).replace("\\", "")
    assert "This graph has a free dimension 'sequence_length'" in prompt, prompt
    free = library.symbolic_dims(model)  # the past's and total length's names the builder chose
    example = at.text_input(key="cost_dims").placeholder
    assert "sequence_length=128" in example and "seq=" not in example.replace("sequence_", "")
    dims = ", ".join(f"{d}={1 if d == 'sequence_length' else 16}" for d in free)  # a decode step
    at.text_input(key="cost_dims").set_value(dims).run()

    assert not at.exception and not at.error, texts(at)
    src = at.get("iframe")[0].proto.src
    assert parse_qs(urlparse(src).query)["identifier"] == ["model.onnx"]
    assert at.get("plotly_chart")  # the operator histogram, from the graph alone
    assert at.metric  # the compute cost, counted from the graph's shapes

    at.selectbox(key="url_overlay").set_value("memory").run()  # from the graph's shapes too
    assert not at.exception and not at.error, texts(at)
    overlay = parse_qs(urlparse(at.get("iframe")[0].proto.src).query)["overlay"][0]
    assert "/media/" in overlay and "Activation memory at batch 1" in texts(at)
