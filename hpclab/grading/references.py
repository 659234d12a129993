"""The reference answers hidden tests compare with: each lab's expected values recomputed from
the runs a student packed (only runs that pass `labdata.verify`), with hpclab's own analysis.

`reference(lab, lab_dir)` runs the analysis in a fresh Python process
(`python -I -m hpclab.grading.references LAB LAB_DIR`, which prints the answers as JSON), so
nothing a notebook patched in its own process changes them. `accepted` gives the options an
interpretation question accepts on a student's own numbers. The labs' test cells call both
(`from hpclab.grading import references`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.grading import labdata

# The analysis modules (numpy, pandas) are imported inside the functions that use them: a lab's
# test cell and the grader's check import this module, and only the fresh process computes.


def _reference_transports(lab_dir: Path) -> dict:
    from hpclab.analysis import fits   # numpy: costly, see above

    labdata.verify(lab_dir)
    out: dict = {"latency_us": {}, "bandwidth_mb_s": {}, "label": {}}
    for role in ("shm", "tcp", "unlabelled"):
        table = labdata.table(role, lab_dir)
        fit = fits.hockney_fit(table["bytes"], table["t_usec"])
        out["latency_us"][role] = fit.latency_us
        out["bandwidth_mb_s"][role] = fit.bandwidth_mb_s
        out["label"][role] = str(table["transport"].iloc[0])
    out["n_half_tcp"] = fits.hockney_fit(*_cols(labdata.table("tcp", lab_dir))).half_bandwidth_bytes
    # the unlabelled run's transport as Open MPI reported it, named by the run that shares it;
    # the other one is accepted too when the timings cannot tell them apart (the unlabelled fit's
    # latency is, on a log scale, no nearer to its own transport's than to the other's)
    import math

    same = [r for r in ("shm", "tcp") if out["label"][r] == out["label"]["unlabelled"]]
    out["unlabelled_transport"] = same[:1] if len(same) == 1 else []
    if len(same) == 1:
        other = "tcp" if same[0] == "shm" else "shm"
        far = {r: abs(math.log(out["latency_us"]["unlabelled"] / out["latency_us"][r])) for r in ("shm", "tcp")}
        if far[other] <= far[same[0]]:
            out["unlabelled_transport"].append(other)
    # interpretation: the transport the fitted models make faster for 1 MiB messages; the
    # spread of each prediction is the fit's typical error (median |relative residual|)
    import numpy as np   # costly, see above

    t, spread = {}, {}
    for role in ("shm", "tcp"):
        fit = fits.hockney_fit(*_cols(labdata.table(role, lab_dir)))
        t[role] = float(fit.predict(LARGE_MESSAGE))
        spread[role] = float(np.median(np.abs(fit.relative_residuals))) * t[role]
    out["large_message_us"] = t
    out["large_message_transport"] = accepted(t, spread, best=min)
    return out


def _cols(table):
    return table["bytes"], table["t_usec"]


# --- interpretation questions: the options a student's own numbers support ---------------------

LARGE_MESSAGE = 1 << 20          # bytes: lab-transports' "large message" (1 MiB)


def accepted(values: dict, spread: dict, best=max) -> list[str]:
    """The options an interpretation question accepts: the best one by `values` (max or min),
    and every other option whose value is within the two options' spreads of it (too close to
    call on these runs). values, spread: option -> number (spread >= 0, same unit). Returns the
    accepted options, the best first."""
    top = best(values, key=values.get)
    return [top] + [o for o in values if o != top
                    and abs(values[o] - values[top]) <= spread.get(o, 0.0) + spread.get(top, 0.0)]


def _reference_scaling(lab_dir: Path) -> dict:
    import pandas as pd   # costly, see above

    # numpy: costly, see above
    from hpclab.analysis import fits

    labdata.verify(lab_dir)
    rows = []
    for role in ("np1", "np2"):
        table = labdata.table(role, lab_dir)
        rows.append({"ranks": table["rank"].nunique(), "seconds": table.attrs["summary"]["wall_time"]})
    scaling = fits.scaling_table(pd.DataFrame(rows))
    two = labdata.table("np2", lab_dir)
    mpi = two[two["kind"] == "mpi"]
    one = labdata.table("np1", lab_dir)
    # interpretation: where did the second rank's seconds go? Rank-seconds the two-rank run spent
    # beyond the one-rank run, in compute and in MPI; the noise of the run's timers is the
    # difference between the red and the black half-sweep (the same work), summed over ranks
    # and both runs
    extra = {kind: float(two.loc[two["kind"] == kind, "seconds"].sum()
                         - one.loc[one["kind"] == kind, "seconds"].sum()) for kind in ("compute", "mpi")}
    noise = 0.0
    for table in (one, two):
        sweeps = table[table["phase"].isin(["red", "black"])].pivot_table(
            index="rank", columns="phase", values="seconds", aggfunc="sum").reindex(
            columns=["red", "black"], fill_value=0.0)
        noise += float((sweeps["red"] - sweeps["black"]).abs().sum())
    extra_named = {"compute": extra["compute"], "MPI": extra["mpi"]}
    return {"speedup": float(scaling["speedup"].iloc[-1]),
            "efficiency": float(scaling["efficiency"].iloc[-1]),
            "mpi_fraction": float(mpi["seconds"].sum()
                                  / two.groupby("rank")["rank_total"].first().sum()),
            "dominant_mpi_phase": str(mpi.groupby("phase")["seconds"].sum().idxmax()),
            "extra_seconds": extra_named, "timer_noise": noise,
            "look_first": accepted(extra_named, {"compute": noise / 2, "MPI": noise / 2})}


def _reference_imbalance(lab_dir: Path) -> dict:
    from hpclab.analysis import imbalance   # pandas: costly, see above
    from hpclab.trace import load, mapping, split

    labdata.verify(lab_dir)
    # notebook 05's five parts: the model is fitted to the student's own ping-pong
    rows = labdata.table("pingpong", lab_dir)[["bytes", "t_usec"]].to_dict("records")
    parts = split.split(load.load_run(labdata.run_dir("traced", lab_dir), cache=False),
                        model=imbalance.pingpong_model(rows))
    counts = {name: mapping.internode_messages(8, 8, fn(8, 8, 4))
              for name, fn in (("linear", mapping.linear_mapping),
                               ("blocked", mapping.blocked_mapping))}
    best = min(counts, key=counts.get)
    # interpretation: the largest part after compute; the split cannot place the time the ranks
    # were switched out while computing (T_off_cpu), so parts closer than that are both accepted
    sizes = {"load imbalance": parts.T_load, "dependency": parts.T_depend, "transfer": parts.T_transfer,
             "rest": parts.T_rest}
    noise = float(parts.T_off_cpu) if parts.T_off_cpu > 0 else 0.0   # NaN or none: 0
    return {"T_load": parts.T_load * 1e-9, "T_depend": parts.T_depend * 1e-9,
            "T_transfer": parts.T_transfer * 1e-9, "T_rest": parts.T_rest * 1e-9,
            "ideal_speedup": parts.T_real / parts.T_ideal,
            "best_mapping": best, "best_internode": counts[best],
            "off_cpu": noise * 1e-9,
            "largest_part": accepted(sizes, {k: noise / 2 for k in sizes})}


PLACEMENT_ROLES = {"pitfall": ("pitfall-1", "pitfall-2"), "fix": ("fix-1", "fix-2")}
# part 1's placements, each run RUNS = 3 times (the lab's place() packs role, role-2, role-3)
PLACEMENT_AGAIN = {role: (role, f"{role}-2", f"{role}-3") for role in ("distinct", "unbound")}


def _reference_placement(lab_dir: Path) -> dict:
    from hpclab.analysis import placement   # pandas: costly, see above

    # each section of the lab packs its own runs: answers whose runs are not packed are left
    # out (their tests fail), the others are graded
    packed = labdata.verify(lab_dir)
    out: dict = {"binding": {}, "launcher": {}, "allowed": {}}
    for role in ("distinct", "unbound"):
        if role not in packed:
            continue
        run = labdata.runs([role], lab_dir)[0]
        spec = run.folder.spec()
        out["binding"][role] = {k: v for k, v in (spec.get("binding") or {}).items()
                                if v is not None and k != "report_bindings"}
        out["launcher"][role] = spec.get("launcher") or "srun"
        # rank -> allowed CPUs, as the kernel reported them (JSON keys are strings)
        out["allowed"][role] = {str(p["rank"]): sorted(p["allowed"]) for p in run.result()["placement"]}
    if {"distinct", "unbound"} <= set(packed):
        # interpretation: did binding pay off? The whole-job Triad rate of every packed run of
        # each placement, compared by the course's phrase module: a winner only with >= 3 runs per
        # side whose ranges do not overlap, else a tie (the difference is inside the spread)
        from hpclab.analysis import phrases
        from hpclab.kernels import stream

        rates = {}
        for option, role in (("bound", "distinct"), ("unbound", "unbound")):
            roles = [r for r in PLACEMENT_AGAIN[role] if r in packed]
            rates[option] = [stream.best_rate(run.result(), "Triad")
                             for run in labdata.runs(roles, lab_dir)]
        cmp = phrases.compare(rates["bound"], rates["unbound"], a_name="bound", b_name="unbound",
                              quantity="whole-job Triad bandwidth", unit="MB/s", lower_is_better=False)
        out["triad_mb_s"] = rates
        out["faster_placement"] = [cmp.winner or "tie"]
        out["faster_sentence"] = cmp.sentence()
    pitfall_roles = [r for case in PLACEMENT_ROLES.values() for r in case]
    if not set(pitfall_roles) <= set(packed):
        return out
    runs = labdata.runs(pitfall_roles, lab_dir)
    table = placement.summary(placement.job_rates(runs))
    bad, good = placement.PITFALL, placement.FIX
    out["job_mb_s"] = {"pitfall": float(table.loc[bad, "job_mb_s_median"]),
                       "fix": float(table.loc[good, "job_mb_s_median"])}
    out["shared_cpu"] = {"pitfall": bool(table.loc[bad, "shared_cpu"]),
                         "fix": bool(table.loc[good, "shared_cpu"])}
    out["lost"] = float(placement.lost_fraction(table, bad, good))
    return out


def _reference_pop(lab_dir: Path) -> dict:
    from hpclab.trace import load, pop, split   # pandas: costly, see above

    labdata.verify(lab_dir)
    splits = {}
    for role in ("np1", "np2"):
        trace = load.load_run(labdata.run_dir(role, lab_dir), cache=False)
        splits[trace.nranks] = split.split(trace)
    table = pop.pop_table(splits)
    two = max(table.columns)
    col = table[two]
    factors = {name: float(col[name]) for name in ("load balance", "serialisation", "transfer",
                                                    "computation scalability")}
    # interpretation: the lowest leaf factor; factors are shares of run time, and the split cannot
    # place the time a rank was switched out while computing, so factors closer to the lowest than
    # that share of T_real (the larger of the two runs') are accepted too
    noise = max(float(s.T_off_cpu) / s.T_real if s.T_real and s.T_off_cpu > 0 else 0.0 for s in splits.values())
    return {"load_balance": float(col["load balance"]), "serialisation": float(col["serialisation"]),
            "transfer": float(col["transfer"]), "parallel_efficiency": float(col["parallel efficiency"]),
            "computation_scalability": float(col["computation scalability"]),
            "global_efficiency": float(col["global efficiency"]), "factors": factors, "noise": noise,
            "look_first": accepted(factors, {k: noise / 2 for k in factors}, best=min)}


REFERENCES = {"lab-transports": _reference_transports, "lab-scaling": _reference_scaling,
              "lab-imbalance": _reference_imbalance, "lab-placement": _reference_placement,
              "lab-pop": _reference_pop}


def reference(lab: str, lab_dir: str | Path = ".") -> dict:
    """Expected answers of a lab, recomputed from its packed runs by hpclab's analysis in a fresh
    Python process. Returns a dict (keys per lab; times in us, rates in MB/s, sizes in bytes).
    Raises HpclabError (AssertionError-free) when the data are missing or not a real run's."""
    if lab not in REFERENCES:
        raise HpclabError(f"no reference analysis for {lab!r}", f"labs: {', '.join(REFERENCES)}")
    key = (lab, str(Path(lab_dir).resolve()))
    if REFERENCE_CACHE is not None and key in REFERENCE_CACHE:
        return json.loads(REFERENCE_CACHE[key])
    proc = commands.run([sys.executable, "-I", "-m", "hpclab.grading.references", lab, str(Path(lab_dir).resolve())],
                        f"run the reference analysis of {lab}", timeout=300,
                        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})
    if proc is None or proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["no output"])[-1] if proc else "no answer within 300 s"
        raise HpclabError(f"reference analysis of {lab} failed: {msg}",
                          "the packed run data must be complete and unmodified")
    if REFERENCE_CACHE is not None:
        REFERENCE_CACHE[key] = proc.stdout
    return json.loads(proc.stdout)


# The grader's check of a submission (hpclab.grading.answers) sets this to {}: one analysis per lab folder
REFERENCE_CACHE: dict | None = None


def main(argv: list[str] | None = None) -> int:
    """`python -I -m hpclab.grading.references LAB LAB_DIR`: print the lab's expected answers as
    JSON (what `reference` reads). Errors print one line and exit 2."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m hpclab.grading.references LAB LAB_DIR", file=sys.stderr)
        return 2
    lab, lab_dir = argv
    try:
        if lab not in REFERENCES:
            raise HpclabError(f"no reference analysis for {lab!r}", f"labs: {', '.join(REFERENCES)}")
        print(json.dumps(REFERENCES[lab](Path(lab_dir))))
    except HpclabError as exc:
        print(f"ERROR: {exc.one_line()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
