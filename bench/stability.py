"""make bench-stability: does the same machine give the same verdicts, run after run?

Runs the whole course (`hpclab course run`, the report in build/course/) RUNS times on a quiet
machine and once more beside a background load it starts and stops itself (`stress-ng --cpu 1`,
one core busy: half of this 2-core VM), and after each run reads the fidelity table
(build/course/fidelity.json) and the notebooks' own times (report.json). Writes
build/bench/verdict-stability.json:

    {"runs": [{"loaded": false, "notebook_seconds": 598.1, "failures": 0,
               "verdicts": {"hybrid-pitfall": "yes", ...}, "disturbed": {...}}, ...],
     "stable": {"hybrid-pitfall": true, ...}, "unloaded_max_seconds": 598.1}

and a table beside it (verdict-stability.md): one row per fidelity claim, one column per run, and
whether the quiet runs agree. An earlier report is kept, renamed with its date. The loaded run is
not expected to agree: its comparisons should say they were disturbed (the noise watch) rather than
flip. Usage: .venv/bin/python bench/stability.py [--runs 3] [--no-loaded] [NOTEBOOK...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import BENCH_DIR, write_table  # noqa: E402
from hpclab.core import paths  # noqa: E402
from hpclab.core.errors import HpclabError  # noqa: E402

NAME = "verdict-stability"
LOAD = ["stress-ng", "--cpu", "1", "--cpu-method", "matrixprod", "--quiet"]
BUDGET_SECONDS = 600  # the notebooks of one quiet run (issue 36)


def course_dir() -> Path:
    return paths.build_dir() / "course"


def run_once(notebooks: list[str], loaded: bool) -> dict:
    """One whole course run (under load when `loaded`); its verdicts, times and disturbed rows."""
    load = None
    if loaded:
        if not shutil.which(LOAD[0]):
            raise HpclabError("stress-ng is not installed: the loaded run needs it", "run make setup")
        load = subprocess.Popen(LOAD, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.time()
    try:
        done = subprocess.run([str(paths.repo() / ".venv" / "bin" / "hpclab"), "course", "run", *notebooks],
                              cwd=paths.repo())
    finally:
        if load is not None:
            load.terminate()
            load.wait(timeout=30)
    report = json.loads((course_dir() / "report.json").read_text())
    rows = json.loads((course_dir() / "fidelity.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    return {
        "loaded": loaded,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "exit_code": done.returncode,
        "notebook_seconds": round(sum(n["seconds"] for n in report["notebooks"]), 1),
        # the lessons' notebooks and the labs apart: a lab measures once, then reads what it packed
        "seconds": {n["path"]: round(n["seconds"], 1) for n in report["notebooks"]},
        "failures": sum(1 for n in report["notebooks"] if not n["ok"]),
        "jobs": sum(n.get("jobs", 0) for n in report["notebooks"]),
        "verdicts": {r["id"]: r["reproduced"] for r in rows},
        # a row whose evidence says its runs were taken beside other work (the noise watch)
        "disturbed": {r["id"]: r["why"] for r in rows if "beside other work" in (r.get("here", "") + r.get("why", ""))},
    }


def summarise(runs: list[dict]) -> dict:
    quiet = [r for r in runs if not r["loaded"]]
    claims = sorted({c for r in runs for c in r["verdicts"]})
    stable = {c: len({r["verdicts"].get(c) for r in quiet}) == 1 for c in claims}
    return {"runs": runs, "stable": stable,
            "unloaded_max_seconds": max((r["notebook_seconds"] for r in quiet), default=None),
            "budget_seconds": BUDGET_SECONDS}


def write(result: dict) -> Path:
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    target = BENCH_DIR / f"{NAME}.json"
    if target.exists():  # never overwrite an earlier report
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(target.stat().st_mtime))
        for ext in ("json", "md"):
            old = BENCH_DIR / f"{NAME}.{ext}"
            if old.exists():
                old.rename(BENCH_DIR / f"{NAME}-{stamp}.{ext}")
    target.write_text(json.dumps(result, indent=1) + "\n")
    runs = result["runs"]
    heads = [f"run {i + 1}{' (loaded)' if r['loaded'] else ''}" for i, r in enumerate(runs)]
    rows = [{"claim": c, **{h: r["verdicts"].get(c, "-") for h, r in zip(heads, runs)},
             "same in quiet runs": "yes" if ok else "NO"} for c, ok in result["stable"].items()]
    rows.append({"claim": "notebook seconds", **{h: r["notebook_seconds"] for h, r in zip(heads, runs)},
                 "same in quiet runs": f"max {result['unloaded_max_seconds']} (budget {BUDGET_SECONDS})"})
    for part in ("notebooks/", "labs/"):
        rows.append({"claim": f"  of which {part}", **{h: round(sum(t for p, t in r.get("seconds", {}).items()
                                                               if p.startswith(part)), 1) for h, r in zip(heads, runs)},
                     "same in quiet runs": ""})
    rows.append({"claim": "failures / jobs", **{h: f"{r['failures']} / {r['jobs']}" for h, r in zip(heads, runs)},
                 "same in quiet runs": ""})
    notes = [f"{h}: started {r['started']}" for h, r in zip(heads, runs)]
    notes += [f"{h}: {c} taken beside other work: {why}" for h, r in zip(heads, runs) for c, why in r["disturbed"].items()]
    write_table(NAME, "The fidelity verdicts of the course, run after run on this machine", rows, notes,
                with_json=False)  # the JSON beside it is the runs themselves, written above
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="quiet runs of the course (default 3)")
    ap.add_argument("--no-loaded", action="store_true", help="skip the run beside stress-ng")
    ap.add_argument("notebooks", nargs="*", help="only these notebooks and labs (default: the whole course)")
    args = ap.parse_args(argv)
    try:
        runs = []
        for i in range(args.runs):
            print(f"[bench-stability] quiet run {i + 1} of {args.runs}", flush=True)
            runs.append(run_once(args.notebooks, loaded=False))
        if not args.no_loaded:
            print("[bench-stability] a run beside stress-ng --cpu 1", flush=True)
            runs.append(run_once(args.notebooks, loaded=True))
    except HpclabError as exc:
        print(f"bench-stability: {exc.one_line()}", file=sys.stderr)
        return 1
    result = summarise(runs)
    path = write(result)
    unstable = [c for c, ok in result["stable"].items() if not ok]
    print(f"[bench-stability] {path}: {len(result['stable']) - len(unstable)} of {len(result['stable'])} claims "
          f"gave the same verdict in every quiet run" + (f"; changed: {', '.join(unstable)}" if unstable else "")
          + f"; quiet runs' notebooks took at most {result['unloaded_max_seconds']} s")
    return 0 if not unstable else 2


if __name__ == "__main__":
    sys.exit(main())
