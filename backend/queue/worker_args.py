"""The worker's flags, one definition for `python -m backend.queue.worker` and `optiboard worker`.

Kept apart from the worker so the CLI can declare them without importing the worker's runtimes.
"""

from __future__ import annotations

import argparse

from backend.cli_parsing import positive


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """--once, --poll-seconds, --lease-seconds (read by backend.queue.worker.run_from_args)."""
    parser.add_argument("--once", action="store_true", help="exit when the queue is empty")
    parser.add_argument("--poll-seconds", type=positive(float), default=1.0)
    parser.add_argument(
        "--lease-seconds",
        type=positive(float),  # a lease of 0 lapses as it is taken: another worker may take it too
        default=None,
        help="default: $OPTIBOARD_LEASE_SECONDS",
    )
