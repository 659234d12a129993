"""The ping-pong code lab (code-pingpong): the timed loop of a ping-pong, written by the student.

It goes with notebook 02 (transports: every latency and bandwidth there is the course's
pingpong kernel's, src/pingpong/pingpong.c, timed as IMB-MPI1 times its PingPong). The student
writes pingpong() in labs/code-pingpong/pingpong_loop.c: untimed warm-up round trips, an
MPI_Barrier, then `reps` round trips between two MPI_Wtime calls, returning half a round trip.
The driver (labs/code-pingpong/main.c) checks the payload that arrived and watches the calls the
loop makes through MPI's profiling interface, so a loop that times the whole round trip, skips
the warm-up or starts the timer before the barrier is named, not just a wrong number.

Graded in three parts: the payload and the loop's shape on the grader's runs under every
installed library (the sandbox); and the student's own runs (`MEASURE`, made in the notebook:
their program and the course's kernel built from the course's own source, run in turn, each
run kept with the SHA-256 of the pingpong_loop.c that built it) agreeing with the kernel within
`BAND` at 0 B and 4 MiB, decided by the course's statistics (hpclab.analysis.stats.stop_rule on
the paired rounds: rounds are added until the ratio's confidence interval decides, at most
MAX_ROUNDS; "agrees" when the interval lies inside the band, "disagrees" when it lies wholly
outside; the point is lost only on "disagrees": on this 2-core VM, busy with other work, the
runs were too noisy to show agreement at 4 MiB in 4 of 4 measurements, and a lab whose
reference solution fails by chance is no lab).
"""

from __future__ import annotations

from hpclab.course.codelab import Build, Check, CodeLab, Outcome, Trial
from hpclab.course.lessons import Lesson, register

LAB = "code-pingpong"
BAND = 0.10                       # "agrees": the ratio's CI inside [1/1.1, 1.1]
SIZES = (0, 4 << 20)              # the sizes compared: 0 B and 4 MiB, IMB's two ends
MAX_ROUNDS = 20                   # rounds of (kernel, student) at most; stats.stop_rule looks from the 9th
# Both programs run the compared sizes alone (the kernel's --sizes), in the same order, with the
# kernel's repetitions and warm-up (the first size's 1000 extra round trips included): the 20
# sizes of the sweep between them cost three quarters of a run and are compared with nothing.
MEASURE = ("--sizes", ",".join(str(size) for size in SIZES), "--json", "{report}")
# The correctness trials: sizes that are no multiple of any type's size (a count in the wrong
# unit shows), one above every installed library's eager limit, few repetitions.
CHECK_SIZES = "0,1,7,1000,4096,65536,1048576"


def _check(trial: Trial, out: Outcome, reference: Outcome | None) -> list[Check]:
    """The payload and the loop's shape, from the driver's report (its first finding per kind,
    with the rank and size it was seen at)."""
    doc = out.report or {}
    rows = doc.get("rows")
    checks = []
    for part, key, what in (("payload", "payload", "the payload"), ("timing", "timing", "the timed loop")):
        name = f"{what}, {trial.name}, under {out.library}"
        if not rows:
            checks.append(Check(part, name, False, "no report", "a report", why="the driver wrote no report"))
            continue
        bad = next((r for r in rows if r.get(key)), None)
        if bad is None:
            checks.append(Check(part, name, True, f"right at all {len(rows)} sizes", "right at every size"))
            continue
        expected = ("each rank's rbuf holds the partner's message, nothing else changed" if part == "payload" else
                    "warm-up, MPI_Barrier, MPI_Wtime, reps round trips, MPI_Wtime; t = (t1 - t0) / (2 x reps)")
        checks.append(Check(part, name, False, f"at {bad['bytes']} B", expected, "exact", bad[key]))
    return checks


def kernel_times(report: dict) -> dict[int, float]:
    """{bytes: t [us]} of a run of the course's pingpong kernel (its JSON report)."""
    from hpclab.kernels import pingpong

    return {int(r["bytes"]): float(r["t_usec"]) for r in pingpong.message_rows(report)}


def student_times(report: dict) -> dict[int, float]:
    """{bytes: t [us]} of a run of the lab's driver (its JSON report)."""
    return {int(r["bytes"]): float(r["t_usec"]) for r in report["rows"]}


KERNEL_SOURCE = "src/pingpong/pingpong.c"


def check_record(runs: dict) -> None:
    """Raises AssertionError (a graded test's failure, in words) unless the record of the
    student's own runs holds paired rounds of the kernel, built from the course's kernel source,
    and of the student's program whose payload and loop were right in every run, all under one
    library, over both compared sizes. (Which pingpong_loop.c built them is
    hpclab.grading.codelab.check_own_runs' to say.)"""
    kinds = {r.get("build") for r in runs.get("runs", [])}
    assert kinds == {"kernel", "student"}, f"the runs are of {sorted(map(str, kinds))}, expected the kernel's and yours"
    for r in runs["runs"]:
        if r["build"] == "kernel":
            assert KERNEL_SOURCE in (r.get("sources") or {}), "a kernel run not built from the course's kernel source"
            sizes = kernel_times(r["report"])
        else:
            rep = r["report"]
            assert rep.get("payload_right") and rep.get("timing_right"), (
                f"in run {r['round'] + 1} your program's payload or loop was wrong: times of a wrong loop do not count")
            sizes = student_times(rep)
        missing = [label(s) for s in SIZES if s not in sizes]
        assert not missing, f"run {r['round'] + 1} ({r['build']}) has no time at {', '.join(missing)}"


