"""Price per hour per hardware target (backend/pricing.py): the arithmetic of cost per million,
the knob's trip through links, flags and stored jobs, and bad prices refused with one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend import cli, pricing
from backend.cli import main
from backend.errors import UserError
from backend.queue import jobs
from backend.reporting import cost
from backend.specs import SweepSpec
from storage.repo import jobs as job_store
from tests.storage.rows import model_row

REFUSED = "takes TARGET=DOLLARS pairs with a name and a price of 0 or more dollars an hour"


def test_cost_per_million_inferences_matches_the_hand_computation() -> None:
    # $3.50 an hour at 1,250 samples/s:
    #   1,250 samples/s x 3,600 s/h      = 4,500,000 samples an hour
    #   $3.50 / 4,500,000 samples        = $0.000000777... per sample
    #   x 1,000,000                      = $0.7777... per million samples
    assert pricing.cost_per_million(3.50, 1250.0) == pytest.approx(3.50 / 4_500_000 * 1_000_000)
    assert pricing.cost_per_million(3.50, 1250.0) == pytest.approx(0.77777778)
    # $0.40 an hour at 80 tokens/s: 288,000 tokens an hour, $1.3888... per million tokens
    assert pricing.cost_per_million(0.40, 80.0) == pytest.approx(1.38888889)
    # nothing measured is never free: no rate, a zero or non-finite rate, or no price
    for rate in (None, 0.0, -5.0, float("nan"), float("inf")):
        assert pricing.cost_per_million(3.50, rate) is None
    assert pricing.cost_per_million(None, 1250.0) is None


def test_a_configuration_takes_its_target_price_else_its_provider_price() -> None:
    prices = pricing.parse_prices("cpu=0.40, cuda=3.50, a100=2.10")
    assert pricing.price_for(prices, "cuda", "a100") == pricing.Price("a100", 2.10)
    assert pricing.price_for(prices, "cuda", "h200") == pricing.Price("cuda", 3.50)
    assert pricing.price_for(prices, "tensorrt") == pricing.Price("cuda", 3.50)  # same GPU
    assert pricing.price_for(prices + (("tensorrt", 4.0),), "tensorrt").per_hour == 4.0
    assert pricing.price_for(prices, "npu") is None  # unpriced: no cost, never the cheapest


def test_the_price_knob_travels_through_json_links_and_flags() -> None:
    spec = SweepSpec(prices="cpu=0.4,a100=2.5")
    assert spec.prices == (("cpu", 0.4), ("a100", 2.5))
    assert spec.to_dict()["prices"] == {"cpu": 0.4, "a100": 2.5}
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    query = jobs.spec_to_query(spec)
    assert query["price"] == "cpu=0.4,a100=2.5"
    assert jobs.spec_from_query(query) == spec
    assert "price" not in jobs.spec_to_query(SweepSpec())  # none given: no key
    parser = cli.build_parser()
    flagged = cli._spec(parser.parse_args(["submit", "1", "--price", "cpu=0.4,a100=2.5"]))
    assert flagged.prices == spec.prices
    assert cli._spec(parser.parse_args(["submit", "1"])).prices == ()


@pytest.mark.parametrize(
    "bad", ["cpu=abc", "cpu=-1", "=3", "cpu", "cpu=nan", "cpu=inf", "c p u=1", "cpu=1,cpu=2"]
)
def test_a_bad_price_in_a_link_is_one_sentence(bad: str) -> None:
    with pytest.raises(UserError) as refused:
        jobs.spec_from_query({"price": bad})
    sentence = str(refused.value)
    assert sentence.startswith("The price per hour ") and sentence.count(". ") == 0


def test_queueing_stores_the_prices_so_a_link_prices_it_the_same(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    monkeypatch.setenv("OPTIBOARD_PRICE_PER_HOUR", "cpu=0.25")
    assert main(["submit", "1", "--precisions", "fp32"]) == 0
    assert main(["submit", "1", "--precisions", "fp32", "--price", "cpu=1.5"]) == 0
    stamped, given = (jobs.spec_of(job) for job in sorted(jobs.list_jobs(), key=lambda j: j.id))
    assert stamped.prices == (("cpu", 0.25),) and given.prices == (("cpu", 1.5),)
    monkeypatch.setenv("OPTIBOARD_PRICE_PER_HOUR", "cpu=9")  # a later setting changes neither
    assert jobs.spec_from_query(jobs.spec_to_query(stamped)).prices == (("cpu", 0.25),)


def test_a_bad_price_is_refused_in_one_sentence_and_nothing_is_stored(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    capsys.readouterr()
    assert main(["submit", "1", "--price", "cpu=-0.4"]) == 2
    said = capsys.readouterr().err.strip()
    assert REFUSED in said and "'cpu=-0.4'" in said and len(said.splitlines()) == 1
    monkeypatch.setenv("OPTIBOARD_PRICE_PER_HOUR", "cpu=cheap")
    assert main(["submit", "1"]) == 2
    said = capsys.readouterr().err.strip()
    assert said.count("OPTIBOARD_PRICE_PER_HOUR takes TARGET=DOLLARS") == 1
    assert jobs.list_jobs() == []


def test_a_jobs_prices_are_read_alone_from_its_stored_spec_as_the_whole_spec_reads_them(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cost.job_prices reads one field of the stored sweep (knobs.serialize.field_from_json):
    the same prices as SweepSpec.from_dict, the setting's for older sweeps and other kinds."""
    monkeypatch.setenv("OPTIBOARD_PRICE_PER_HOUR", "cpu=0.25")
    model = model_row()
    old = json.loads((Path(__file__).parent / "data" / "stored_41aae78.json").read_text())
    specs = [*old["sweep_specs"], SweepSpec(prices="cpu=0.4,a100=2.5").to_dict()]
    for spec in specs:
        job = job_store.create_job(model.id, spec, total=1, kind="sweep")
        whole = SweepSpec.from_dict(job.spec).prices
        assert cost.job_prices(job) == pricing.or_default(whole)
    assert cost.job_prices(job) == (("cpu", 0.4), ("a100", 2.5))
    assert cost.job_prices(
        job_store.create_job(model.id, old["sweep_specs"][0], total=1, kind="sweep")
    ) == (("cpu", 0.25),)
    other = job_store.create_job(
        model.id, {"kind": "regression", "env_b": "x"}, total=1, kind="regression"
    )
    assert cost.job_prices(other) == (("cpu", 0.25),) and cost.job_prices(None) == (("cpu", 0.25),)
