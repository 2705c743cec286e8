"""The Pareto fronts of the Compare charts hold stable, ok measurements only; an unstable one
that measured beyond the front is drawn hollow off it, and its caption and hover say so."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from backend import pricing
from backend.reporting import charts, cost, frames, front, marks
from backend.reporting.metrics import REGISTRY, pareto_front
from backend.specs import Precision, SweepSpec
from tests.pages.seed import add_model, run_sweep, steady


def _real_frame(mlp_path: Path) -> tuple:
    """A real sweep's rows, with the baseline at batch 1 the slower series so that the other
    series' fastest row is on the front and alone (no other row matches its speedup)."""
    spec = SweepSpec(precisions=(Precision.FP32, Precision.INT8_DYNAMIC), batch_sizes=(1, 4))
    job = run_sweep(add_model(mlp_path).id, spec)
    # which run stalls cannot be chosen on a real host, so the stored verdicts are set here:
    # every row measured stable, then the fastest one not (as test_cost does for the cheapest)
    frame = cost.reprice(steady(frames.results_frame(job_ids=[job.id])), (("cpu", 1.0),))
    at_one = frame[frame["batch_size"] == 1].sort_values("p50_ms")
    baseline = str(at_one.iloc[-1]["series"])
    view = frames.add_accuracy_loss(frames.add_speedups(frame, baseline))
    fastest = view["speedup"].idxmax()
    return view, fastest


def test_an_unstable_point_beyond_the_front_is_left_off_it_and_named(
    data_dir: Path, mlp_path: Path
) -> None:
    view, fastest = _real_frame(mlp_path)
    calm = front.add_pareto(view)
    assert calm.at[fastest, "pareto"] and not calm["beyond_pareto"].any()
    assert front.beyond_sentence(calm, front.SPEEDUP_FRONT, "beyond_pareto") is None

    view.loc[fastest, "stable"] = False
    shaky = front.add_pareto(view)
    assert not shaky.at[fastest, "pareto"]  # computed without it
    assert shaky["beyond_pareto"].tolist() == [i == fastest for i in view.index]
    assert shaky["pareto"].any()  # the stable points still make a front
    # the front is what the stable rows alone give
    stable_rows = view[view["stable"]]
    alone = pareto_front(
        REGISTRY["speedup"],
        stable_rows["speedup"],
        REGISTRY["accuracy_loss"],
        stable_rows["accuracy_loss"],
    )
    assert shaky.loc[stable_rows.index, "pareto"].tolist() == alone.tolist()

    row = view.loc[fastest]
    sentence = front.beyond_sentence(shaky, front.SPEEDUP_FRONT, "beyond_pareto")
    assert sentence == (
        f"{row['label']} measured beyond the Pareto front (speedup vs baseline "
        f"{row['speedup']:.2f}x, accuracy loss {row['accuracy_loss']:.3g}), but its measurement "
        "was unstable, so it is drawn hollow and left off the front: re-run it on a quiet host."
    )

    figure = charts.accuracy_vs_speedup(shaky, "loss")
    starred = next(t for t in figure.data if t.name == "Pareto front")
    assert row["speedup"] not in list(starred.x)
    hovers = [text for t in figure.data if t.name != "Pareto front" for text in t.text]
    [said] = [text for text in hovers if text.startswith(str(row["label"]))]
    assert "(unstable: hollow" in said and "measured beyond the Pareto front" in said


def test_an_unstable_point_a_stable_one_beats_is_not_said_to_beat_the_front(
    data_dir: Path, mlp_path: Path
) -> None:
    view, fastest = _real_frame(mlp_path)
    slowest = view["speedup"].idxmin()
    view.loc[slowest, "stable"] = False
    marked = front.add_pareto(view)
    speedup, loss = view.at[slowest, "speedup"], view.at[slowest, "accuracy_loss"]
    rivals = view["stable"] & (view["speedup"] >= speedup) & (view["accuracy_loss"] <= loss)
    assert rivals.any()  # a stable row at least as fast and as accurate
    assert not marked.at[slowest, "beyond_pareto"] and not marked.at[slowest, "pareto"]
    assert front.beyond_sentence(marked, front.SPEEDUP_FRONT, "beyond_pareto") is None


