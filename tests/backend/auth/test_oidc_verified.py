"""An identity provider's e-mail names an account only when the provider verified it.

The claims come from a real OIDC provider (oidc-provider-mock, as in the browser tests) through a
real authorization-code round trip and a checked ID token, as Streamlit's st.login receives them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from oidc_provider_mock import User, run_server_in_thread
from oidc_provider_mock._client_lib import OidcClient

from backend.auth import accounts
from backend.auth.cli import cli_principal
from backend.auth.roles import Role

USERS = [
    User(sub="admin-unverified", claims={"email": "lead@example.com", "email_verified": False}),
    User(sub="admin-verified", claims={"email": "lead@example.com", "email_verified": True}),
    User(sub="stranger", claims={"email": "new@example.com"}),  # no email_verified at all
]


@pytest.fixture(scope="module")
def client() -> Iterator[OidcClient]:
    with run_server_in_thread(user_claims=USERS) as server:
        yield OidcClient(
            id="optiboard",
            secret="secret",
            redirect_uri="http://127.0.0.1:9/oauth2callback",
            issuer=f"http://localhost:{server.server_port}",
        )


def _claims(client: OidcClient, subject: str) -> dict[str, Any]:
    """Sign in at the provider as `subject` and return the verified ID token's claims."""
    answer = httpx.post(client.authorization_url(state="s"), data={"sub": subject})
    return client.fetch_token(answer.headers["location"], state="s").claims


def test_an_unverified_email_never_names_an_account_nor_makes_one(
    data_dir: Path, client: OidcClient
) -> None:
    accounts.add_account(cli_principal(), "lead@example.com", "admin", None)
    with pytest.raises(accounts.SignInError) as refused:
        accounts.oidc_principal(_claims(client, "admin-unverified"))
    assert str(refused.value).startswith(
        "Your identity provider did not confirm that lead@example.com is your address"
    )
    with pytest.raises(accounts.SignInError):  # missing counts as not verified
        accounts.oidc_principal(_claims(client, "stranger"))

    verified = accounts.oidc_principal(_claims(client, "admin-verified"))
    assert verified is not None and verified.role == Role.ADMIN
