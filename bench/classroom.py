"""Load benchmark of the classroom (`make bench-classroom`): a room of simulated students through
the real hub, then the instructor grading all of them. Not a timed test: numbers for the
instructor who plans a room on a machine like this one.

1. the instructor releases the lab;
2. every student arrives (spread over --arrive-over seconds, a room logging in), logs in, starts
   their server, fetches the lab, runs its measuring and answer cells in a real kernel (real Slurm
   jobs as that student) and submits (hpclab/classroom/load.py);
3. the instructor collects and autogrades every submission (in the grader's sandbox); each grade
   is compared with the score recomputed from the student's own runs without nbgrader;
4. the servers are stopped and every student starts theirs again at the same moment: the
   all-at-once case of a room told "log in now".

Writes build/classroom/load.json and load.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hpclab.classroom import grading_room, load, record, room
from hpclab.classroom.hub_client import HubClient
from hpclab.classroom.layout import SLURM_ACCOUNT, layout
from hpclab.core.errors import HpclabError

OUT = Path(__file__).resolve().parent.parent / "build" / "classroom"


def passwords(lay) -> dict[str, str]:
    if not lay.passwords.exists():
        raise HpclabError(f"no classroom here ({lay.passwords} does not exist)",
                          "run 'make classroom STUDENTS=30' first (make bench-classroom does)")
    pairs = [line.split() for line in lay.passwords.read_text().splitlines() if line and not line.startswith("#")]
    return {user: pw for user, pw in pairs if user.startswith("student")}


def set_aside_earlier_labs(students: list[str], lab: str) -> list[Path]:
    """Each student's lab folder from an earlier round renamed (lab-<stamp>), so this round fetches
    the lab anew and runs its jobs (a lab folder that holds its runs submits none): a round
    measures a room at work. Nothing is deleted. Returns the folders set aside."""
    from hpclab.classroom import accounts

    moved, stamp = [], time.strftime("%Y%m%d-%H%M%S")
    for user in students:
        folder = accounts.home(user) / "hpclab" / lab
        if folder.is_dir():
            target = folder.with_name(f"{lab}-before-bench-{stamp}")
            folder.rename(target)
            moved.append(target)
    return moved


def stop_every_server(base: str, pw: dict[str, str]) -> None:
    """Every student's server stopped (each asked through the student's own login)."""
    def stop(user):
        client = HubClient(base, user, pw[user])
        client.login()
        client.stop_server()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(stop, sorted(pw)))


def at_once(base: str, pw: dict[str, str], prestart_over: float | None, lay) -> dict:
    """Every server stopped, then (prestart_over: the instructor's prestart first, over that many
    seconds) every student logs in at the same moment and opens a kernel; the figures of that round."""
    stop_every_server(base, pw)
    prestarted_s = None
    if prestart_over is not None:
        t = time.monotonic()
        report = room.prestart(prestart_over, lay, students=sorted(pw))
        prestarted_s = round(time.monotonic() - t, 1)
        say(report.head)
    t0 = time.monotonic()
    runs = load.all_log_in_at_once(base, pw)
    kernels = [r.kernel_s for r in runs if r.kernel_s is not None]
    say(f"all at once{' after the prestart' if prestart_over is not None else ', cold'}: {len(kernels)} of "
        f"{len(runs)} kernels answered in {time.monotonic() - t0:.1f} s")
    return {"prestart_over_s": prestart_over, "prestart_took_s": prestarted_s,
            "failed": sum(r.kernel_s is None for r in runs),
            "kernel_p50_s": round(statistics.median(kernels), 2) if kernels else None,
            "kernel_p95_s": load.percentile(kernels, 95), "runs": [vars(r) for r in runs]}


def say(text: str) -> None:
    """A progress line, at once (make's output is a pipe: print alone would hold it to the end)."""
    print(f"[bench-classroom] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--arrive-over", type=float, default=60.0, help="seconds over which students arrive")
    parser.add_argument("--lab", default="lab-transports")
    parser.add_argument("--prestart-over", type=float, default=None, metavar="S",
                        help="the instructor prestarts every server over S seconds before the students arrive "
                             "(hpclab classroom prestart); the all-at-once round after it uses S too (default: "
                             "the students arrive to no running server; the prestarted round uses 120 s)")
    args = parser.parse_args(argv)

    lay = layout()
    pw = dict(sorted(passwords(lay).items())[:args.students])
    if len(pw) < args.students:
        raise SystemExit(f"the classroom has {len(pw)} students; run 'make classroom STUDENTS={args.students}' first")
    # The benchmark talks to the hub on this machine; a TLS hub is reached the same way on its port.
    base = "http://" + record.load(lay.record).settings.get("bind", "127.0.0.1:8000")
    # The lab's source (solutions, hidden tests) is the instructors': the course folder's copy.
    source_path = lay.nbgrader_course / "source" / args.lab / f"{args.lab}.ipynb"
    source_nb = load.nbformat.read(source_path, as_version=4)
    since = time.strftime("%Y-%m-%dT%H:%M:%S")

    say(f"releasing {args.lab} to the room's exchange")
    grading_room.release(lay, args.lab)
    aside = set_aside_earlier_labs(sorted(pw), args.lab)
    if aside:
        say(f"{len(aside)} lab folders of an earlier round set aside (e.g. {aside[0]}): every student fetches anew")
    prestart_took = None
    if args.prestart_over is not None:
        stop_every_server(base, pw)
        t = time.monotonic()
        say(room.prestart(args.prestart_over, lay, students=sorted(pw)).head)
        prestart_took = round(time.monotonic() - t, 1)
    with load.MemoryWatch() as memory:
        t0 = time.monotonic()
        say(f"{len(pw)} students arriving over {args.arrive_over:g} s: log in, start a server, run the lab, submit")
        finished = []

        def done(r) -> None:
            finished.append(r)
            say(f"{len(finished)}/{len(pw)} {r.user}: login {r.login_s} s, spawn {r.spawn_s} s, lab {r.lab_s} s, "
                f"submitted {r.submitted}{', ' + r.error if r.error else ''} ({time.monotonic() - t0:.0f} s)")

        runs = load.simulate_room(base, pw, args.lab, source_nb, args.arrive_over, on_done=done)
        room_s = time.monotonic() - t0
        say(f"collecting and autograding {sum(r.submitted for r in runs)} submissions (one sandbox per core)")
        graded = grading_room.collect_and_autograde(lay, args.lab)
        say(f"autograded {len(graded.graded)} in {graded.autograde_s:.1f} s; now every student logs in at once")
        # this round's students only (the gradebook may hold earlier rounds)
        grades = {user: graded.scores[user][0] for user in graded.graded if user in pw}
        cold = at_once(base, pw, None, lay)
        warm = at_once(base, pw, args.prestart_over if args.prestart_over is not None else 120.0, lay)

    recomputed = {}
    for user in grades:
        recomputed[user] = load.recompute_score(source_path, lay.nbgrader_course / "submitted" / user / args.lab)[0]
    spawns = [r.spawn_s for r in runs if r.spawn_s is not None]
    waits = load.job_waits(since, SLURM_ACCOUNT)
    report = load.LoadReport(
        students=len(runs), arrive_over_s=args.arrive_over,
        failed_spawns=sum(r.spawn_s is None for r in runs),
        spawn_p50_s=round(statistics.median(spawns), 2) if spawns else None, spawn_p95_s=load.percentile(spawns, 95),
        labs_completed=sum(r.submitted for r in runs),
        job_wait_p95_s=load.percentile(waits, 95),
        autograded=len(grades), autograde_s_per_submission=round(graded.s_per_submission, 2) if grades else None,
        grades_match=bool(grades) and len(grades) == len(runs) and all(grades[u] == recomputed[u] for u in grades),
        peak_memory_gb=round(memory.peak_used / 2**30, 2), swap_used_gb=round(memory.peak_swap / 2**30, 3),
        oom_kills=memory.oom_kills, runs=[vars(r) for r in runs],
        grades={u: {"autograded": grades[u], "recomputed": recomputed[u]} for u in grades})
    kernels = [r.kernel_s for r in runs if r.kernel_s is not None]
    extra = {"room_seconds": round(room_s, 1), "jobs": len(waits),
             "collect_s": round(graded.collect_s, 1), "autograde_s": round(graded.autograde_s, 1),
             "prestart_over_s": args.prestart_over, "prestart_took_s": prestart_took,
             "kernel_p50_s": round(statistics.median(kernels), 2) if kernels else None,
             "kernel_p95_s": load.percentile(kernels, 95),
             "all_at_once": cold, "all_at_once_prestarted": warm}
    OUT.mkdir(parents=True, exist_ok=True)
    data = {**json.loads(report.to_json()), **extra}
    # one report per arrival pattern and prestart; an earlier one of the same kind is kept, renamed
    name = f"load-{'prestart' if args.prestart_over is not None else 'cold'}"
    for suffix, text in ((".json", json.dumps(data, indent=1) + "\n"), (".md", render_table(data))):
        out = OUT / (name + suffix)
        if out.exists():
            out.rename(out.with_name(f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(out.stat().st_mtime))}{suffix}"))
        out.write_text(text)
    print((OUT / f"{name}.md").read_text())
    return 0


def render_table(d: dict) -> str:
    met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    cold, warm = d["all_at_once"], d["all_at_once_prestarted"]
    prestarted = d.get("prestart_over_s") is not None
    arrival = (f"arriving over {d['arrive_over_s']:g} s" +
               (f", servers prestarted over {d['prestart_over_s']:g} s ({d['prestart_took_s']} s until all ran)"
                if prestarted else ", no server running before"))
    p95 = lambda v, goal: v is not None and v <= goal  # noqa: E731
    rows = [
        ("students", d["students"], arrival, ""),
        ("failed spawns", d["failed_spawns"], "goal 0", met(d["failed_spawns"] == 0)),
        ("spawn p50 / p95 (s)", f"{d['spawn_p50_s']} / {d['spawn_p95_s']}", "", ""),
        ("login to a kernel answering in the lab, p50 / p95 (s)", f"{d['kernel_p50_s']} / {d['kernel_p95_s']}",
         "goal p95 <= 10 s", met(p95(d["kernel_p95_s"], 10))),
        ("all at once, cold: failed, login to kernel p50 / p95 (s)",
         f"{cold['failed']}, {cold['kernel_p50_s']} / {cold['kernel_p95_s']}", "(no goal: a cold room)", ""),
        (f"all at once, prestarted over {warm['prestart_over_s']:g} s: failed, login to kernel p50 / p95 (s)",
         f"{warm['failed']}, {warm['kernel_p50_s']} / {warm['kernel_p95_s']}", "goal p95 <= 20 s",
         met(warm["failed"] == 0 and p95(warm["kernel_p95_s"], 20))),
        ("labs completed", d["labs_completed"], f"goal {d['students']}", met(d["labs_completed"] == d["students"])),
        ("Slurm jobs, queue wait p95 (s)", f"{d['jobs']}, {d['job_wait_p95_s']}", "", ""),
        ("autograded, s per submission", f"{d['autograded']}, {d['autograde_s_per_submission']}", "goal <= 15 s",
         met(d["autograde_s_per_submission"] is not None and d["autograde_s_per_submission"] <= 15)),
        ("autograde of the room, wall time (s)", d["autograde_s"], "goal <= 45 s for 30 on 2 cores",
         met(d["autograde_s"] <= 45 * max(1, d["students"]) / 30)),
        ("grades match recomputed", d["grades_match"], "goal true", met(d["grades_match"])),
        ("peak memory (GB), swap (GB), OOM kills", f"{d['peak_memory_gb']}, {d['swap_used_gb']}, {d['oom_kills']}",
         "goal: no swap, no OOM", met(d["swap_used_gb"] <= 0.01 and d["oom_kills"] == 0)),
    ]
    lines = ["# Classroom load (make bench-classroom)", "",
             f"One run on this machine, {time.strftime('%Y-%m-%d')}; the room took {d['room_seconds']} s.", "",
             "| measure | value | goal | |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {e} |" for a, b, c, e in rows]
    lines += ["", "Login to a kernel: from the student's login page to the first answer of a new kernel "
              "(in the lab: the fetched lab's folder), as a student who opens a notebook meets it.",
              "", "| student | arrived (s) | login (s) | spawn (s) | login to kernel (s) | lab (s) | |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['user']} | {r['arrived_s']} | {r['login_s']} | {r['spawn_s']} | {r.get('kernel_s')} | "
              f"{r['lab_s']} | {r['error'][:80]} |" for r in d.get("runs", [])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HpclabError as e:
        print(f"bench-classroom: {e}", file=sys.stderr)
        sys.exit(2)
