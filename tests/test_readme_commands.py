"""Every command and address the README and grader/README.md give exists: each `make TARGET` is a
target of the Makefile, each `hpclab COMMAND [SUBCOMMAND]` is one of the CLI's (its parser, not
its help text), each local address uses the port and route the code serves, and each link to a
file of the repository points at one. A newcomer who copies a line from them meets no "no rule to
make target" and no "invalid choice"."""

from __future__ import annotations

import argparse
import re

import pytest

from hpclab.cli.main import build_parser
from hpclab.core import paths

DOCS = ["README.md", "grader/README.md", "docs/classroom.md"]


def _code(text: str) -> list[str]:
    """The text of every fenced block and every inline code span."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return blocks + spans


def _make_targets() -> set[str]:
    text = (paths.repo() / "Makefile").read_text()
    return set(re.findall(r"(?m)^([a-z][a-z0-9-]*):", text))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize("doc", DOCS)
def test_every_make_target_in_the_docs_exists(doc):
    targets = _make_targets()
    named = {m for code in _code((paths.repo() / doc).read_text())
             for m in re.findall(r"(?:^|[\s;&|(])make ([a-z][a-z0-9-]*)", code)}
    missing = sorted(named - targets)
    assert not missing, f"{doc} names make targets the Makefile lacks: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_every_hpclab_command_in_the_docs_exists(doc):
    top = _subcommands(build_parser())
    wrong = []
    for code in _code((paths.repo() / doc).read_text()):
        for line in code.splitlines():
            for m in re.finditer(r"(?<![\w-])hpclab ([a-z][a-z-]*)((?: [a-z][a-z-]*(?: \| [a-z][a-z-]*)*)?)", line):
                command, rest = m.group(1), m.group(2).split()
                if command not in top:
                    wrong.append(f"hpclab {command}")
                    continue
                subs = _subcommands(top[command])
                if subs and rest:
                    # 'up | down | status' lists alternatives; a word that is no subcommand (an
                    # argument like a lab's name) ends the command
                    for word in [w for w in rest if w != "|"]:
                        if word not in subs and rest[0] != word:
                            break
                        if word not in subs:
                            wrong.append(f"hpclab {command} {word}")
                            break
    assert not wrong, f"{doc} names commands hpclab does not have: {sorted(set(wrong))}"


@pytest.mark.parametrize("doc", DOCS)
def test_local_addresses_and_file_links_exist(doc):
    from hpclab.classroom import grading_room, hub
    from hpclab.grading import jupyter

    text = (paths.repo() / doc).read_text()
    ports = {str(jupyter.serve_lab.__defaults__[0]), str(hub.HubSettings.port)}  # the lab's, the hub's
    for port, route in re.findall(r"http://127\.0\.0\.1:(\d+)(/[\w/.-]*)?", text):
        assert port in ports, f"{doc}: no hpclab server listens on port {port} by default"
        if route.startswith("/services/"):
            assert route.split("/")[2] == grading_room.COURSE_ID, f"{doc}: the hub has no service {route}"
    for link in re.findall(r"\]\(((?!https?:)[^)#]+)\)", text):
        assert (paths.repo() / doc).parent.joinpath(link).exists(), f"{doc} links to a missing file: {link}"
