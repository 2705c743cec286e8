"""Ray's token authentication, asked for by every Ray process Optiboard starts or connects.

Without it anyone who reaches a cluster's ports can run code on every node (the head holds the
database's URL): Ray 2.60's `ray start` turns it on only where a token is already there. `join`,
`nodes` and the worker's connection ask for it unless RAY_AUTH_MODE is set (`disabled` is the
explicit way to go without), and look for the cluster's token where Ray does: RAY_AUTH_TOKEN,
the file RAY_AUTH_TOKEN_PATH names, then ~/.ray/auth_token. Ray reads the mode once, when it is
first imported, so `ask_for_tokens` runs before that.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

MODE = "RAY_AUTH_MODE"
TOKEN = "RAY_AUTH_TOKEN"
TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"
HOW_TO_GET_IT = (
    "copy the head's ~/.ray/auth_token (`ray get-auth-token` prints it there) to ~/.ray/auth_token "
    "on this machine or set RAY_AUTH_TOKEN to it"
)


def with_tokens(environ: Mapping[str, str]) -> dict[str, str]:
    """environ asking for tokens, unless it says otherwise."""
    return {MODE: "token", **environ}


def ask_for_tokens() -> None:
    """This process asks for tokens (before Ray is imported: see the module's docstring)."""
    os.environ.setdefault(MODE, "token")


def one_machine_tokens() -> None:
    """Tokens asked for, and a fresh one unless one is found, for a cluster this process starts
    on this machine alone (the bench scripts); before Ray is imported."""
    ask_for_tokens()
    if not token_found(os.environ):
        os.environ[TOKEN] = secrets.token_hex(16)


def token_found(environ: Mapping[str, str]) -> bool:
    """Whether Ray will find a token here, looking where and in the order Ray looks."""
    if environ.get(TOKEN, "").strip():
        return True
    if environ.get(TOKEN_PATH):
        return Path(environ[TOKEN_PATH]).is_file()
    home = environ.get("HOME") or str(Path.home())
    return (Path(home) / ".ray" / "auth_token").is_file()


def missing_token(environ: Mapping[str, str]) -> str | None:
    """The sentence when tokens are asked for and none is here; None when nothing is missing."""
    if environ.get(MODE, "").lower() != "token" or token_found(environ):
        return None
    return (
        f"This machine has no token for the Ray cluster: {HOW_TO_GET_IT}; RAY_AUTH_MODE=disabled "
        "goes without, and then anyone who reaches the cluster can run code on it."
    )


def refused(address: str, exc: BaseException) -> str | None:
    """The sentence when the cluster turned this machine's token down; None for any other
    failure. Ray 2.60's ray.init raises ConnectionError from a RuntimeError that holds the GCS
    client's AuthenticationError only as text ('RPC error: InvalidAuthToken: ...')."""
    from ray.exceptions import AuthenticationError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AuthenticationError) or "InvalidAuthToken" in str(seen):
            return f"The Ray cluster at {address} refused this machine's token; {HOW_TO_GET_IT}."
        seen = seen.__cause__ or seen.__context__
    return None
