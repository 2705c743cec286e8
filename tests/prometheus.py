"""Reading a real /metrics endpoint in tests, one sample per (name, labels)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def metric_samples(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