def test_the_cost_front_leaves_out_an_unstable_result_and_names_it(
    data_dir: Path, mlp_path: Path
) -> None:
    view, _ = _real_frame(mlp_path)
    cheapest = view["cost_per_million"].idxmin()  # on the cost front, whatever else
    assert frames.add_cost_pareto(view, "cost_per_million").at[cheapest, "cost_pareto"]
    view.loc[cheapest, "stable"] = False
    priced = frames.add_cost_pareto(view, "cost_per_million")
    assert not priced.at[cheapest, "cost_pareto"] and priced["cost_pareto"].any()
    assert priced.at[cheapest, "beyond_cost_pareto"]
    keys = ("cost_per_million", *front.COST_FRONT)
    sentence = front.beyond_sentence(priced, keys, "beyond_cost_pareto") or ""
    assert sentence.startswith(f"{view.at[cheapest, 'label']} measured beyond the Pareto front")
    # as the cheapest sentence writes them ($0.0000666, 1,667,673), not 0.00006663 $/M and
    # throughput 1667673.4 samples/s beside it (the walkthrough's note)
    dollars = pricing.dollars(view.at[cheapest, "cost_per_million"])
    assert f"cost per million inferences {dollars}, " in sentence, sentence
    rate = view.at[cheapest, "throughput"]
    assert f"throughput {cost.rate_text(rate) if rate >= 100 else f'{rate:.1f}'} samples/s" in (
        sentence
    )
    figure = charts.cost_vs_accuracy(priced, "cost_per_million", "loss")
    starred = next(t for t in figure.data if t.name == "Pareto front")
    assert view.at[cheapest, "cost_per_million"] not in list(starred.x)


def test_the_generation_front_leaves_out_an_unstable_point_and_its_hover_says_so() -> None:
    from backend.generate import points

    frame = pd.DataFrame(
        {
            "series": ["fp32", "int4", "int4"],
            "label": ["fp32 x1", "int4 x1", "int4 x4"],
            "status": ["ok", "ok", "ok"],
            "output_tokens_per_s": [100.0, 180.0, 240.0],
            "perplexity": [5.0, 5.4, 5.5],
            "stable": [True, True, False],  # the fastest point's windows did not agree
        }
    )
    figure = points.perplexity_vs_speed(frame)
    starred = next(t for t in figure.data if t.name == "Pareto front")
    assert list(starred.x) == [100.0, 180.0]
    [int4] = [t for t in figure.data if t.name == "int4" and t.showlegend is False]  # its points
    assert list(int4.marker.symbol) == ["circle", "circle-open"]
    assert "measured beyond the Pareto front" in int4.text[1]
    assert "beyond" not in int4.text[0]


def test_a_speedup_over_an_unstable_baseline_is_no_firm_front_point(
    data_dir: Path, mlp_path: Path
) -> None:
    """The walkthrough's chart: the FP32 baseline measured unstable, so the stable INT8 row's
    speedup over it is no firm figure; it is left off the front and named, not starred."""
    spec = SweepSpec(precisions=(Precision.FP32, Precision.INT8_DYNAMIC), batch_sizes=(1,))
    job = run_sweep(add_model(mlp_path).id, spec)
    frame = steady(frames.results_frame(job_ids=[job.id]))
    baseline = str(frame.sort_values("p50_ms").iloc[-1]["series"])  # the slower one
    frame.loc[frame["series"] == baseline, "stable"] = False
    view = front.add_pareto(frames.add_accuracy_loss(frames.add_speedups(frame, baseline)))
    other = view.index[view["series"] != baseline][0]
    assert not view.at[other, "speedup_firm"] and view.at[other, "stable"]
    assert not view["pareto"].any()  # no firm speedup at all: nothing starred
    assert view.at[other, "beyond_pareto"]
    # the other row's own sentence: when FP32 measured slower (a busy host), the unstable
    # baseline is beyond the front too and leads the page's sentence with its own reason
    sentence = front.beyond_sentence(view.loc[[other]], front.SPEEDUP_FRONT, "beyond_pareto")
    assert sentence is not None and (
        "but its speedup divides by an unstable baseline measurement, so it is drawn as a "
        "hollow diamond and left off the front: re-run it on a quiet host." in sentence
    ), sentence


