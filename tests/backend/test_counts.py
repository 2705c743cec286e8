"""Counts as every page and sentence writes them."""

from __future__ import annotations

from backend.counts import counted, scaled


def test_a_count_takes_its_nouns_number() -> None:
    assert (counted(1, "configuration"), counted(4, "configuration")) == (
        "1 configuration",
        "4 configurations",
    )


def test_a_large_count_is_written_one_way_on_an_si_prefix() -> None:
    # one model's parameters read 38218 on Home, 38.2k on Models and 38.22 k on Graph
    assert scaled(38218) == "38.2 k"
    assert scaled(1_235_814_400, "B") == "1.24 GB" and scaled(2.5e12) == "2.5 T"
    assert scaled(393) == "393" and scaled(0) == "0"
