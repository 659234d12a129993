"""A room's student names (hpclab.classroom.roster): from the instructor's CSV, or the accounts."""

from __future__ import annotations

import pytest

from hpclab.classroom.roster import default_names, read_roster
from hpclab.core.errors import HpclabError

ACCOUNTS = ["student01", "student02", "student03"]


def test_rows_go_to_the_accounts_in_order_and_the_rest_keep_their_account_name(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("last_name,first_name,email\nLovelace,Ada,ada@example.org\nHopper,Grace,\n")
    names = read_roster(roster, ACCOUNTS)
    assert names["student01"] == {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.org"}
    assert names["student02"]["last_name"] == "Hopper"
    assert names["student03"] == default_names(["student03"])["student03"]


def test_an_account_column_places_a_row(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("account,first_name,last_name\nstudent03,Alan,Turing\n")
    assert read_roster(roster, ACCOUNTS)["student03"]["first_name"] == "Alan"


@pytest.mark.parametrize("text, says", [
    ("name,email\nAda,a@b\n", "no column first_name, last_name"),
    ("first_name,last_name\na,b\nc,d\ne,f\ng,h\n", "names 4 students, the room has 3"),
    ("account,first_name,last_name\nstudent99,Ada,Lovelace\n", "not one of the room's students"),
    ("first_name,last_name\n,\n", "neither a first nor a last name"),
])
def test_a_wrong_roster_is_refused_naming_what_is_wrong(tmp_path, text, says):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    with pytest.raises(HpclabError, match=says):
        read_roster(roster, ACCOUNTS)


def test_a_missing_roster_is_one_clear_error(tmp_path):
    with pytest.raises(HpclabError, match="cannot read the roster"):
        read_roster(tmp_path / "none.csv", ACCOUNTS)
