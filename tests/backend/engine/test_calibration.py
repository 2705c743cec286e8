"""Calibration feeds for static INT8, joined to the model's fixed batch."""

from __future__ import annotations

import numpy as np

from backend.engine.calibration import batched_feeds


def test_batched_feeds_join_samples_and_cycle_to_fill_the_last_batch() -> None:
    feeds = [{"x": np.full((1, 2), i, np.float32)} for i in range(5)]
    joined = batched_feeds(feeds, 4)
    assert [f["x"].shape for f in joined] == [(4, 2), (4, 2)]
    assert joined[1]["x"][:, 0].tolist() == [4, 0, 1, 2]
    assert batched_feeds(feeds, None) is feeds
