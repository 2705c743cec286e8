"""A form drawn from knob declarations: one widget per knob that declares one (backend/knobs).

The widget's kind follows from the field's type (a tuple of choices: multiselect; choices or an
enum: select box; bool: toggle; int/float: number; str: text; a tuple of names: one per line;
name:value pairs: a number per name; a nested group: its own knobs, in an expander titled by its
label), its label and help from the declaration, its starting value from the link (the
values backend/forms/optimize.start_values read), and its value goes back to the link through
the knob's declared key and codec (backend/knobs/links.field_query). No link key, label or
widget kind is spelled by the page: a knob added with a `widget` appears in the form.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import streamlit as st

from backend.errors import UserError
from backend.knobs import Knob, Widget, default_of, is_pairs, item_type, knobs, scalar
from backend.knobs.links import field_query
from pages.components.formatting import plain
from pages.components.url_state import link_note, set_url


class KnobForm:
    """The declared knobs of `cls` drawn where the page asks, starting from `start` (field
    values by name: the link's); `values` holds what was drawn, by field name, typed."""

    def __init__(self, cls: type, start: Mapping[str, Any]) -> None:
        self.cls, self.start = cls, start
        self.values: dict[str, Any] = {}
        self.skipped: set[str] = set()
        self.declared = {f.name: (f, k, tp) for f, k, tp in knobs(cls) if k.widget}

    def draw(
        self,
        name: str,
        options: Sequence[Any] | None = None,
        labels: Mapping[Any, str] | Callable[[Any], str] | None = None,
        help: str | None = None,
        shown: bool = True,
    ) -> Any:
        """One knob's widget; `options` (and their `labels`) where what is offered depends on
        the host (runtimes usable here, the model's symbolic dims); `help` where the page's
        words say more than the declaration's. Not `shown` (its runtime, provider or
        precision is not picked, or the host has no choice to offer): not drawn, linked or
        built, so the sweep takes its default, and `rest` leaves it out too."""
        f, k, tp = self.declared[name]
        if not shown:
            self.skipped.add(name)
            return default_of(f)
        if dataclasses.is_dataclass(tp):
            return self._group(name)
        if is_pairs(tp) and not options:  # no names to give values to: nothing drawn or linked
            self.values[name] = ()
            return ()
        start = self.start.get(name, _start_of(f, k, tp))
        linked = k.url if name in self.start and k.widget.key not in st.session_state else None
        value = _widget(k, tp, start, options, labels, help, linked)
        self.values[name] = value
        self._link(name, value)
        return value

    def rest(self) -> None:
        """Every declared knob the page has not placed yet, in declared order (nested groups as
        theirs): where a knob added with a `widget` appears with no page edit."""
        for name, (_, k, _) in self.declared.items():
            placed = name in self.values or name in self.skipped
            if not placed and not (k.widget and k.widget.within):
                self.draw(name)

    def _group(self, name: str) -> Any:
        """A nested group's knobs, in its expander when it has a label, then this form's knobs
        declared `within` it; the group object when it is valid (a refusal comes back when the
        spec is built, in one sentence)."""
        f, k, tp = self.declared[name]
        old = self.start.get(name) or default_of(f)
        inner = KnobForm(tp, {g.name: getattr(old, g.name) for g in dataclasses.fields(tp)})
        assert k.widget is not None
        box = st.expander(k.label, expanded=k.widget.expanded) if k.label else None
        with box or contextlib.nullcontext():
            inner.rest()
            for other, (_, known, _) in self.declared.items():
                if known.widget and known.widget.within == name:
                    self.draw(other)
        given = {g.name: getattr(old, g.name) for g in dataclasses.fields(tp)} | inner.values
        try:
            value: Any = tp(**given)
        except UserError:
            self.values[name] = given  # the spec refuses it with the reason; the link keeps
            return given  # the last valid value
        self.values[name] = value
        self._link(name, value)
        return value

    def _link(self, name: str, value: Any) -> None:
        for key, text in field_query(self.cls, name, value).items():
            set_url(key, text)


def _start_of(f: dataclasses.Field, k: Knob, tp: Any) -> Any:
    """Where a knob starts when the link names nothing: its widget's declared start (for
    name:value pairs, each name's), else its default."""
    assert k.widget is not None
    return default_of(f) if k.widget.start is None or is_pairs(tp) else k.widget.start


def _widget(
    k: Knob,
    tp: Any,
    start: Any,
    options: Sequence[Any] | None,
    labels: Any,
    help: str | None,
    linked: str | None = None,
) -> Any:
    """The widget its type and declaration call for, returning the knob's typed value;
    `linked`: the link key its start came from, so a value offered nowhere is said, not dropped
    silently."""
    w = k.widget
    assert w is not None
    words = help if help is not None else (k.help or None)
    if is_pairs(tp):
        return _pairs(k, w, start, options or ())
    item = item_type(tp)
    choices = list(options if options is not None else w.choices or _members(item or tp))
    label = _formatter(choices, labels if labels is not None else w.labels)
    if item is not None and (choices or options is not None):
        found = _as_choices(choices, start)
        picked = [c for c in found if c is not None]
        lost = [str(scalar(v)) for v, c in zip(start, found, strict=True) if c is None]
        if linked and lost:
            instead = "its other values are picked" if picked else "nothing is picked for it"
            _offered_nowhere(linked, lost, k.label, [label(c) for c in choices], instead)
        value = st.multiselect(
            k.label, choices, default=picked, key=w.key, format_func=label, help=words
        )
        return tuple(value)
    if item is not None:  # names, one per line
        text = st.text_area(k.label, "\n".join(start), key=w.key, help=words)
        return tuple(line.strip() for line in text.splitlines() if line.strip())
    if choices:
        [now] = _as_choices(choices, [start])
        index = choices.index(now) if now is not None else 0
        if linked and now is None:
            instead = f"{label(choices[0])} is picked instead"
            _offered_nowhere(
                linked, [str(scalar(start))], k.label, list(map(label, choices)), instead
            )
        return st.selectbox(k.label, choices, index=index, key=w.key, format_func=label, help=words)
    if tp is bool:
        return st.toggle(k.label, bool(start), key=w.key, help=words)
    if tp in (int, float):
        return _number(k, w, tp, start, words)
    text = st.text_input(k.label, str(start), key=w.key, placeholder=w.placeholder, help=words)
    return text.strip()


def _offered_nowhere(key: str, lost: list[str], label: str, shown: list[str], instead: str) -> None:
    """One sentence for link values this form does not offer (batches=-1, a provider this host
    lacks): which, what is offered, and what is picked instead."""
    offered = ", ".join(shown[:12]) or "nothing"
    link_note(
        f"The link's {key}= holds {', '.join(v[:40] for v in lost[:5])}, not offered for "
        f"{label} here (offered: {offered}); {instead}."
    )


def _members(tp: Any) -> list[Any]:
    return list(tp) if isinstance(tp, type) and issubclass(tp, enum.Enum) else []


def _as_choices(choices: list[Any], given: Sequence[Any]) -> list[Any]:
    """The given values as the choices they name (a link's "fp32" is Precision.FP32); one
    that names no choice is None (a provider this host lacks is left out)."""
    by_text = {str(scalar(c)): c for c in choices}
    return [by_text.get(str(scalar(v))) for v in given]


def _formatter(choices: list[Any], labels: Any) -> Callable[[Any], str]:
    """How a choice reads: the declared mapping or function, else its `.label`, else itself."""

    def label(value: Any) -> str:
        [choice] = _as_choices(choices, [value])
        choice = value if choice is None else choice
        if isinstance(labels, Mapping):
            return str(labels.get(choice, scalar(choice)))
        if callable(labels):
            return str(labels(choice))
        return str(getattr(choice, "label", None) or scalar(choice))

    return label


def _number(k: Knob, w: Widget, tp: type, start: Any, words: str | None) -> Any:
    """A number input (or slider) within the declared limits, shown divided by `scale`; a
    start outside them is clamped, never a widget error."""
    low, high = (tp(x) for x in w.limits) if w.limits else (None, None)
    shown = tp(start) // w.scale if w.scale > 1 else tp(start)
    if w.limits:
        shown = min(max(shown, low), high)
        # a number typed past a limit is dropped by the widget, which keeps the last one: say
        # the range where the user looks for why
        words = f"{words + ' ' if words else ''}From {low:g} to {high:g}."
    if w.slider:
        value = st.slider(k.label, low, high, shown, key=w.key, help=words)
    else:
        extra = {"step": w.step} if w.step is not None else {}
        extra |= {"format": w.format} if w.format else {}
        value = st.number_input(k.label, low, high, shown, key=w.key, help=words, **extra)
    return tp(value) * w.scale if w.scale > 1 else tp(value)


def _pairs(k: Knob, w: Widget, start: Any, names: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """A number per name (the model's symbolic dims), from the link's pair for it, else the
    declared start."""
    given = dict(start)
    st.caption(k.label)
    cols = st.columns(min(len(names), 4))
    low = int(w.limits[0]) if w.limits else None
    values = []
    for index, name in enumerate(names):
        now = max(int(given.get(name, w.start)), low or 0)  # below the least: clamped
        value = cols[index % len(cols)].number_input(
            plain(name), min_value=low, value=now, step=1, key=f"{w.key}_{name}"
        )
        values.append((name, int(value)))
    return tuple(values)
