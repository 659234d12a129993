"""The Cartesian decomposition code lab (code-cartesian): the process grid from MPI's Cartesian
functions instead of hand-computed ranks, and the block split of points that do not divide evenly.

It goes with notebook 05b (mapping and scale: what a 1-D or a 2-D decomposition costs) and
notebook 04 (scaling: the solver's process grids, --grid PxQ); the agenda puts it after 05b, on
the second day, so that the first keeps the deadlock and the halo exchange. The student writes
topology() (MPI_Dims_create, MPI_Cart_create, MPI_Cart_coords, MPI_Cart_shift) and split() in
labs/code-cartesian/decompose.c, in place of src/poisson/decompose.c. Graded twice: a small
report program (src/codelabs/cartesian_report.c) calls the two functions as the solver does and
every rank's grid, coordinates, neighbours and blocks are compared with what MPI's definition
gives (computed here: `dims_create`, `neighbours`, `block`); and the solver built with them
must give residuals bit-identical to the course's on grids that do not divide evenly.
"""

from __future__ import annotations

from hpclab.course.codelab import Build, Check, CodeLab, Outcome, Trial, residual_check
from hpclab.course.lessons import Lesson, register

LAB = "code-cartesian"
FACES = ("lower neighbour along x (nbr[FACE_XLO])", "upper neighbour along x (nbr[FACE_XHI])",
         "lower neighbour along y (nbr[FACE_YLO])", "upper neighbour along y (nbr[FACE_YHI])")
POINTS = (10, 11, 31)


