"""Result types as readers print them."""

from __future__ import annotations

from backend.results import ConfigurationResult, ResultStatus
from backend.specs import Configuration, Precision


def test_notes_read_as_sentences_never_joined_after_a_full_stop() -> None:
    config = Configuration(precision=Precision.INT8_DYNAMIC)
    notes = ["Treat these numbers with care.", "While this was measured, 2 calls stalled", ""]
    result = ConfigurationResult(config.key, config, ResultStatus.OK, notes=notes)
    assert result.notes_text == (
        "Treat these numbers with care. While this was measured, 2 calls stalled."
    )
    assert ".;" not in result.notes_text
