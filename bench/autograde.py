"""Autograde time of a class of lab-transports submissions (issue 40): `python bench/autograde.py`.

The room's bench (bench/classroom.py) measures autograde once, inside a whole room of 30 with its
hub and its students' jobs; this one measures only the grading, several times, so that a change
to the grading path can be judged by its numbers. A class of --students full solutions of
lab-transports, each with the demo class's three real pingpong runs packed (hpclab.grading.demo:
made on the local cluster when missing), goes through release, zip collect and autograde (each
notebook in its own sandbox, --jobs at once); every student must get full marks.

Each repetition grades a fresh course. Reported: wall time of autograde, its CPU seconds (every
process it started, as the kernel counts them for waited-for children), both per submission,
min / median / max over --runs. CPU is the whole machine's busy time
over the autograde (/proc/stat): run it on an otherwise idle machine. Writes build/bench/autograde-lab-transports.{md,json}.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nbformat  # noqa: E402

from common import summary, write_table  # noqa: E402
from hpclab.grading import demo, labdata, pipeline  # noqa: E402

LAB = "lab-transports"


def _machine_busy() -> float:
    """CPU-seconds the whole machine has spent busy since boot (/proc/stat: user, nice, system,
    irq and softirq; not idle, iowait or the hypervisor's steal): what autograde costs,
    sandboxed processes reaped by others included, when nothing else runs."""
    user, nice, system, _idle, _iowait, irq, softirq = (
        int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def grade_once(work: Path, runs: dict[str, Path], students: int, jobs: int | None) -> dict:
    """One class through release, collect and autograde in a new course under `work`: the
    autograde's wall and CPU seconds and the students who missed full marks."""
    course = pipeline.init_course(work / "course", [LAB])
    pipeline.release(course, LAB)
    src = nbformat.read(course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
    rel = nbformat.read(course / "release" / LAB / f"{LAB}.ipynb", as_version=4)
    solution = demo.answered(rel, src)
    folder = work / "submission"
    folder.mkdir()
    nbformat.write(solution, folder / f"{LAB}.ipynb")
    labdata.pack(runs, folder)
    downloads = work / "downloads"
    downloads.mkdir()
    names = [f"student{i + 1:02d}" for i in range(students)]
    for name in names:
        with zipfile.ZipFile(downloads / f"{name}.zip", "w") as z:
            for p in sorted(folder.rglob("*")):
                if p.is_file():
                    z.write(p, p.relative_to(folder))
    pipeline.collect(course, LAB, downloads)
    cpu0, t0 = _machine_busy(), time.monotonic()
    pipeline.autograde(course, LAB, jobs=jobs)
    wall, cpu = time.monotonic() - t0, _machine_busy() - cpu0
    scores = pipeline.cell_scores(course, LAB)
    short = [n for n in names if not scores.get(n)
             or sum(v[0] for v in scores[n].values()) < sum(v[1] for v in scores[n].values())]
    return {"wall": wall, "cpu": cpu, "short": short}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: one per core)")
    p.add_argument("--runs", type=int, default=3, help="repetitions, each a fresh course")
    p.add_argument("--label", default="", help="a name for this tree's variant, in the table")
    a = p.parse_args(argv)
    runs = demo.demo_runs()
    results = []
    for i in range(a.runs):
        work = Path(tempfile.mkdtemp(prefix="hpclab-bench-autograde-"))
        try:
            r = grade_once(work, runs, a.students, a.jobs)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"run {i + 1}: {a.students} submissions autograded in {r['wall']:.1f} s "
              f"({r['wall'] / a.students:.2f} s and {r['cpu'] / a.students:.2f} CPU-s each); "
              f"{len(r['short'])} without full marks {r['short'][:5]}", flush=True)
        results.append(r)
    wall = summary([r["wall"] for r in results])
    cpu = summary([r["cpu"] / a.students for r in results])
    goal = 45 * a.students / 30
    rows = [{"variant": a.label or "this tree", "students": a.students, "jobs": a.jobs or os.cpu_count(),
             "runs": a.runs, "wall s min": wall["min"], "wall s median": wall["median"], "wall s max": wall["max"],
             "CPU-s per submission median": cpu["median"], "goal s": goal,
             "met (median)": "yes" if wall["median"] <= goal else "no",
             "not full marks": sum(len(r["short"]) for r in results)}]
    path = write_table(f"autograde-{LAB}", f"Autograde of {a.students} full {LAB} submissions on "
                       f"{os.cpu_count()} cores ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", rows,
                       notes=["goal: 45 s for a room of 30 on 2 cores (issue 40), scaled to --students",
                              "CPU-s: the machine's busy time during autograde (/proc/stat), per submission"])
    print(f"wall median {wall['median']:.1f} s (min {wall['min']:.1f}, max {wall['max']:.1f}), goal {goal:.0f} s; "
          f"{cpu['median']:.2f} CPU-s per submission; table: {path}")
    return 1 if any(r["short"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
