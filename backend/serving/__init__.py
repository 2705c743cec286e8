"""Serving under load: scenarios, a real Triton server, the dynamic-batcher simulation, export."""
