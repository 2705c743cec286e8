"""Evidence drawn on the graph: overlays for the embedded Netron and variant diffs, computed from
the graph's structure alone (weights and external data are never read)."""
