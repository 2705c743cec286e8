"""Shared page pieces: URL-bound widgets under a real AppTest run, and text formatting."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from pages.components.formatting import (
    WRAP_LINE_HEIGHT,
    WRAP_ROW_HEIGHT,
    fmt_ago,
    fmt_bytes,
    fmt_duration,
    fmt_shape,
    plain,
    tensors_cell,
    wrapped_lines,
    wrapped_rows,
)

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
    kv = [{"name": f"past.{i}", "shape": ["batch", 2, "past"]} for i in range(3)]
    assert tensors_cell(kv) == "past.0[batch, 2, past], past.1[batch, 2, past] +1 more"
    assert tensors_cell(kv, shown=3, shapes=False) == "past.0, past.1, past.2"


def test_a_row_is_as_tall_as_its_longest_cell_wraps() -> None:
    """Lines are counted as the table wraps them (at spaces, a long word over several lines);
    one line keeps Streamlit's row, two or three take 68 px, each further line 20 px more."""
    assert wrapped_lines("x[N, 16]", 48) == 1
    assert wrapped_lines("ab cd", 5) == 1 and wrapped_lines("ab cd", 4) == 2
    assert wrapped_lines("a" * 48, 48) == 1 and wrapped_lines("a" * 97, 48) == 3
    assert wrapped_lines("x " + "a" * 10, 4) == 4  # x, then aaaa aaaa aa
    assert wrapped_rows(["x[N, 16]", "tokens[batch, seq]"], 48) is None
    assert wrapped_rows(["x[N, 16]", "a" * 60], 48) == WRAP_ROW_HEIGHT == 68
    assert wrapped_rows(["a" * 48 * 5], 48) == WRAP_ROW_HEIGHT + 2 * WRAP_LINE_HEIGHT


def _bound_widgets() -> None:
    import streamlit as st

    from pages.components.url_state import (
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


def test_bound_widgets_write_their_value_back_to_the_url() -> None:
    at = AppTest.from_function(_bound_widgets, default_timeout=60).run()
    assert at.query_params["pick"] == "b" and at.query_params["many"] == "1"
    at.multiselect(key="url_many").set_value([4, 8]).run()
    assert at.query_params["many"] == "4,8"
    at.multiselect(key="url_many").set_value([]).run()
    assert "many" not in at.query_params  # an empty choice removes the key
    at.pills(key="url_charts").set_value([]).run()
    assert at.query_params["charts"] == "none"  # "no charts" survives a reload
    at.session_state["flag_value"] = True
    at.run()
    assert at.query_params["flag"] == "1"


def _declared_form() -> None:
    """A form over a dataclass the page has never heard of: what a knob added with a `widget`
    gets without a page edit."""
    import enum
    from dataclasses import dataclass

    import streamlit as st

    from backend.knobs import Widget, knob
    from backend.knobs.links import from_query
    from pages.components.knob_form import KnobForm

    class Speed(enum.StrEnum):
        SLOW = "slow"
        FAST = "fast"

    @dataclass(frozen=True)
    class Toy:
        speeds: tuple[Speed, ...] = knob(
            (Speed.SLOW,), label="Speeds", url="speeds", url_always=True, widget="speeds"
        )
        cores: int = knob(0, label="Cores", url="cores", widget=Widget("cores", limits=(0, 8)))
        fast_io: bool = knob(False, label="Fast I/O", url="fast_io", widget="fast_io")
        name: str = knob("", label="Name", help="Who runs it.", url="name", widget="name")
        hidden: int = knob(3, url="hidden")  # declares no widget: not drawn, not written

    form = KnobForm(Toy, from_query(Toy, st.query_params.to_dict()))
    form.rest()
    st.session_state["toy"] = repr(Toy(**form.values))


def test_a_declared_knob_gets_its_widget_its_start_and_its_link_key_from_the_declaration() -> None:
    at = AppTest.from_function(_declared_form, default_timeout=60)
    at.query_params.update({"speeds": "fast", "cores": "99", "name": " x ", "hidden": "5"})
    at.run()
    assert not at.exception
    assert at.multiselect(key="speeds").value == ["fast"]  # an enum's tuple: a multiselect
    assert at.number_input(key="cores").value == 8  # beyond the declared limits: clamped
    assert at.toggle(key="fast_io").value is False and at.text_input(key="name").value == " x "
    assert at.text_input(key="name").help == "Who runs it."  # label and help as declared
    assert [w.key for w in at.number_input] == ["cores"]  # `hidden` declares no widget
    assert at.query_params["cores"] == "8" and at.query_params["name"] == "x"  # stripped
    at.toggle(key="fast_io").set_value(True)
    at.number_input(key="cores").set_value(0)
    at.multiselect(key="speeds").set_value(["slow", "fast"]).run()
    assert at.query_params["fast_io"] == "1" and at.query_params["speeds"] == "slow,fast"
    assert "cores" not in at.query_params  # back at its default: the link drops it
    assert at.query_params["hidden"] == "5"  # what the form does not draw stays as linked
    assert at.session_state["toy"].endswith(
        "Toy(speeds=(<Speed.SLOW: 'slow'>, <Speed.FAST: 'fast'>), cores=0, fast_io=True, "
        "name='x', hidden=3)"
    )
