"""Live fragments in AppTest: which fragments a run asks the browser to rerun on a timer, and one
such timed rerun, as the browser requests it every run_every seconds.

AppTest only runs the whole script, so a part of a page that is redrawn by a timed fragment
rerun alone (and frozen if it is not in one) could not be seen from a test. Both helpers run
Streamlit's own script runner (the LocalScriptRunner AppTest uses), only recording what it sends
or naming the fragment to run, as a server does for the browser's rerun request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequests
from streamlit.testing.v1 import AppTest, app_test
from streamlit.testing.v1.local_script_runner import LocalScriptRunner


@contextmanager
def _runner(cls: type[LocalScriptRunner]) -> Iterator[None]:
    original = app_test.LocalScriptRunner
    app_test.LocalScriptRunner = cls  # type: ignore[misc]
    try:
        yield
    finally:
        app_test.LocalScriptRunner = original  # type: ignore[misc]


@dataclasses.dataclass
class Timed:
    """A fragment the browser reruns every `interval` seconds, and the text it drew."""

    fragment_id: str
    interval: float
    text: str


def _element_text(msg: ForwardMsg) -> str:
    element = msg.delta.new_element
    kind = element.WhichOneof("type")
    if kind is None:
        return ""
    proto: Any = getattr(element, kind)
    return " ".join(str(getattr(proto, f, "")) for f in ("body", "label", "text", "value"))


def timed_fragments(at: AppTest) -> list[Timed]:
    """Run `at` once (the whole script) and return the fragments it set to rerun on a timer."""
    sent: list[ForwardMsg] = []

    class Recording(LocalScriptRunner):
        def forward_msgs(self) -> list[ForwardMsg]:
            sent.extend(super().forward_msgs())
            return super().forward_msgs()

    with _runner(Recording):
        at.run()
    texts: dict[str, list[str]] = {}
    for msg in sent:
        if msg.WhichOneof("type") == "delta" and msg.delta.fragment_id:
            texts.setdefault(msg.delta.fragment_id, []).append(_element_text(msg))
    return [
        Timed(
            m.auto_rerun.fragment_id,
            m.auto_rerun.interval,
            "\n".join(texts.get(m.auto_rerun.fragment_id, [])),
        )
        for m in sent
        if m.WhichOneof("type") == "auto_rerun"
    ]


def rerun_fragment(at: AppTest, fragment_id: str) -> AppTest:
    """One timed rerun of that fragment alone; `at` then holds what it drew (nothing else)."""

    pages = dict(at._registered_pages)  # what app.py's st.navigation registered last run

    class FragmentRun(LocalScriptRunner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # a server's runner keeps the page registry between runs; AppTest's is new each run
            self._pages_manager.set_pages_and_resolve(pages)

        def request_rerun(self, rerun_data: Any) -> bool:
            scoped = dataclasses.replace(
                rerun_data,
                fragment_id_queue=[fragment_id],
                is_fragment_scoped_rerun=True,
                is_auto_rerun=True,
            )
            # ScriptRunner's constructor already queued a full run, which would absorb this
            # fragment's: start from no request, as a server's runner between runs is
            self._requests = ScriptRequests()
            return super().request_rerun(scoped)

    with _runner(FragmentRun):
        return at.run()
