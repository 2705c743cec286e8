"""The cheapest serving configuration that meets p99 <= X at >= R req/s (serving/cheapest.py):
checked on a real sweep (two precisions measured by the real worker, every batching policy of the
recommendation grid predicted), and across hardware targets with their own prices."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from backend.cli import main
from backend.pricing import Price
from backend.queue import jobs
from backend.serving.cheapest import recommendation_cost, study_cost
from backend.serving.recommend import MeasuredVariant, recommend
from backend.serving.simulate import simulate
from backend.serving.study import ServingStudy
from backend.serving.types import BatchingPolicy, LatencyCurve, LoadSpec, Scenario
from backend.serving.view import serve_view, study_of
from tests.pages.seed import add_model, finished_sweep

SLO, RATE, CPU = 50.0, 100.0, 0.40


def test_the_cheapest_configuration_of_a_real_sweep_meets_the_bound_and_names_the_runner_up(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job, _ = finished_sweep(add_model(mlp_path, "mlp").id)  # FP32 and INT8 static, batches 1, 4
    view = serve_view(job.id, SLO, RATE, prices=(("cpu", CPU),))
    rec, answer = view.recommendation, view.cost
    assert answer is not None and answer.cheapest is not None and answer.runner_up is not None
    every = {e.candidate: e for e in [*rec.ranked, rec.default] if e is not None}
    meeting = [e for e in every.values() if e.meets(SLO, RATE)]
    assert {e.candidate.variant.precision for e in meeting} == {"fp32", "int8_static"}
    assert len({e.candidate.policy for e in meeting}) >= 2  # batching policies compared
    # by hand: $0.40 an hour / (requests/s x 3600 s) x 1e6, at each one's rate under the bound
    # (each at its one rate, the one its sentence and table quote: achieved at its point)
    by_hand = sorted(CPU / (e.rate * 3600) * 1e6 for e in meeting)  # all predicted here
    assert answer.cheapest.cost == pytest.approx(by_hand[0])
    assert answer.runner_up.cost == pytest.approx(by_hand[1])
    best = answer.cheapest
    assert best.point.latency.p99 <= SLO and best.rate_rps >= RATE
    assert best.label == rec.best.candidate.label  # one price: the cheapest is the fastest
    assert answer.sentence.startswith(
        f"The cheapest configuration that meets p99 <= 50 ms at >= 100 req/s is {best.label}, at $"
    )
    # a sweep alone, no serving study: the figure says it is uncalibrated where it stands
    uncalibrated = "req/s predicted from the sweep alone, uncalibrated, $0.4/h for cpu)"
    assert f"ms at {best.rate_rps:,.0f} {uncalibrated}" in answer.sentence
    assert f"; the runner-up, {answer.runner_up.label}, costs $" in answer.sentence
    difference = r"\((\$[\d.]+ more per million, \d+% more|the same to within 0.5%); p99 "
    assert re.search(difference, answer.sentence)
    # the same answer from a terminal, with the cost column beside the evidence
    assert main(["serve", "recommend", str(job.id), "--slo", "50", "--min-rate", "100",
                 "--price", "cpu=0.4", "--top", "3"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    lines = printed.strip().splitlines()  # the cost sentence, the verdict, its "- " details
    verdict = next(i for i, line in enumerate(lines) if line.startswith("In "))
    assert lines[verdict - 1] == answer.sentence
    # its cost column as every CLI table heads and prints costs (plain decimals, never "inf")
    rows = [line for line in printed.splitlines() if "(default)" in line or "$/M" in line]
    assert "$/M " in rows[0] and "$/M inf" not in printed and "e-0" not in printed
    # unpriced: no cheapest, and the sentence says what to set
    unpriced = serve_view(job.id, SLO, RATE, prices=(("cuda", 3.5),)).cost
    assert unpriced is not None and unpriced.cheapest is None
    assert unpriced.sentence.startswith("No cheapest configuration: no price applies to ")


def test_targets_are_compared_by_cost_so_the_fastest_is_not_always_the_cheapest() -> None:
    curve = LatencyCurve((1, 4, 16, 32), (1.0, 1.4, 3.4, 6.2), 0.2, 0.05)
    faster = LatencyCurve((1, 4, 16, 32), (0.7, 1.0, 2.2, 4.0), 0.2, 0.05)
    cpu = MeasuredVariant("fp32", "cpu", curve, price=Price("cpu", 0.40))
    gpu = MeasuredVariant("fp16", "cuda", faster, target="h200", price=Price("h200", 3.50))
    policies = [BatchingPolicy(16, max_queue_delay_us=500), BatchingPolicy(16, instance_count=2)]
    rec = recommend([cpu, gpu], 20.0, policies=policies)
    assert rec.best is not None and rec.best.candidate.variant is gpu  # the most req/s
    answer = recommendation_cost(rec)
    assert answer.cheapest is not None and answer.cheapest.label.startswith("FP32 on CPU, ")
    gpu_costs = [
        3.50 / (e.rate * 3600) * 1e6
        for e in rec.ranked
        if e.candidate.variant is gpu and e.meets(20.0, 0.0)
    ]
    assert gpu_costs and answer.cheapest.cost < min(gpu_costs)
    assert "FP16 on CUDA @ h200" in {e.candidate.variant.label for e in rec.ranked}


def test_a_study_is_priced_at_its_highest_rate_within_the_bound() -> None:
    curve = LatencyCurve((1, 4, 16), (1.0, 1.4, 3.4), 0.2, 0.05)
    policies = {
        "x1": BatchingPolicy(16, max_queue_delay_us=500),
        "x2": BatchingPolicy(16, instance_count=2),
    }
    points = {
        name: [simulate(curve, LoadSpec(Scenario.SERVER, target_rps=r), p) for r in (100, 400)]
        for name, p in policies.items()
    }
    answer = study_cost(points, 50.0, Price("cpu", 0.40))
    best_rate = {
        name: max(p.achieved_rps for p in found if p.stable and p.latency.p99 <= 50.0)
        for name, found in points.items()
    }
    by_hand = {name: 0.40 / (rate * 3600) * 1e6 for name, rate in best_rate.items()}
    cheapest = min(by_hand, key=by_hand.get)
    assert answer.cheapest is not None and answer.cheapest.label == cheapest
    assert answer.cheapest.cost == pytest.approx(by_hand[cheapest])
    assert "req/s measured on Triton, $0.4/h for cpu)" in answer.sentence
    unpriced = study_cost(points, 50.0, None)
    assert unpriced.cheapest is None and "no price applies to x1, x2" in unpriced.sentence


def test_a_study_stores_its_prices_and_a_bad_one_stores_nothing(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    argv = ["serve", "submit", "1", "--concurrency", "1", "--slo", "20"]
    assert main([*argv, "--price", "cpu=free"]) == 2
    assert "not 'cpu=free'" in capsys.readouterr().err and jobs.list_jobs() == []
    assert main(argv) == 0 and main([*argv, "--price", "cpu=0.3"]) == 0
    stamped, given = (study_of(j.id) for j in sorted(jobs.list_jobs(), key=lambda j: j.id))
    assert stamped.prices == (("cpu", 0.40), ("cuda", 3.50))  # OPTIBOARD_PRICE_PER_HOUR's
    assert given.prices == (("cpu", 0.3),)
    assert ServingStudy.from_dict(given.to_dict()) == given


def test_after_a_confirmation_that_misses_the_cheapest_is_never_a_predicted_one() -> None:
    """`serve recommend --confirm 1 --slo 5`: the one configuration confirmed measured p99 5.7
    ms ("none meets the p99 bound of 5 ms ... (measured)"), and the cost line beside it named a
    predicted configuration the cheapest that meets p99 <= 5 ms. The cheapest now comes from
    the same measured figures as the verdict; the predicted ones are counted apart."""
    variant = MeasuredVariant(
        "fp32",
        "cpu",
        LatencyCurve((1, 4, 16, 32), (0.7, 1.0, 2.2, 4.0), 0.2, 0.05),
        price=Price("cpu", CPU),
    )

    def slower(trial):  # the server missed what the simulation predicted
        point = simulate(trial.candidate.variant.curve, trial.load, trial.candidate.policy,
                         requests=2000)  # fmt: skip
        return replace(point, latency=replace(point.latency, p99=9.0))

    rec = recommend([variant], slo_p99_ms=8.0, confirm=slower, confirm_top=1)
    assert rec.best is None and rec.measurements == 1
    assert "none meets the p99 bound of 8 ms" in rec.sentence
    predicted = [e for e in rec.ranked if e.measured is None and e.meets(8.0, 0.0)]
    assert predicted  # what the cost line used to name
    answer = recommendation_cost(rec)
    assert answer.cheapest is None
    assert answer.sentence == (
        "No cheapest configuration: the one configuration measured on Triton does not meet "
        f"p99 <= 8 ms; {len(predicted)} more are only predicted to meet it, not measured (a "
        "larger --confirm measures them)."
    )
