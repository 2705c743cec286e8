"""The one Streamlit internal we touch, kept here: leaving legacy pages/-directory mode.

Why a patch and not a supported API: Streamlit treats a ``pages/`` folder beside the entry file
as a legacy multipage app until some session has called ``st.navigation`` ("As soon as any
session of your app executes the st.navigation command, your app will ignore the pages/
directory", st.navigation's reference, Streamlit 1.67). The flag is process-wide
(``PagesManager.uses_pages_directory``), so the very first visit after a server start that goes
straight to /compare runs pages/compare.py *without* app.py: no sidebar, no router. The
supported ways out (no pages/ folder beside the entry file, or an entry file in another folder)
would rename pages/, which the design keeps. So a page that finds itself run in legacy mode
clears the flag and reruns; the rerun goes through app.py, whose st.navigation clears it for good.
"""

from __future__ import annotations

import streamlit as st

_CHECKED = False


def ensure_router() -> None:
    """Make app.py (st.navigation and the shared sidebar) the router from the first request on."""
    global _CHECKED
    from streamlit.runtime.pages_manager import PagesManager

    if _CHECKED:
        return
    _CHECKED = True  # once per server process: the flag is process-wide
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
