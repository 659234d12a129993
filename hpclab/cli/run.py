"""Command-line subcommands for experiments: `hpclab run`, `hpclab runs`, `hpclab show`.

    hpclab run specs/stream.yaml --sweep omp.num_threads=1,2 --sweep binding.cpu_bind=cores,none
    hpclab run specs/stream.yaml --no-wait     # submit and return; check later with `hpclab runs`
    hpclab runs [EXPERIMENT]                   # list runs (from runs/index.jsonl)
    hpclab show RUN [--spec]                   # status, files and stderr tail of one run (and its spec)

hpclab/cli/main.py calls `add_commands(subparsers)` and prints any HpclabError without a traceback.
"""

from __future__ import annotations

import argparse
import json


def _run(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.jobs import experiment
    from hpclab.spec.model import load_specs, parse_sweep_option

    grid: dict[str, list] = {}
    for item in args.sweep or []:
        key, values = parse_sweep_option(item)
        grid[key] = values
    specs = load_specs(args.spec, extra_sweep=grid)
    runs = experiment.run(specs, wait=not args.no_wait, progress=not args.quiet, timeout=args.timeout)
    for r in runs:
        st = r.folder.status()
        print(f"{r.folder.experiment}/{r.run_id}  job {st.get('job_id')}  {st['state']}  {r.path}")
    return 0


def _runs(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.jobs import experiment
    from hpclab.runs import folder as runs
    from hpclab.core.errors import HpclabError

    entries = runs.index()
    live = [e for e in entries if e.get("state") in ("pending", "running") and e.get("job_id")]
    if live:  # jobs submitted with --no-wait: ask Slurm what became of them
        try:
            experiment.refresh([experiment.Run.open(f"{e['experiment']}/{e['run_id']}") for e in live])
            entries = runs.index()
        except HpclabError as exc:
            print(f"(states may be stale: {exc.what})")
    if args.experiment:
        entries = [e for e in entries if args.experiment in (e.get("experiment"), e.get("kernel"))]
    if not entries:
        print("no runs yet" + (f" for {args.experiment}" if args.experiment else ""))
        return 0
    print(f"{'run':40} {'job':>6} {'state':10} label")
    for e in entries[-args.last:] if args.last else entries:
        print(f"{e['experiment'] + '/' + e['run_id']:40} {str(e.get('job_id') or '-'):>6} "
              f"{e.get('state') or '?':10} {e.get('label') or ''}")
    return 0


def _show(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.runs.folder import RunFolder

    folder = RunFolder.open(args.run)
    st = folder.status()
    print(f"run       {folder.experiment}/{folder.run_id}")
    print(f"folder    {folder.path}")
    for key in ("state", "job_id", "slurm_state", "exit_code", "reason", "elapsed", "site", "repetition"):
        if st.get(key) not in (None, ""):
            print(f"{key:9} {st[key]}")
    print("files     " + ", ".join(sorted(p.name + ("/" if p.is_dir() else "") for p in folder.path.iterdir())))
    if args.spec:
        print("spec")
        for line in json.dumps(folder.spec(), indent=2, sort_keys=True).splitlines():
            print("  " + line)
    tail = folder.tail("stderr", args.lines)
    if tail:
        print(f"stderr (last {args.lines} lines)")
        for line in tail.splitlines():
            print("  " + line)
    return 0


def add_commands(subparsers) -> None:
    """Register run, runs and show on the `hpclab` parser's subparsers."""
    p = subparsers.add_parser("run", help="validate, submit and wait for the specs in a YAML file")
    p.add_argument("spec", help="YAML spec file (may contain a sweep: mapping)")
    p.add_argument("--sweep", action="append", metavar="KEY=V1,V2",
                   help="add a sweep over a dotted field, e.g. omp.num_threads=1,2 (repeatable)")
    p.add_argument("--no-wait", action="store_true", help="submit and return without waiting")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait before cancelling (default: no limit)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)

    p = subparsers.add_parser("runs", help="list runs (all, or of one experiment or kernel)")
    p.add_argument("experiment", nargs="?", help="experiment or kernel name")
    p.add_argument("--last", type=int, default=0, help="only the last N runs (0: all)")
    p.set_defaults(func=_runs)

    p = subparsers.add_parser("show", help="status, files and stderr of one run (its spec with --spec)")
    p.add_argument("run", help="run id (or a unique prefix), experiment/run-id, or folder path")
    p.add_argument("--spec", action="store_true", help="also print the run's spec (spec.json)")
    p.add_argument("--lines", type=int, default=15, help="stderr lines to show")
    p.set_defaults(func=_show)
