"""Accuracy metrics checked on hand-made arrays whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from backend.engine.accuracy import compare_outputs


def test_identical_outputs_are_a_perfect_match() -> None:
    scores = np.array([[0.1, 0.9, 0.0], [0.7, 0.2, 0.1]], np.float32)
    report = compare_outputs([[scores]], [[scores.copy()]])
    assert report.max_abs_error == 0.0
    assert report.mean_rel_error == 0.0
    assert report.cosine_similarity == pytest.approx(1.0)
    assert report.top1_agreement == 1.0
    assert report.compared_outputs == 1 and report.samples == 1


def test_one_swapped_argmax_of_two_rows_gives_half_top1_agreement() -> None:
    reference = np.array([[1.0, 2.0], [3.0, 1.0]], np.float32)
    candidate = np.array([[1.0, 2.0], [1.0, 3.0]], np.float32)
    report = compare_outputs([[reference]], [[candidate]])
    assert report.top1_agreement == 0.5
    assert report.max_abs_error == pytest.approx(2.0)
    assert report.top1_rows == 2 and report.top1_flip_margin == pytest.approx(2.0)


def test_the_changed_rows_margin_is_fp32s_gap_between_its_top_two_scores() -> None:
    """Two of four rows change class: one a near tie (gap 0.01), one a clear call (gap 0.5);
    the widest gap among them is what the explanation cites."""
    reference = np.array(
        [[0.50, 0.49, 0.0], [0.9, 0.4, 0.1], [0.1, 0.2, 0.9], [0.6, 0.1, 0.0]], np.float32
    )
    candidate = reference.copy()
    candidate[0] = [0.49, 0.50, 0.0]
    candidate[1] = [0.4, 0.9, 0.1]
    report = compare_outputs([[reference]], [[candidate]])
    assert report.top1_agreement == 0.5 and report.top1_rows == 4
    assert report.top1_flip_margin == pytest.approx(0.5)
    same = compare_outputs([[reference]], [[reference.copy()]])
    assert same.top1_flip_margin is None


def test_errors_and_cosine_have_their_textbook_values() -> None:
    reference = np.array([1.0, 2.0, 4.0], np.float32)
    candidate = reference * 1.1  # 10% relative error everywhere, same direction
    report = compare_outputs([[reference]], [[candidate]])
    assert report.max_abs_error == pytest.approx(0.4, rel=1e-5)
    assert report.mean_rel_error == pytest.approx(0.1, rel=1e-2)
    assert report.cosine_similarity == pytest.approx(1.0, abs=1e-6)
    assert report.top1_agreement is None  # 1-D: not class scores

    orthogonal = compare_outputs([[np.array([1.0, 0.0])]], [[np.array([0.0, 1.0])]])
    assert orthogonal.cosine_similarity == pytest.approx(0.0)
    opposite = compare_outputs([[np.array([1.0, 2.0])]], [[np.array([-1.0, -2.0])]])
    assert opposite.cosine_similarity == pytest.approx(-1.0)


def test_metrics_aggregate_over_samples_and_skip_integer_outputs() -> None:
    ids = np.array([1, 2, 3], np.int64)
    same = np.array([[0.0, 1.0]], np.float32)
    flipped = np.array([[1.0, 0.0]], np.float32)
    report = compare_outputs(
        [[same, ids], [same, ids]], [[same, ids * 5], [flipped, ids]], output_names=["p", "ids"]
    )
    assert report.samples == 2
    assert report.compared_outputs == 1
    assert report.top1_agreement == 0.5
    assert report.cosine_similarity == pytest.approx(0.5)  # mean of 1 and 0
    assert report.max_abs_error == pytest.approx(1.0)


def test_near_zero_reference_values_do_not_blow_up_relative_error() -> None:
    reference = np.array([1.0, 1e-9, 1.0, 1.0], np.float32)
    candidate = np.array([1.0, 2e-9, 1.0, 1.0], np.float32)
    assert compare_outputs([[reference]], [[candidate]]).mean_rel_error < 1e-5


def test_shape_mismatch_names_the_output_and_sample() -> None:
    with pytest.raises(ValueError, match=r"output 'logits' of sample 0 has shape \[1, 3\]"):
        compare_outputs([[np.zeros((1, 4))]], [[np.zeros((1, 3))]], output_names=["logits"])
    with pytest.raises(ValueError, match="2 samples but candidate has 1"):
        compare_outputs([[np.zeros(2)], [np.zeros(2)]], [[np.zeros(2)]])


def test_nan_and_inf_are_counted_where_fp32_is_finite_and_make_the_outputs_wrong() -> None:
    from backend.engine.accuracy import wrong_outputs

    reference = np.array([[1.0, 2.0, 3.0, np.nan]], np.float32)
    candidate = np.array([[np.nan, 2.0, np.inf, np.nan]], np.float32)  # last: FP32 is NaN too
    report = compare_outputs([[reference]], [[candidate]])
    assert (report.nan_values, report.inf_values, report.finite_reference_values) == (1, 1, 3)
    assert np.isfinite(
        [report.max_abs_error, report.mean_rel_error, report.cosine_similarity]
    ).all()
    assert report.top1_agreement == 0.0  # argmax lands on the NaN
    reason = wrong_outputs(report, 0.99)
    assert reason is not None and "1 NaN value and 1 infinite value of 3" in reason
    assert "lost precision" not in reason


def test_cosine_below_the_bound_is_wrong_and_the_bound_is_the_users() -> None:
    from backend.engine.accuracy import wrong_outputs

    reference = np.array([1.0, 0.0], np.float32)
    candidate = np.array([1.0, 0.2], np.float32)  # cosine 0.9806
    report = compare_outputs([[reference]], [[candidate]])
    reason = wrong_outputs(report, 0.99)
    assert reason is not None and "cosine 0.9806 against FP32, below the bound 0.99" in reason
    assert wrong_outputs(report, 0.98) is None
    all_nan = compare_outputs([[reference]], [[np.full(2, np.nan, np.float32)]])
    assert all_nan.cosine_similarity == 0.0  # nothing finite agrees with FP32


def test_a_search_bound_is_never_met_by_outputs_with_nan() -> None:
    from backend.engine.mixedresult import AccuracyBound

    reference = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    one_nan = compare_outputs([[reference]], [[np.array([1.0, 2.0, 3.0, np.nan], np.float32)]])
    assert one_nan.cosine_similarity == pytest.approx(1.0)  # the finite values agree...
    assert not AccuracyBound.parse("cosine=0.99").met(one_nan)  # ...but a NaN is no answer
    assert AccuracyBound.parse("cosine=0.99").met(compare_outputs([[reference]], [[reference]]))
