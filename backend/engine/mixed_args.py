"""The mixed-precision search's arguments, apart from the search (numpy, ONNX) so that building
`optiboard`'s parser imports only argparse: `python -m backend.engine.mixedcli` and `optiboard
mixed` share this one list."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The search's arguments, one list for `python -m backend.engine.mixedcli` and `optiboard
    mixed`."""
    parser.add_argument("model", type=int, help="model id (see `optiboard models`)")
    parser.add_argument("--bound", default="cosine=0.99", help="cosine=0.99 or top1=0.98")
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="value for a symbolic dimension other than batch, e.g. seq=128 (as for sweeps)",
    )
    parser.add_argument("--quick", action="store_true", help="short measurement per step")
    parser.add_argument("--submit", action="store_true", help="queue FP32, INT8 and the best mix")
