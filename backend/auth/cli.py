"""`optiboard users ...`: accounts from a terminal, where the first admin is made.

Whoever can run the CLI on the server already owns the data directory, so the CLI acts as an admin;
its changes are audited as `cli:<os user>`.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backend.auth.actions import Action
from backend.auth.roles import Principal, Role, Via
from backend.errors import UserError


def cli_principal() -> Principal:
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = str(os.getuid())
    return Principal(who, Role.ADMIN, Via.CLI)


def _password(args: argparse.Namespace) -> str:
    """From --password-stdin (scripts) or asked twice without echo (people)."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    try:
        first = getpass.getpass("Password: ")
        again = getpass.getpass("Repeat password: ")
    except EOFError:  # no terminal and nothing piped in
        raise UserError(
            "No password was typed (the input ended); run it in a terminal, or pipe the "
            "password in with --password-stdin."
        ) from None
    if first != again:
        raise UserError("The two passwords differ; run the command again.")
    return first


def cmd_add(args: argparse.Namespace) -> int:
    from backend.auth import accounts

    accounts.check_new_name(args.name)  # before the password is asked for
    password = None if args.no_password else _password(args)
    account = accounts.add_account(cli_principal(), args.name, args.role, password)
    print(f"added {account.name} ({account.role.value})")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from backend.auth import accounts

    rows = accounts.list_accounts()
    if not rows:
        print("no accounts yet: add the first admin with `optiboard users add NAME --role admin`")
    for a in rows:
        waits = a.throttled_until
        locked = f"  new addresses wait until {waits:%Y-%m-%d %H:%M:%S} UTC" if waits else ""
        kind = "" if a.has_password else "  (identity provider only)"
        print(f"{a.name}  {a.role.value}{kind}{locked}")
    return 0


def cmd_role(args: argparse.Namespace) -> int:
    from backend.auth import accounts

    accounts.set_role(cli_principal(), args.name, args.role)
    print(f"{args.name} is now {args.role}")
    return 0


def cmd_password(args: argparse.Namespace) -> int:
    from backend.auth import accounts

    accounts.existing_account(args.name)  # before the password is asked for
    accounts.set_password(cli_principal(), args.name, _password(args))
    print(f"password of {args.name} changed")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from backend.auth import accounts

    accounts.remove_account(cli_principal(), args.name)
    print(f"removed {args.name}")
    return 0


def _always(args: argparse.Namespace) -> bool:
    return True


@dataclass(frozen=True)
class Audited:
    """A command that changes something: its action, the target the audit log names, and (for a
    command that also has a form that only reads or measures in the terminal) when it changes."""

    action: Action
    target: Callable[[argparse.Namespace], str]
    changes: Callable[[argparse.Namespace], bool] = _always


AUDITED: dict[str, Audited] = {
    "add": Audited(Action.UPLOAD, lambda args: Path(args.path).name),
    "submit": Audited(Action.SUBMIT, lambda args: f"model {args.model}"),
    "run": Audited(Action.SUBMIT, lambda args: f"model {args.model}"),
    "regress": Audited(  # --report JOB prints a stored check
        Action.SUBMIT, lambda args: f"model {args.model}", lambda args: args.report is None
    ),
    "generate": Audited(  # without --submit it measures a folder here and stores nothing
        Action.SUBMIT, lambda args: f"model {args.model}", lambda args: args.submit
    ),
    "cancel": Audited(Action.CANCEL, lambda args: f"job {args.job}"),
}


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command; one that changes something is audited as `cli:<os user>`.

    `users`, `baseline`, `serve submit`, `mixed --submit` and signed links audit themselves,
    with the account, job or model as target.
    """
    audit = AUDITED.get(args.command)
    if audit is None or not audit.changes(args):
        return args.func(args)
    from backend.auth.audit import audited

    with audited(cli_principal(), audit.action, audit.target(args)):
        return args.func(args)


def register_users(sub: argparse._SubParsersAction) -> None:
    """Add `users` and its subcommands to the main parser."""
    users = sub.add_parser("users", help="accounts and roles (the first admin is made here)")
    verbs = users.add_subparsers(dest="users_command", required=True)
    roles = [r.value for r in Role]
    p = verbs.add_parser("add", help="add an account")
    p.add_argument("name")
    p.add_argument("--role", choices=roles, default=Role.VIEWER.value)
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    p.add_argument(
        "--no-password", action="store_true", help="identity-provider sign-in only (name = e-mail)"
    )
    p.set_defaults(func=cmd_add)
    verbs.add_parser("list", help="list accounts").set_defaults(func=cmd_list)
    p = verbs.add_parser("role", help="change an account's role")
    p.add_argument("name")
    p.add_argument("role", choices=roles)
    p.set_defaults(func=cmd_role)
    p = verbs.add_parser(
        "password", help="set a new password (also ends the account's sign-in wait)"
    )
    p.add_argument("name")
    p.add_argument("--password-stdin", action="store_true")
    p.set_defaults(func=cmd_password)
    p = verbs.add_parser("remove", help="remove an account")
    p.add_argument("name")
    p.set_defaults(func=cmd_remove)
