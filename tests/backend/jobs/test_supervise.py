"""The worker's sentences about a Ray head that went away, for one configuration and several."""

from __future__ import annotations

from backend.jobs.supervise import answers_again, still_unreachable


def test_the_unreachable_line_reads_singular_for_one_configuration_and_plural_for_more() -> None:
    one = still_unreachable("10.0.0.5:6379", "connection refused\ntraceback", 1, 30)
    assert one == (
        "Ray cluster at 10.0.0.5:6379 is unreachable (connection refused); the 1 configuration "
        "not yet stored is kept and sent again once it answers, tried every 1 to 30 s."
    )
    three = still_unreachable("10.0.0.5:6379", "", 3, 2.5)
    assert "(no answer); the 3 configurations not yet stored are kept and sent again" in three
    assert three.endswith("tried every 1 to 2.5 s.")


def test_the_resuming_line_reads_singular_for_one_configuration_and_plural_for_more() -> None:
    assert answers_again("h:1", 1) == (
        "Ray cluster at h:1 answers again; resuming the 1 configuration not yet stored."
    )
    assert answers_again("h:1", 2) == (
        "Ray cluster at h:1 answers again; resuming the 2 configurations not yet stored."
    )
