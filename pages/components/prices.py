"""The price table box (`?price=cpu=0.40,cuda=3.50`) that Optimize, Compare and Serve draw.

One text input, labelled, explained and kept in the link as the sweep's price knob declares it
(PRICE_KNOB in backend/pricing.py, SweepSpec.prices), so a link prices alike on every page:
Optimize stores the table with the job; Compare and Serve price the stored results again with it.
"""

from __future__ import annotations

import streamlit as st

from backend.errors import UserError
from backend.pricing import PRICE_KNOB, Prices, parse_prices
from pages.components.url_state import set_url, url_value
from pages.components.widgets import show_error


def price_box(start: str, placeholder: str, here: str = "") -> str:
    """The box's stripped text, first the link's, else `start`; `here` says what the table
    does on this page, after the declared help."""
    key = PRICE_KNOB["url"]
    text = st.text_input(
        PRICE_KNOB["label"],
        value=url_value(key) or start,
        placeholder=placeholder,
        key=f"url_{key}",
        help=f"{PRICE_KNOB['help']} {here}".strip(),
    ).strip()
    set_url(key, text or None)
    return text


def price_override(placeholder: str, here: str) -> Prices:
    """The link's price table for results already measured, else () for each job's stored one;
    a wrong one is said once and changes nothing."""
    text = price_box("", placeholder, here)
    try:
        return parse_prices(text) if text else ()
    except UserError as exc:
        show_error(exc)
        return ()