def test_a_speedup_its_throughput_disputes_is_left_off_the_front_and_says_why(
    data_dir: Path, mlp_path: Path
) -> None:
    """Both sides stable, but the fastest row's throughput ratio is under half its median
    call's speedup (stalls): no star, and the caption cites the two speeds, not instability."""
    view, fastest = _real_frame(mlp_path)
    assert front.add_pareto(view).at[fastest, "pareto"]
    view.loc[fastest, "throughput"] /= 2.0
    base = view[view["series"] != view.at[fastest, "series"]]["series"].iloc[0]
    view = front.add_pareto(frames.add_speedups(view, str(base)))
    assert view.at[fastest, "stable"] and not view.at[fastest, "speedup_firm"]
    assert not view.at[fastest, "pareto"] and view.at[fastest, "beyond_pareto"]
    row = view.loc[fastest]
    sentence = front.beyond_sentence(view, front.SPEEDUP_FRONT, "beyond_pareto") or ""
    assert (
        f"speedup vs baseline {row['speedup']:.2f}x, accuracy loss {row['accuracy_loss']:.3g}, "
        f"throughput ratio {row['throughput_ratio']:.2f}x), but its median-call speedup and its "
        "throughput ratio disagree by more than 1.25x, so its speedup is no firm figure; it is "
        "drawn as a hollow diamond and left off the front: re-run it on a quiet host." in sentence
    ), sentence


def test_each_row_beyond_the_front_is_given_its_own_reason_and_a_mark_the_legend_explains(
    data_dir: Path, mlp_path: Path
) -> None:
    view, fastest = _real_frame(mlp_path)
    # a stall that halves the fastest row's throughput, not its median call: the two speeds
    # disagree, so its speedup is no firm figure, though its measurement was stable
    view.loc[fastest, "throughput"] = view.at[fastest, "throughput"] / 2
    # the other series: the slowest row's could be the fastest row's own series, which then
    # divided its halved throughput by itself and read one speed (a real run's order decides)
    baseline = str(view[view["series"] != view.at[fastest, "series"]]["series"].iloc[0])
    redone = frames.add_speedups(view.drop(columns=["speedup"]), baseline)
    view["speedup_firm"], view["throughput_ratio"] = (
        redone["speedup_firm"],
        redone["throughput_ratio"],
    )
    assert not view.at[fastest, "speedup_firm"] and view.at[fastest, "stable"]
    marked = front.add_pareto(view)
    assert marked.at[fastest, "beyond_pareto"] and not marked.at[fastest, "pareto"]
    # and a second row left off for another reason: its own measurement was unstable
    other = next(i for i in view.index if i != fastest and view.at[i, "speedup"] != 1.0)
    marked.loc[other, "stable"] = False
    marked.loc[other, "beyond_pareto"] = True
    sentence = front.beyond_sentence(marked, front.SPEEDUP_FRONT, "beyond_pareto") or ""
    fast, slow = marked.loc[fastest], marked.loc[other]
    ratio = f"throughput ratio {fast['throughput_ratio']:.2f}x"
    assert f"{fast['label']} measured beyond the Pareto front (speedup vs baseline" in sentence
    assert f"{ratio}), but its median-call speedup and its throughput ratio disagree" in sentence
    assert f"{slow['label']} measured beyond the Pareto front" in sentence
    assert sentence.count("its measurement was unstable, so it is drawn hollow") == 1

    figure = charts.accuracy_vs_speedup(marked, "loss")
    [point] = [
        (t.marker.symbol[i], text)
        for t in figure.data
        if t.text is not None and t.name != "Pareto front"
        for i, text in enumerate(t.text)
        if text.startswith(str(fast["label"]))
    ]
    assert point[0] == "diamond-open" and "speedup not firm" in point[1]
    assert {marks.KEY_UNSTABLE, marks.KEY_NOT_FIRM} <= {t.name for t in figure.data}
