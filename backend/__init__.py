"""The domain: ingest, inspect, compat, optimize, benchmark, worker, CLI; no streamlit here."""

from backend.vendortelemetry import decline

decline()  # before any module of the domain loads ONNX Runtime or OpenVINO
