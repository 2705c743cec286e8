"""A node's replicas meet at a barrier of marker files; the folders of groups long past it are
swept at the next start line, so a node does not keep one per replicated configuration."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from backend.cluster.task import REPLICAS_FOLDER, start_line


def test_a_start_line_sweeps_only_the_barriers_of_groups_long_past(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = tmp_path / REPLICAS_FOLDER
    old, recent = root / "old-group", root / "recent-group"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "0").touch()
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))

    start_line("new-group", replica=0, count=1, timeout_s=60)

    assert sorted(p.name for p in root.iterdir()) == ["new-group", "recent-group"]
    assert (root / "new-group" / "0").is_file()
