"""Shared view pieces for pages: URL state, live refresh, formatting, widgets and the router.

No domain code lives here: a helper that needs to know about jobs, models or sweeps calls one
backend function and renders its answer. Pages import from the submodules.
"""
