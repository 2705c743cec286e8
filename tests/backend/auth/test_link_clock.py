"""Link expiry follows the database's clock, not the web host's.

The web side runs in a child under faketime (libfaketime shifts every clock call of that process)
against a real PostgreSQL server, whose clock is the true one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from backend.auth import links
from storage.clock import database_now
from tests.skewed_clock import run_skewed

WEB_HOST = """
import json, sys
from datetime import UTC, datetime
from backend.auth import links
from backend.auth.roles import Principal, Role, Via

def outcome(token):
    try:
        return list(links.verify(token).jobs)
    except links.LinkError as exc:
        return str(exc)

made = links.verify(links.create_link(Principal("ed", Role.EDITOR, Via.PASSWORD), (7,), 1.0))
print(json.dumps({
    "host_now": datetime.now(UTC).isoformat(),
    "fresh": outcome(sys.argv[1]),
    "stale": outcome(sys.argv[2]),
    "made_expires": made.expires_at.isoformat(),
}))
"""


def _web_host(skew: str, fresh: str, stale: str) -> dict:
    out = run_skewed(skew, WEB_HOST, fresh, stale)
    return json.loads(out.strip().splitlines()[-1])


def test_a_skewed_web_host_can_neither_cut_nor_extend_a_link(postgres_url: str) -> None:
    now = database_now()
    fresh = links.sign((1,), now + timedelta(hours=2))
    stale = links.sign((1,), now - timedelta(hours=2))

    ahead = _web_host("+1d", fresh, stale)  # its clock says the fresh link ran out a day ago
    behind = _web_host("-1d", fresh, stale)  # its clock says the stale link has a day left

    for host, skew in ((ahead, timedelta(days=1)), (behind, timedelta(days=-1))):
        host_now = datetime.fromisoformat(host["host_now"])
        assert abs(host_now - datetime.now(UTC) - skew) < timedelta(hours=1)  # skew applied
        assert host["fresh"] == [1]
        assert host["stale"] == "This link has expired; ask the person who shared it for a new one."
        made = datetime.fromisoformat(host["made_expires"])  # a 1-day link made on that host
        assert abs(made - (database_now() + timedelta(days=1))) < timedelta(minutes=10)