def dims_create(size: int, asked: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """MPI_Dims_create for two dimensions: the zero entries of `asked` filled so that the grid
    has `size` processes, as square as possible, larger first."""
    p, q = asked
    if p and q:
        return p, q
    if p or q:
        fixed = p or q
        other = size // fixed
        return (p, other) if p else (other, q)
    a = max(d for d in range(1, int(size ** 0.5) + 1) if size % d == 0)
    return size // a, a


def neighbours(rank: int, dims: tuple[int, int]) -> tuple[tuple[int, int], list[int | None]]:
    """(coords, [x-lo, x-hi, y-lo, y-hi]) of `rank` on a non-periodic grid, ranks in row-major
    order (MPI's for Cartesian communicators); None where there is no neighbour."""
    p, q = dims
    c0, c1 = divmod(rank, q)
    at = lambda i, j: i * q + j if 0 <= i < p and 0 <= j < q else None  # noqa: E731
    return (c0, c1), [at(c0 - 1, c1), at(c0 + 1, c1), at(c0, c1 - 1), at(c0, c1 + 1)]


def block(n: int, parts: int, c: int) -> tuple[int, int]:
    """(points, first point) of part c of `parts` over n points, the remainder to the first parts."""
    base, rem = divmod(n, parts)
    return base + (c < rem), c * base + min(c, rem)


def _name(peer) -> str:
    return "none (MPI_PROC_NULL)" if peer is None else f"rank {peer}"


def _report_checks(trial: Trial, out: Outcome) -> list[Check]:
    part, where = "neighbours", f"{trial.name}, under {out.library}"
    doc = out.report or {}
    ranks = doc.get("ranks") or []
    if len(ranks) != out.np:
        return [Check(part, f"the report, {where}", False, f"{len(ranks)} ranks reported", f"{out.np}",
                      why="the report program wrote no complete report")]
    asked = tuple(ranks[0]["asked"])
    dims = dims_create(out.np, asked)
    grid = f"{dims[0]}x{dims[1]}"
    problems = {"grid": [], "communicator": [], "neighbours": [], "blocks": []}
    for r in ranks:
        rank = r["cart_rank"] if r["cart_rank"] >= 0 else r["rank"]
        coords, nbr = neighbours(rank, dims)
        if tuple(r["dims"]) != dims:
            problems["grid"].append(f"rank {r['rank']}'s grid is {r['dims'][0]}x{r['dims'][1]}, expected {grid} "
                                    f"for {out.np} ranks (asked {asked[0]}x{asked[1]}: MPI_Dims_create fills the zeros)")
        if r["topology"] != "cart":
            problems["communicator"].append(f"rank {r['rank']}'s communicator is {r['topology']!r}, not Cartesian "
                                            "(MPI_Topo_test): make it with MPI_Cart_create")
        elif r["periods"] != [0, 0]:
            problems["communicator"].append(f"rank {r['rank']}'s grid is periodic ({r['periods']}): the domain "
                                            "has edges, so periods must be {0, 0}")
        elif tuple(r["cart_dims"]) != dims:
            problems["communicator"].append(f"rank {r['rank']}'s Cartesian communicator is {r['cart_dims'][0]}x"
                                            f"{r['cart_dims'][1]}, expected {grid}")
        if tuple(r["coords"]) != coords:
            problems["neighbours"].append(f"rank {rank}'s coordinates are {tuple(r['coords'])}, expected {coords} "
                                          f"on a {grid} grid")
        for k, (got, want) in enumerate(zip(r["nbr"], nbr)):
            if got != want:
                problems["neighbours"].append(f"rank {rank}'s {FACES[k]} is {_name(got)}, expected {_name(want)} "
                                              f"on a {grid} grid")
        for b in r["blocks"]:
            for axis, parts, c in (("x", dims[0], coords[0]), ("y", dims[1], coords[1])):
                want = block(b["n"], parts, c)
                if tuple(b[axis]) != want:
                    problems["blocks"].append(
                        f"rank {rank}'s block along {axis} of {b['n']} points is {b[axis][0]} points from "
                        f"{b[axis][1]}, expected {want[0]} from {want[1]} ({b['n']} points over {parts} parts: "
                        f"the first {b['n'] % parts} get one more)")
    expected = {"grid": grid, "communicator": f"a non-periodic Cartesian communicator {grid}",
                "neighbours": "MPI_Cart_shift's neighbours", "blocks": "the even split, remainder first"}
    return [Check(part, f"{aspect}, {where}", not found,
                  measured=f"{len(found)} difference(s)" if found else "as expected", expected=expected[aspect],
                  why="; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else ""))
            for aspect, found in problems.items()]


def _check(trial: Trial, out: Outcome, reference: Outcome | None) -> list[Check]:
    if trial.build == "report":
        return _report_checks(trial, out)
    return [residual_check(trial, out, reference, "residuals")]


SOLVER = ("src/poisson/poisson.c", "src/poisson/halo.c", "src/poisson/halo_nonblocking.c", "src/common/args.c",
          "src/common/json.c", "src/common/report.c", "src/common/placement.c", "src/codelabs/ledger.c")
INCLUDES = ("src/poisson", "src/common", "src/codelabs")
_POINTS = ",".join(map(str, POINTS))


def _report(dims: str) -> tuple[str, ...]:
    return ("--dims", dims, "--points", _POINTS, "--json", "{report}")


def _solve(*args: str) -> tuple[str, ...]:
    return ("--iters", "25", *args, "--json", "{report}")


CODE = CodeLab(
    lab=LAB,
    files=("decompose.c",),
    builds=(
        Build("student", student=("decompose.c",), reference=("src/poisson/decompose.c",), course=SOLVER,
              includes=INCLUDES, output="poisson"),
        Build("report", student=("decompose.c",), reference=("src/poisson/decompose.c",),
              course=("src/codelabs/cartesian_report.c", "src/codelabs/ledger.c"), includes=INCLUDES,
              output="cartesian_report"),
    ),
    trials=(
        # the full set under the system's library; under the others, 4 ranks of each build
        Trial("neighbours", "2 ranks, grid chosen", 2, _report("0x0"), build="report", everywhere=False),
        Trial("neighbours", "3 ranks, grid chosen", 3, _report("0x0"), build="report", everywhere=False),
        Trial("neighbours", "4 ranks, grid chosen", 4, _report("0x0"), build="report"),
        Trial("neighbours", "4 ranks, grid 1x4 asked", 4, _report("1x4"), build="report", everywhere=False),
        Trial("residuals", "3 ranks, 31 x 31 points", 3, _solve("--n", "31"), compare=True, everywhere=False),
        Trial("residuals", "4 ranks, 37 x 31 points", 4, _solve("--shape", "37x31"), compare=True),
        Trial("residuals", "4 ranks, grid 1x4, 30 x 30 points", 4, _solve("--n", "30", "--grid", "1x4"), compare=True,
              everywhere=False),
    ),
    parts={
        "neighbours": "every rank's grid, Cartesian communicator, coordinates, four neighbours and blocks of "
                      "10, 11 and 31 points are MPI's, at 2, 3 and 4 ranks (4 ranks under every installed "
                      "library) (3 points)",
        "residuals": "the solver with your decomposition gives residuals bit-identical to the course's on "
                     "grids that do not divide evenly (37 x 31 points on 4 ranks under every installed "
                     "library) (2 points)",
    },
    check=_check,
    minutes=40,
)

LESSON = register(Lesson("cartesian", "The Cartesian decomposition: MPI_Dims_create, MPI_Cart_create, MPI_Cart_shift",
                         (), lab=LAB, goes_with=("05b-mapping-and-scale.ipynb", "04-scaling.ipynb"), code=CODE))