def _paired(runs: dict, size: int) -> tuple[list[float], list[float]]:
    mine = {r["round"]: student_times(r["report"])[size] for r in runs["runs"] if r["build"] == "student"}
    kernel = {r["round"]: kernel_times(r["report"])[size] for r in runs["runs"] if r["build"] == "kernel"}
    rounds = sorted(set(mine) & set(kernel))
    return [mine[k] for k in rounds], [kernel[k] for k in rounds]


def stop(runs: dict, size: int):
    """The course's adaptive rule on the student's own runs at `size` bytes: their t against the
    kernel's, paired by round (hpclab.analysis.stats.stop_rule, margin BAND, at most MAX_ROUNDS
    rounds): its Stop record, whose decision is the verdict."""
    from hpclab.analysis import stats

    mine, kernel = _paired(runs, size)
    return stats.stop_rule(mine, kernel, paired=True, max_rounds=MAX_ROUNDS, margin=BAND)


def enough(runs: dict) -> bool:
    """Whether the student's runs so far decide at every compared size (or reached the cap)."""
    return all(stop(runs, size).stop for size in SIZES)


def agreement(runs: dict, size: int):
    """The decision on the student's own runs at `size` bytes (hpclab.analysis.stats.Decision;
    "equivalent": within BAND of the kernel); None before any round."""
    return stop(runs, size).decision


def agrees(runs: dict, size: int) -> bool:
    """The ratio's CI lies inside the band: shown to agree within BAND."""
    d = agreement(runs, size)
    return d is not None and d.outcome == "equivalent"


def verdict(runs: dict, size: int) -> str:
    """"agrees" (the ratio's CI inside the band), "disagrees" (the CI, at full coverage, wholly
    outside it: the student's t shown to differ by more than BAND) or "cannot tell" (anything
    between: the runs are too noisy to say)."""
    d = agreement(runs, size)
    if d is None:
        return "cannot tell"
    if d.outcome == "equivalent":
        return "agrees"
    r = d.ratio
    if r.coverage >= d.level and (r.lo > 1 + BAND or r.hi < 1 / (1 + BAND)):
        return "disagrees"
    return "cannot tell"


def passes(runs: dict, size: int) -> bool:
    """The graded rule: the measurement went to its end (the adaptive rule decided, or its cap)
    and did not show the student's t to differ from the kernel's by more than BAND. Agreement
    shown earns the point; so does a run too noisy to tell, which on a busy 2-core VM is common
    at 4 MiB (runs there took 0.5 ms or 2-3.5 ms a message, by chance, measured 2026-11-28)."""
    return stop(runs, size).stop and verdict(runs, size) != "disagrees"


def label(size: int) -> str:
    return "0 B" if size == 0 else f"{size >> 20} MiB" if size >= 1 << 20 else f"{size} B"


def said(runs: dict, size: int) -> str:
    """The verdict in one sentence: the outcome first, the numbers after."""
    d = agreement(runs, size)
    if d is None:
        return f"At {label(size)}: no paired rounds yet."
    r = d.ratio
    what = {"agrees": f"agrees with the course's kernel within {BAND:.0%}",
            "disagrees": f"differs from the course's kernel by more than {BAND:.0%}",
            "cannot tell": f"cannot be told apart from the course's kernel, nor shown within {BAND:.0%}: the runs "
                           "are too noisy (the point stands; measure on a quiet machine to see agreement)"}[verdict(runs, size)]
    if not stop(runs, size).stop:
        what += f" (after {r.n_a} rounds: measure to the end, the rule needs more)"
    return (f"At {label(size)} your ping-pong {what}: yours / kernel's = {r.estimate:.3f} "
            f"({d.level:.1%} CI {r.lo:.3f} to {r.hi:.3f}, {r.n_a} paired rounds; medians {d.a.median:.3f} and "
            f"{d.b.median:.3f} us).")


CODE = CodeLab(
    lab=LAB,
    files=("pingpong_loop.c",),
    builds=(
        Build("student", student=("pingpong_loop.c",), reference=("labs/code-pingpong/pingpong_loop.c",),
              course=("labs/code-pingpong/main.c",), output="pingpong_lab"),
        # the course's own kernel, from its own source with the kernels' flags: what the
        # student's runs are compared with (MPI_T's transport report only: no Open MPI internals)
        Build("kernel", student=(), reference=(),
              course=("src/pingpong/pingpong.c", "src/pingpong/transport.c", "src/common/args.c",
                      "src/common/json.c", "src/common/report.c", "src/common/placement.c"),
              includes=("src/common", "src/pingpong"), output="pingpong"),
    ),
    trials=(
        Trial("payload", "0 B to 1 MiB, 2 ranks", 2, ("--sizes", CHECK_SIZES, "--reps", "20", "--warmup", "3",
                                                     "--json", "{report}"), also=("timing",)),
        # every size the kernel runs (a power of two up to 4 MiB), few repetitions: under a loaded
        # machine (a room grading in parallel) the kernel's own 1000 took seconds
        Trial("payload", "the kernel's sizes 0 B to 4 MiB, 2 ranks", 2,
              ("--max-bytes", str(4 << 20), "--reps", "5", "--warmup", "2", "--json", "{report}"), also=("timing",),
              everywhere=False),
    ),
    parts={
        "payload": "every message carries the bytes asked for between ranks 0 and 1 and arrives whole, from 0 B "
                   "to 4 MiB, under every installed library (2 points)",
        "timing": "the loop is timed as IMB times it: warm-up, MPI_Barrier, the repetitions between two "
                  "MPI_Wtime calls, half a round trip returned (2 points)",
    },
    check=_check,
    minutes=40,
    hang_seconds=8.0,   # a trial takes 0.2-0.5 s here; a rendezvous on a loaded VM may take 100 times longer
)

LESSON = register(Lesson("pingpong_lab", "A ping-pong of your own, timed as IMB times it", (), lab=LAB,
                         goes_with=("02-transports.ipynb",), code=CODE))
