"""Ground truth: ONNX's own backend node tests, predicted and really run on ONNX Runtime CPU."""

from __future__ import annotations

from backend.compat.groundtruth import collect_cases, run_cases


def test_cpu_prediction_agrees_with_real_runs_on_onnx_node_tests(data_dir):
    cases = collect_cases()
    assert len(cases) > 1500
    confusion = run_cases(cases, jobs=2)
    counts = confusion.counts
    print("confusion:", counts, f"agreement {confusion.agreement:.2%}")
    for op, outcomes in confusion.disagreements_by_op().items():
        print(f"  {op}: {[o.name for o in outcomes]}")
    assert sum(counts.values()) == len(cases)
    assert counts["TN"] > 50  # the prediction does say "fails" where ORT fails
    assert confusion.agreement >= 0.98
