"""The domain: ingest, inspect, compat, optimize, benchmark, worker, CLI; no streamlit here."""
