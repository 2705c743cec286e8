"""The one comma-list reader behind CLI flags, URL keys and the Serve form."""

from __future__ import annotations

import pytest

from backend.commas import comma_list, comma_numbers
from backend.errors import UserError


def test_parts_are_stripped_and_empty_parts_dropped() -> None:
    assert comma_list(" a, b,,c ,") == ["a", "b", "c"]
    assert comma_list("") == []
    assert comma_list(None) == []


def test_numbers_of_the_kind_asked() -> None:
    assert comma_numbers("1, 2,4", int, "--instances") == [1, 2, 4]
    assert comma_numbers("100,250.5", float, "--rate") == [100.0, 250.5]
    assert comma_numbers(None, int, "--rate") == []


def test_a_word_among_numbers_is_one_sentence_naming_the_field() -> None:
    with pytest.raises(
        UserError, match=r"^--preferred takes numbers separated by commas, not '4,x'\.$"
    ):
        comma_numbers("4,x", int, "--preferred")
