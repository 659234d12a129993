"""The `hpclab` command: the cluster, experiments, trace analysis, the course, grading and the
classroom from a terminal.

Each area registers its own subcommands (`add_commands(subparsers)` in its module of this
folder); this file assembles them, gives every parser the same habits (defaults shown in help,
an unknown option answered with the usage of the command it was given to, bare `hpclab` prints
help) and turns an HpclabError into `hpclab: what` / `  what to do: hint` and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from hpclab.core.errors import HpclabError

# Modules that add subcommands; a missing one (a part not built yet) is skipped.
COMMAND_MODULES = ["hpclab.cli.cluster", "hpclab.cli.run", "hpclab.cli.trace", "hpclab.cli.course",
                   "hpclab.cli.grade", "hpclab.cli.classroom"]


class HelpFormatter(argparse.HelpFormatter):
    """Help with each option's default, when it has a telling one (not None, False or empty; 0 is
    telling, hence the identity tests)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("%(default)" in text or default is None or default is False or default == argparse.SUPPRESS
                or default == []
                or not (action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE))):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """hpclab's parser and every subcommand's (argparse makes subparsers of the parent's class).

    An argument no parser knows is reported by the innermost command it was given to, with that
    command's usage (`hpclab runs --bogus` prints runs' usage), not the top-level one."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def version() -> str:
    """The installed package's version (pyproject.toml), or 'unknown' outside an install."""
    from importlib import metadata

    try:
        return metadata.version("hpclab")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="hpclab",
                    description="The hpclab course: the local Slurm cluster, experiments, traces, the course, "
                                "grading and a classroom. 'hpclab COMMAND --help' shows a command's options.")
    parser.add_argument("--version", action="version", version=f"hpclab {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        module.add_commands(sub)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:   # --help, --version, a usage error: argparse has printed it
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return int(args.func(args) or 0)
    except HpclabError as e:
        print(f"hpclab: {e.what}", file=sys.stderr)
        if e.hint:
            print(f"  what to do: {e.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hpclab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and friends: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
