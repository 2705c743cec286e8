"""The Serve page's download: the recommended configuration's Triton model repository, as
`optiboard serve export` writes it, for the file the recommendation rests on."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from backend.serving.download import repository_zip
from backend.serving.export import parse_config
from backend.serving.view import serve_view
from backend.specs import Precision
from tests.pages.seed import add_model, finished_sweep, open_page


def test_the_recommended_configuration_downloads_as_a_repository_zip(
    data_dir: Path, mlp_path: Path
) -> None:
    """A walkthrough found no way to take a recommended configuration from the page to Triton
    but a terminal command."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 8))
    view = serve_view(job.id, 50.0, 0.0, 0.5, 0.1)
    best = view.recommendation.best
    assert best is not None
    name, data = repository_zip(job.id, best, view.model_name)
    assert name == f"{view.model_name}-triton.zip"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(archive.namelist())
        assert f"{view.model_name}/1/model.onnx" in names
        config = parse_config(archive.read(f"{view.model_name}/config.pbtxt").decode())
    policy = best.candidate.policy
    assert config.name == view.model_name
    assert config.HasField("dynamic_batching") == policy.dynamic_batching
    assert config.instance_group[0].count == policy.instance_count

    at = open_page("serve", job=job.id, slo=50, overhead=0.5)  # the settings of the view above
    assert not at.exception, at.exception
    [button] = [b for b in at.get("download_button") if "Triton model repository" in b.proto.label]
    assert best.candidate.label in button.proto.label
