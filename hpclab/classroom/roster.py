"""The students' names for a room: read from the instructor's roster (CSV), or the account names.

nbgrader's formgrader and its grade export show each student as "last name, first name"; a
student it only met through a submission has neither and shows as "None, None". The room gives
every account a name before any submission: the roster's row, or the account itself.

A roster is a CSV with a header naming at least first_name and last_name; email and account are
optional. Rows without an account column go to student01, student02, ... in order.
"""

from __future__ import annotations

import csv
from pathlib import Path

from hpclab.core.errors import HpclabError

REQUIRED = ("first_name", "last_name")
COLUMNS = (*REQUIRED, "email", "account")


def default_names(accounts: list[str]) -> dict[str, dict[str, str]]:
    """Every account named by itself (last name: the account; no first name, no email)."""
    return {a: {"first_name": "", "last_name": a, "email": ""} for a in accounts}


def read_roster(path: Path, accounts: list[str]) -> dict[str, dict[str, str]]:
    """{account: {first_name, last_name, email}} for every one of `accounts`: the roster's rows,
    the others named by themselves. Raises HpclabError naming the row or column at fault."""
    fix = f"a CSV whose header has {', '.join(REQUIRED)} (and optionally email, account), one row per student"
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in (reader.fieldnames or [])]
            rows = [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise HpclabError(f"cannot read the roster {path}: {e}", fix) from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise HpclabError(f"the roster {path} has no column {', '.join(missing)} (its header: {', '.join(header)})", fix)
    if len(rows) > len(accounts):
        raise HpclabError(f"the roster {path} names {len(rows)} students, the room has {len(accounts)} accounts",
                          f"open the room with --students {len(rows)}")
    names = default_names(accounts)
    for i, row in enumerate(rows):
        account = row.get("account") or accounts[i]
        if account not in names:
            raise HpclabError(f"row {i + 2} of the roster {path} names account {account!r}, which is not "
                              "one of the room's students", f"use {accounts[0]} ... {accounts[-1]}, or leave account out")
        if not (row["first_name"] or row["last_name"]):
            raise HpclabError(f"row {i + 2} of the roster {path} has neither a first nor a last name", fix)
        names[account] = {"first_name": row["first_name"], "last_name": row["last_name"],
                          "email": row.get("email", "")}
    return names
