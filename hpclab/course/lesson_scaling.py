"""The scaling lesson (notebook 04, lab-scaling): the Poisson runs of a strong-scaling study that fit
this machine, and the STREAM run that measures the roofline's memory term.

The runs' analysis is hpclab.analysis.scaling (speedup, efficiency, subdomains against the caches).
"""

from __future__ import annotations

from hpclab.analysis import roofline
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


def configs_for(cores: int, exchange: str = "sendrecv") -> list[dict]:
    """The strong-scaling configurations that fit on `cores` cores without oversubscribing:
    1 rank, then every power of two up to `cores`, each as both 1D grids (Px1, 1xP) and, from
    4 ranks on, the squarest 2D grid."""
    out = [{"ntasks": 1, "grid": "1x1", "exchange": exchange, "family": "1 rank"}]
    p = 2
    while p <= cores:
        out.append({"ntasks": p, "grid": f"{p}x1", "exchange": exchange, "family": "1D Px1"})
        out.append({"ntasks": p, "grid": f"1x{p}", "exchange": exchange, "family": "1D 1xP"})
        if p >= 4:
            a = int(p ** 0.5)
            while p % a:
                a -= 1
            out.append({"ntasks": p, "grid": f"{p // a}x{a}", "exchange": exchange, "family": "2D"})
        p *= 2
    for c in out:
        c["label"] = f"{c['ntasks']} rank(s), grid {c['grid']}"
    return out


def triad_specs(size: int, repetitions: int, experiment: str = "roofline", cores: int | None = None) -> list:
    """STREAM specs measuring one bound rank's bandwidth (the roofline's memory term; read it
    with roofline.memory_roof). size: doubles per array, roofline.stream_elements(LLC) so each
    array is at least 4x the last-level cache. cores: the node's cores; when given, the job takes
    the whole node (roofline.alone_on_the_node) so no other job shares its memory bus."""
    fields = roofline.alone_on_the_node(cores) if cores else {"binding": {"cpu_bind": "cores"}, "omp": {"num_threads": 1}}
    case = lesson_placement.Case("1 rank, arrays >= 4x the last-level cache", fields,
                          "one core streaming arrays far larger than the caches", ntasks=1)
    return lesson_placement.specs([case], size=size, reps=10, repetitions=repetitions, experiment=experiment)
