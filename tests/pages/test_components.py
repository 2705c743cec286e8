"""Shared page pieces: URL-bound widgets under a real AppTest run, and text formatting."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from pages.components.formatting import fmt_ago, fmt_bytes, fmt_duration, fmt_shape, plain

HOSTILE = [
    "[x](http://evil)![b](http://evil/b.png)",
    "<img src=http://evil/b.png onerror=alert(1)>",
    "http://evil.example/a www.evil.example mail@evil.example",
    "**bold** _em_ `code` ~~gone~~ $x^2$ :red[red] :material/home:",
    "# heading\n\n- list\n1. ordered\n> quote",
    "back\\slash [ref]: http://evil",
]


def _render(markdown: str) -> str:
    """CommonMark with GFM tables, strikethrough and bare-URL autolinks, as Streamlit renders."""
    return MarkdownIt("gfm-like").render(markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_text_renders_as_itself_with_no_link_image_or_markup(text: str) -> None:
    rendered = _render(plain(text))
    assert "<a " not in rendered and "<img" not in rendered
    assert re.fullmatch(r"<p>.*</p>\n", rendered, flags=re.DOTALL), rendered  # one paragraph
    shown = html.unescape(rendered.removeprefix("<p>").removesuffix("</p>\n"))
    assert shown == " ".join(text.splitlines())


def test_the_same_text_unescaped_would_render_links_and_images() -> None:
    """The check above can fail: the raw strings really do render as links and images."""
    rendered = _render(HOSTILE[0] + " " + HOSTILE[2])
    assert '<a href="http://evil">' in rendered and '<img src="http://evil/b.png"' in rendered


def test_sizes_durations_ages_and_shapes_read_naturally() -> None:
    assert fmt_bytes(None) == "–" and fmt_bytes(512) == "512 B"
    assert fmt_bytes(1536) == "1.5 KB" and fmt_bytes(3 * 2**30) == "3.0 GB"
    assert fmt_duration(4.25) == "4.2 s" and fmt_duration(125) == "2 min 05 s"
    assert fmt_duration(3 * 3600 + 60) == "3 h 01 min"
    now = datetime(2026, 1, 1, 12, 0, 0)
    assert fmt_ago(now - timedelta(seconds=90), now) == "1 min 30 s ago"
    assert fmt_ago(now + timedelta(seconds=5), now) == "0.0 s ago"  # clock skew is not negative
    assert fmt_shape(["N", 3, None, 0]) == "[N, 3, ?, ?]"


def _bound_widgets() -> None:
    import streamlit as st

    from pages.components.url_state import (
        bound_count,
        bound_multiselect,
        bound_pills,
        bound_selectbox,
        set_url,
        url_int,
    )

    st.session_state["picked"] = bound_selectbox("Pick", ["a", "b", "c"], "pick", default="b")
    st.session_state["many"] = bound_multiselect("Many", [1, 2, 4, 8], "many", default=[1])
    st.session_state["charts"] = bound_pills("Charts", ["x", "y"], "charts", default=["x"])
    st.session_state["number"] = url_int("n")
    st.session_state["threads"] = bound_count("Threads (0: the runtime's choice)", "threads", 8)
    set_url("flag", st.session_state.get("flag_value", False))


def test_bound_widgets_start_from_the_url() -> None:
    at = AppTest.from_function(_bound_widgets, default_timeout=60)
    at.query_params.update({"pick": "c", "many": "2,8,99", "charts": "y", "n": "nope"})
    at.run()
    assert not at.exception
    assert at.selectbox(key="url_pick").value == "c"
    assert at.multiselect(key="url_many").value == [2, 8]  # an unknown 99 is dropped
    assert at.session_state["charts"] == ["y"]
    assert at.session_state["number"] is None  # a malformed number is ignored, not an error
    assert at.session_state["threads"] == 0 and "threads" not in at.query_params  # 0: not named
    again = AppTest.from_function(_bound_widgets, default_timeout=60)
    again.query_params["threads"] = "99"  # beyond the largest: clamped, never a widget error
    again.run()
    assert not again.exception and again.session_state["threads"] == 8


def test_bound_widgets_write_their_value_back_to_the_url() -> None:
    at = AppTest.from_function(_bound_widgets, default_timeout=60).run()
    assert at.query_params["pick"] == "b" and at.query_params["many"] == "1"
    at.number_input(key="url_threads").set_value(3).run()
    assert at.query_params["threads"] == "3"
    at.multiselect(key="url_many").set_value([4, 8]).run()
    assert at.query_params["many"] == "4,8"
    at.multiselect(key="url_many").set_value([]).run()
    assert "many" not in at.query_params  # an empty choice removes the key
    at.pills(key="url_charts").set_value([]).run()
    assert at.query_params["charts"] == "none"  # "no charts" survives a reload
    at.session_state["flag_value"] = True
    at.run()
    assert at.query_params["flag"] == "1"
