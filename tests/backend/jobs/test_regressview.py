"""A regression check's summary over its configurations and models: a configuration with too
few samples keeps its model from being called the same, and the overall line names it; every
verdict has its icon on the Regression page and the baselines' table."""

from __future__ import annotations

from backend.jobs.regressview import FAILED, PairRow, model_verdict, overall_line
from backend.reporting import regression as stats
from pages.components.baselines import VERDICT_ICONS
from pages.components.regression import ICONS


def _row(verdict: str) -> PairRow:
    return PairRow("cfg", "default", "default", "1.32.0", "1.32.0", verdict, "", None)


def test_too_few_samples_on_one_configuration_keeps_the_model_from_same() -> None:
    assert model_verdict([_row(stats.SAME), _row(stats.TOO_FEW)]) == stats.TOO_FEW
    assert model_verdict([_row(stats.TOO_FEW), _row(stats.SLOWER)]) == stats.SLOWER
    assert model_verdict([_row(stats.TOO_FEW), _row(FAILED)]) == FAILED
    assert model_verdict([_row(stats.SAME), _row(stats.SAME)]) == stats.SAME


def test_the_overall_line_names_the_models_with_too_few_samples() -> None:
    verdicts = {"model 1": stats.TOO_FEW, "model 2": stats.SAME, "model 3": stats.SLOWER}
    assert overall_line(verdicts, 3) == (
        "slower on 1 of 3 models: model 3; too few samples on 1: model 1; the same on 1"
    )
    assert overall_line({"model 1": stats.TOO_FEW}, 2) == (
        "too few samples on 1 of 2 models: model 1; 1 not measured yet"
    )
    assert overall_line({"model 1": stats.SAME, "model 2": stats.SAME}, 2) == (
        "the same on all 2 models"
    )


def test_every_verdict_has_its_icon_on_both_views() -> None:
    assert set(stats.VERDICTS) | {FAILED} == set(ICONS)
    assert set(stats.VERDICTS) == set(VERDICT_ICONS)
