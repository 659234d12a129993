"""`python -m hpclab.grading STEP ...`: the instructor's pipeline on the command line, an alias of
`hpclab grade STEP ...` (the steps are defined once, in hpclab/grading/commands.py; errors are
printed as hpclab prints them: `hpclab: what`, `  what to do: hint`, exit code 2).

Three entry points the grader starts itself stay here, with one-line `ERROR: ...` messages for
the logs of the process that started them: `kernel CONNECTION_FILE` (ipykernel in the sandbox,
the kernel spec init_course installs), `check` (test cells run on a submission's answers, JSON on
stdin) and `reference LAB DIR` (a lab's expected answers from its packed data, as JSON).
See grader/README.md.
"""

from __future__ import annotations

import argparse
import sys

from hpclab.core.errors import HpclabError
from hpclab.grading import commands


def sandbox_kernel(connection_file: str) -> None:
    """Start ipykernel for nbgrader inside hpclab.grading.sandbox (the dedicated user, no network, only
    the submission's copy writable, resource limits); exits with the kernel's status."""
    from hpclab.grading import sandbox   # the sandbox's imports: only when a kernel starts

    try:
        code = sandbox.run_kernel(connection_file)
    except HpclabError as exc:
        print(f"ERROR: {exc.one_line()}", file=sys.stderr)
        code = 2
    sys.exit(code)


def _reference(lab: str, lab_dir: str) -> int:
    from hpclab.grading import references   # the reference analysis: only when asked

    return references.main([lab, lab_dir])


def main(argv: list[str] | None = None) -> int:
    """`python -m hpclab.grading STEP ...`: the steps of commands.STEPS (as `hpclab grade`), plus
    the internal `kernel`, `check` and `reference` entry points. Returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["kernel"] and len(argv) == 2:
        sandbox_kernel(argv[1])
    if argv == ["check"]:
        from hpclab.grading import answers   # the grader's check: only when asked

        return answers.check_main()
    if argv[:1] == ["reference"] and len(argv) == 3:
        return _reference(argv[1], argv[2])
    p = argparse.ArgumentParser(prog="python -m hpclab.grading",
                                description="Grade hpclab labs with nbgrader; the same steps as 'hpclab grade' "
                                            "(see grader/README.md).",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = p.add_subparsers(dest="step", required=True, metavar="STEP")
    commands.add_steps(sub)
    r = sub.add_parser("reference", help="expected answers of a lab from its packed data (JSON; internal)")
    r.add_argument("lab")
    r.add_argument("lab_dir")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        if args.step == "reference":
            return _reference(args.lab, args.lab_dir)
        return args.func(args)
    except HpclabError as exc:
        print(f"hpclab: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
