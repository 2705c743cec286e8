"""`python -m backend.cluster join --address HEAD:6379 --target NAME` starts a node of a target;
`python -m backend.cluster nodes` prints what every node announced (needs the database). Both
ask for Ray's token authentication (backend/cluster/auth.py) unless RAY_AUTH_MODE says no."""

from __future__ import annotations

import argparse
import json
import os
import sys

import settings
from backend.cluster import auth, targets
from backend.errors import UserError
from backend.specs import Configuration


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.cluster", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)
    join = verbs.add_parser("join", help="start Ray on this machine as a node of one target")
    join.add_argument("--address", default=None, help="default: $OPTIBOARD_RAY_ADDRESS")
    join.add_argument("--target", required=True, help="hardware target name, e.g. t4 or xeon")
    join.add_argument("--num-gpus", type=int, default=None, help="default: what Ray detects")
    join.add_argument("--dry-run", action="store_true", help="print the command only")
    verbs.add_parser("nodes", help="survey the cluster and print each node's announcement")
    args = parser.parse_args(argv)
    if args.verb == "join":
        Configuration(precision="fp32", target=args.target)  # checks the name as sweeps do
        address = args.address or settings.RAY_ADDRESS.get()
        if not address:
            parser.error("give --address or set OPTIBOARD_RAY_ADDRESS")
        command = targets.join_command(address, args.target, args.num_gpus)
        environment = auth.with_tokens(os.environ)  # the node's processes check every call
        missing = auth.missing_token(environment)
        if missing:
            print(missing, file=sys.stderr)
            return 2
        print(" ".join(command))
        if args.dry_run:
            return 0
        # Ray's worker processes inherit this: they import Optiboard from this checkout
        pythonpath = os.pathsep.join(
            p for p in (str(settings.PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        sys.stdout.flush()
        os.execvpe(command[0], command, {**environment, "PYTHONPATH": pythonpath})  # becomes ray
    from backend.cluster.dispatch import connect
    from storage.repo import cluster as cluster_store

    try:
        connect()
    except UserError as exc:  # ClusterUnavailable included: one sentence, no traceback
        print(exc, file=sys.stderr)
        return 2
    announcements = targets.survey()
    cluster_store.record_nodes(announcements)
    for a in announcements:
        gpus = [g["name"] for g in a["hardware"].get("gpus", [])]
        guards = (a["hardware"].get("isolation") or {}).get("summary", "not reported")
        node = {"node": a["node_id"][:8], "target": a["target"], "gpus": gpus}
        print(json.dumps({**node, "untrusted models run under": guards}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
