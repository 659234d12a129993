"""The scaling lesson (notebook 04, lab-scaling): the Poisson runs of a strong-scaling study that fit
this machine, and the STREAM run that measures the roofline's memory term.

The runs' analysis is hpclab.analysis.scaling (speedup, efficiency, subdomains against the caches).
"""

from __future__ import annotations

from hpclab.analysis import roofline, scaling
from hpclab.course import lesson_placement
from hpclab.spec import model as spec


def specs(configs: list[dict], n: int, iters: int, repetitions: int = 3, experiment: str = "scaling") -> list:
    """Poisson specs, one per config dict with keys ntasks, grid ('PxQ' or None), exchange, label."""
    out = []
    for c in configs:
        args = {"n": n, "iters": iters, "exchange": c.get("exchange", "sendrecv")}
        if c.get("grid"):
            args["grid"] = c["grid"]
        if c.get("fuse"):
            args["fuse"] = True
        label = c.get("label") or f"{c['ntasks']} rank(s) {c.get('grid') or 'auto'} {args['exchange']}"
        out.append(spec.make_spec(kernel="poisson", ntasks=c["ntasks"], args=args, label=label,
                                  binding={"cpu_bind": "cores"} if c["ntasks"] <= c.get("cores", 10**9) else {},
                                  repetitions=repetitions, experiment=experiment))
    return out


def configs_from_plan(plan, partition_cores: int | None = None, exchange: str = "sendrecv") -> list[dict]:
    """configs_for the rank counts of hpclab.course.sizing.plan (scaling_ranks: 1, then powers of
    two up to the node's cores), kept to those the partition's nodes hold (partition_cores)."""
    ranks = [r for r in plan.scaling_ranks if partition_cores is None or r <= partition_cores] or [1]
    return configs_for(max(ranks), exchange, ranks=ranks)


def configs_for(cores: int, exchange: str = "sendrecv", ranks: list[int] | None = None) -> list[dict]:
    """The strong-scaling configurations that fit on `cores` cores without oversubscribing:
    1 rank, then every power of two up to `cores` (or the counts in `ranks`), each as both 1D
    grids (Px1, 1xP) and, from 4 ranks on, the squarest 2D grid."""
    out = [{"ntasks": 1, "grid": "1x1", "exchange": exchange, "family": "1 rank"}]
    counts = sorted(r for r in (ranks or []) if 1 < r <= cores)
    if ranks is None:
        q = 2
        while q <= cores:
            counts.append(q)
            q *= 2
    for p in counts:
        out.append({"ntasks": p, "grid": f"{p}x1", "exchange": exchange, "family": "1D Px1"})
        out.append({"ntasks": p, "grid": f"1x{p}", "exchange": exchange, "family": "1D 1xP"})
        if p >= 4:
            a = int(p ** 0.5)
            while p % a:
                a -= 1
            out.append({"ntasks": p, "grid": f"{p // a}x{a}", "exchange": exchange, "family": "2D"})
    for c in out:
        c["label"] = f"{c['ntasks']} rank(s), grid {c['grid']}"
    return out


def triad_specs(size: int, repetitions: int, experiment: str = "roofline", cores: int | None = None,
                reps: int = 10) -> list:
    """STREAM specs measuring one bound rank's bandwidth (the roofline's memory term; read it
    with roofline.memory_roof). size: doubles per array, roofline.stream_elements(LLC) so each
    array is at least 4x the last-level cache. cores: the node's cores; when given, the job takes
    the whole node (roofline.alone_on_the_node) so no other job shares its memory bus. reps: timed
    repetitions inside each run (STREAM's 10 by default; fewer keep arrays of gigabytes short)."""
    fields = roofline.alone_on_the_node(cores) if cores else {"binding": {"cpu_bind": "cores"}, "omp": {"num_threads": 1}}
    case = lesson_placement.Case("1 rank, arrays >= 4x the last-level cache", fields,
                          "one core streaming arrays far larger than the caches", ntasks=1)
    return lesson_placement.specs([case], size=size, reps=reps, repetitions=repetitions, experiment=experiment)


def look_first_quiz(rows, label: str) -> dict:
    """The self-check 'where would you look first?' built from the learner's runs of `label`
    (hpclab.analysis.scaling.run_rows): the answer follows from them. When p x T[p] is within the
    spread of T[1], nothing measurable was lost; otherwise the kind (compute or MPI) that took
    more extra rank-seconds than the single rank. Returns the keyword arguments of quiz.ask."""
    lost = scaling.time_lost(rows, label)
    p, total = lost["ranks"], lost["total"]
    options = ["communication and waiting (MPI time)", "the computation (compute time)",
               "neither: the rank-seconds are within the spread of the single-rank runs"]
    if not total.beyond_spread or total.a.median < total.b.median:
        answer = options[2]
    else:
        answer = options[0] if lost["mpi"] > lost["compute"] else options[1]
    why = (f"{total.sentence()} Beyond the single rank's medians, the {p} ranks together spent "
           f"{lost['compute']:+.3g} s in compute and {lost['mpi']:+.3g} s in MPI calls. "
           "A loss counts only when p x T[p] lies above T[1] beyond the spread; then the kind with more extra "
           "seconds is the first place to look (MPI time: transfers, or waiting caused by imbalance and "
           "dependencies, notebook 05).")
    return {"question": (f"Your runs of {label}: p x T[p] against T[1] as below. To shorten these runs, where "
                         "would you look first?"),
            "options": options, "answer": answer, "why": why}


def roof_quiz(judged: dict) -> dict:
    """The self-check on the memory roof, from hpclab.analysis.roofline.against_roof of the
    learner's runs: how much could a better loop still gain without moving fewer bytes? Returns
    the keyword arguments of quiz.ask."""
    share, at_roof = judged["share"], judged["at_roof"]
    room = f"up to {1 / share - 1:.0%}: the rest of the way to the roof" if share < 1 else "up to 0 %"
    options = [room, "nothing measurable: it runs at its roof within the noise; only fewer bytes per update help",
               f"{64 / 48 - 1:.0%}, whatever the solver reaches now (64/48 - 1)"]
    above = at_roof.beyond_spread and at_roof.a.median > at_roof.b.median
    if above:
        options.append("the question does not apply: the runs lie above the roof, which is not their cap")
        answer = options[3]
    elif not at_roof.beyond_spread:
        answer = options[1]
    else:
        answer = options[0]
    why = (f"{judged['text']} At the roof, time = bytes / bandwidth, so only fewer bytes (fusing passes, notebook "
           "06) or more bandwidth help; below it, the loop itself has room. 64/48 - 1 is what fusing can gain at "
           "most, and only for a solver at its roof.")
    return {"question": (f"Your solver ran at {share:.0%} of its memory roof (bandwidth / 64 B, "
                         f"n = {judged['n']}). Without moving fewer bytes, how much could a better loop raise its "
                         "rate?"),
            "options": options, "answer": answer, "why": why}
