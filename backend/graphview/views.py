"""What the Graph page asks for: the results an overlay can be drawn from, the overlay itself,
and a variant's diff with the profile of the result that built it. No streamlit here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from backend.engine.layerloss import from_dicts
from backend.engine.profile import Profile, stored_profile
from backend.errors import UserError
from backend.graphview import overlay as ov
from backend.graphview.diff import VariantDiff, variant_diff
from backend.graphview.structure import GraphStructure, read_structure
from backend.results import StoredResult
from storage.repo import results as result_store


def _has_data(result: StoredResult, kind: str) -> bool:
    if kind == "sqnr":
        return bool(result.result.environment.get("accuracy_loss"))
    return bool(result.result.telemetry.get("profile_sha256"))


def results_for(model_id: int, kind: str) -> list[StoredResult]:
    """The model's stored results an overlay of `kind` can be drawn from, newest first; a
    regression check's side that ran another model (one of several, or B's own upload) is
    that model's, not its job's (environment["model_id"])."""
    rows = result_store.list_results(model_id=model_id)
    stored = [StoredResult.from_row(row) for row in rows]
    own = [s for s in stored if s.result.environment.get("model_id", model_id) == model_id]
    return [s for s in reversed(own) if s.measured and _has_data(s, kind)]


def result_label(result: StoredResult) -> str:
    return f"job {result.job_id}: {result.configuration.label} (result {result.id})"


def result_overlay(kind: str, structure: GraphStructure, result: StoredResult) -> ov.Overlay:
    """time, placement (from the result's profile) or sqnr (its stored INT8 layer ranking)."""
    label = result_label(result)
    if kind == "sqnr":
        losses = from_dicts(result.result.environment.get("accuracy_loss") or [])
        return ov.sqnr_overlay(structure, losses, label)
    profile = stored_profile(result.result.telemetry)
    if profile is None:
        raise UserError(f"Result {result.id} has no per-node profile; run it with profiling on.")
    if kind == "time":
        return ov.time_overlay(structure, profile, label)
    return ov.placement_overlay(structure, profile, label)


@dataclass
class DiffView:
    diff: VariantDiff
    profile: Profile | None  # the variant's own profile, when the result that built it has one
    result: StoredResult | None


def variant_view(uploaded: Path, variant: Path, job_id: int | None, config_key: str) -> DiffView:
    """The diff of `variant` against the upload, with the profile of the result that built it."""
    diff = variant_diff(read_structure(uploaded), read_structure(variant))
    built = None
    if job_id is not None:
        rows = result_store.list_results(job_ids=[int(job_id)])
        built = next(
            (s for s in map(StoredResult.from_row, rows) if s.config_key == config_key), None
        )
    profile = stored_profile(built.result.telemetry) if built is not None else None
    return DiffView(diff, profile, built)
