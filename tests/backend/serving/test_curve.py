"""The measured latency-vs-batch curve that the batcher simulation is fed with."""

from __future__ import annotations

import pytest

from backend.errors import UserError
from backend.serving.curve import measure_latency_curve, measure_model_curve
from backend.serving.server import TritonServer


def test_curve_has_one_compute_time_per_size_and_the_request_overhead(
    server: TritonServer,
) -> None:
    curve = measure_latency_curve(server.endpoint, (1, 4, 16), requests_per_size=8)
    assert curve.batch_sizes == (1, 4, 16)
    assert all(ms > 0 for ms in curve.compute_ms)
    assert curve.overhead_ms > 0 and curve.compute_jitter >= 0


def test_curve_beyond_the_servers_maximum_batch_is_refused(server: TritonServer) -> None:
    with pytest.raises(UserError, match="exceeds the server's maximum batch size 16"):
        measure_latency_curve(server.endpoint, (1, 32))


@pytest.mark.parametrize("sizes", [(0, 2), (-1,), ()], ids=["0,2", "-1", "none"])
def test_sizes_below_one_are_refused_before_a_server_starts(tmp_path, sizes) -> None:
    """`serve curve --batch-sizes 0,2` started Triton before the child refused the 0; -1 was
    refused as "the maximum batch size" the user never gave; none was max()'s ValueError. The
    model is never read: the sizes are refused first."""
    with pytest.raises(UserError, match=r"^A latency curve needs batch sizes of 1 or more"):
        measure_model_curve(tmp_path / "never-served.onnx", sizes)
