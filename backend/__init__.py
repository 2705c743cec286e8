"""The domain: ingest, inspect, compatibility, optimize, benchmark, worker, CLI. Never imports streamlit."""
