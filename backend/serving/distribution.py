"""The stored requests of a study's load points, read back: the Serve page's latency distribution
of the points picked and `optiboard export --format json`'s samples of every point.

Each point measured since migration 0015 has its requests' timings stored beside it
(backend/serving/samples.py); a point stored before has none, and both say so in one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from backend.serving import charts
from backend.serving.samples import RequestSamples
from backend.serving.view import StudyView
from storage.repo import serving as point_store

BEFORE = "stored before Optiboard kept each request's latency (migration 0015)"


def stored_samples(point_ids: list[int]) -> dict[int, RequestSamples]:
    """The samples of those points that have them, by point id."""
    return {
        point_id: RequestSamples.unpacked(stored)
        for point_id, stored in point_store.point_samples(point_ids).items()
    }


def no_samples_sentence(names: list[str]) -> str:
    """One sentence for the points stored before their requests were kept."""
    if len(names) == 1:
        return f"{names[0]} was {BEFORE}, so it has no samples to draw or recompute from."
    listed = "; ".join(names)
    return f"{len(names)} points ({listed}) were {BEFORE}, so they have no samples to draw."


@dataclass(frozen=True)
class Distribution:
    """The figure of the picked points that have samples (None when none has), and what the
    page says beside it: which points have none, which keep one request in k."""

    figure: go.Figure | None
    sentences: list[str]


def latency_distribution(view: StudyView, point_ids: list[int]) -> Distribution:
    """The picked points' latency CDFs, each point named as the page names it; ids that are not
    the study's measured points are ignored (the page offers only those)."""
    labels = view.point_labels
    picked = [i for i in dict.fromkeys(point_ids) if i in labels]
    samples = stored_samples(picked)
    sentences = []
    missing = [labels[i] for i in picked if i not in samples]
    if missing:
        sentences.append(no_samples_sentence(missing))
    sentences += [
        f"{labels[i]}: drawn from {s.kept:,} of its {s.total:,} requests ({s.rule})."
        for i, s in samples.items()
        if s.thinned
    ]
    drawn = {labels[i]: samples[i].latency_ms for i in picked if i in samples}
    return Distribution(charts.latency_cdf(drawn) if drawn else None, sentences)
