"""The collectives lesson (hpclab/course/lessons/collectives.py, notebook 02b): its runs as specs,
and its words built from numbers, on timings made from the model itself (no cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpclab.analysis import collectives as model
from hpclab.analysis.fits import hockney_fit
from hpclab.core.errors import HpclabError
from hpclab.course import lessons
from hpclab.course.lessons import collectives as lesson
from hpclab.kernels import collectives as kernel
from hpclab.site import mpi_libraries

SIZES = np.array([1 << k for k in range(0, 23)], float)


def _paths(inter_alpha=15.0, inter_bw=120.0, intra_alpha=60.0, intra_bw=2000.0) -> lesson.Paths:
    inter = hockney_fit(SIZES, inter_alpha + SIZES / inter_bw, size_range=(1 << 20, 4 << 20))
    intra = hockney_fit(SIZES, intra_alpha + SIZES / intra_bw, size_range=(1 << 16, 4 << 20))
    net = model.Network(model.Hockney.from_fit(inter, inter_alpha), model.Hockney.from_fit(intra, intra_alpha))
    return lesson.Paths(net, inter, intra, inter_alpha, intra_alpha, 8)


def _times(paths: lesson.Paths, libraries=(("openmpi-system", True), ("intel-mpi-2021.19", False)),
           noise=0.02, seed=38) -> pd.DataFrame:
    """Six rounds of every forced algorithm, timed as the model predicts them times a little noise,
    and a default 10 % above the fastest."""
    rng = np.random.default_rng(seed)
    pred = lesson.predictions(paths, lesson.SIZES)
    rows = []
    for lib, paired in libraries:
        for _, p in pred.iterrows():
            for r in range(lesson.ROUNDS):
                rows.append({"library": lib, "variant": "1", "paired": paired, "algorithm": p.algorithm, "op": p.op,
                             "order": p.order, "bytes": p.bytes, "round": r, "run_id": "synthetic",
                             "t_max_usec": p.t_pred_usec * np.exp(rng.normal(0, noise))})
        for (op, order, n), cell in pred.groupby(["op", "order", "bytes"]):
            for r in range(lesson.ROUNDS):
                rows.append({"library": lib, "variant": lesson.DEFAULT, "paired": paired, "algorithm": lesson.DEFAULT,
                             "op": op, "order": order, "bytes": n, "round": r, "run_id": "synthetic",
                             "t_max_usec": 1.1 * cell["t_pred_usec"].min() * np.exp(rng.normal(0, noise))})
    return pd.DataFrame(rows)


def test_the_lesson_is_registered_with_its_notebook():
    """Is the lesson found by the registry, with notebook 02b between 02 and 03 in course order?"""
    names = lessons.names()
    assert lessons.get("collectives").notebooks == ("02b-collectives.ipynb",)
    assert names.index("transports") < names.index("collectives") < names.index("placement")


@pytest.mark.parametrize("name", mpi_libraries.names())
def test_each_library_forces_three_modelled_algorithms_per_operation(name):
    """Does every library with a record get its default and three variants, each forcing, for every
    operation, the library's own number of the algorithm FORCED names (by the library's name or
    the model's), with the model's name for it (Open MPI's binomial tree: nearest child first)?"""
    lib = mpi_libraries.get(name)
    vs = lesson.variants(lib)
    assert [v.name for v in vs] == [lesson.DEFAULT, "1", "2", "3"]
    for k, v in enumerate(vs[1:]):
        for op in lesson.OPS:
            alg = lib.collectives.algorithm(op, v.numbers[op])
            assert alg.model == v.models[op] and lesson.FORCED[op][k] in (alg.name, alg.model)
            assert alg.model in model.ALGORITHMS[op]
    want = "binomial_near_first" if lib.family == "openmpi" else "binomial"
    assert lesson.forced_models(lib)["bcast"][0] == want


def test_the_specs_switch_through_mpi_t_where_the_library_allows_it(monkeypatch):
    """Is there one job per library whose MPI_T switches algorithms (its variants written through
    MPI_T, Open MPI 5's han turned off in the forced ones, the gate in the environment), and one job
    per algorithm, forced through the environment, for a library that reads its choice at start-up?"""
    monkeypatch.setattr(mpi_libraries.MpiLibrary, "installed", lambda self: True)
    specs = lesson.collective_specs(sizes=(8, 1024))
    by_label = {s.label: s for s in specs}
    ompi5 = by_label["openmpi-5.0.11"]
    assert ompi5.args.variant[0] == "default" and len(ompi5.args.variant) == 4
    assert all("coll_han_priority=0" in v for v in ompi5.args.variant[1:])
    assert "coll_han_priority" not in by_label["openmpi-system"].args.variant[1]
    assert ompi5.mca["coll_tuned_use_dynamic_rules"] == "1" and ompi5.args.rounds == lesson.ROUNDS
    assert by_label["mpich-5.0.2"].env["MPIR_CVAR_CH4_PROGRESS_THROTTLE"] == "1"
    intel = [s for s in specs if s.mpi == "intel-mpi-2021.19"]
    assert len(intel) == 4 and all(s.args.variant == [] for s in intel)
    assert intel[1].env["I_MPI_ADJUST_ALLREDUCE"] == "1" and intel[1].args.rounds == lesson.UNPAIRED_ROUNDS
    for s in specs:
        assert (s.nodes, s.ntasks, s.ntasks_per_node, s.oversubscribe) == (2, 4, None, True)
        assert s.args.order == "block,cyclic" and s.args.sizes == "8,1024"


def test_timings_made_by_the_model_are_named_by_the_model():
    """On timings the model itself made (2 % noise), does the model name the measured winner in
    every cell the statistics decide, and do the sentences carry those counts?"""
    paths = _paths()
    times = _times(paths)
    versus = lesson.versus(times, paths)
    a = model.agreement(versus)
    assert a.counted >= a.cells // 2 and a.right == a.counted
    text = lesson.agreement_text(versus)
    assert f"{a.right} of the {a.counted} cells" in text and "meets the goal of 80 %" in text
    assert lesson.misses(versus).empty
    table = lesson.versus_table(versus)
    assert list(table.columns) == ["openmpi-system", "intel-mpi-2021.19", "model"]
    assert len(table) == len(lesson.OPS) * len(lesson.ORDERS) * len(lesson.SIZES)


def test_a_wrong_model_is_counted_wrong():
    """When the timings come from another network than the model's (latencies 50x higher, so the
    winners at small sizes move), are the misses listed and the goal said to be missed?"""
    truth, believed = _paths(inter_alpha=750.0, intra_alpha=3000.0), _paths()
    versus = lesson.versus(_times(truth), believed)
    a = model.agreement(versus)
    assert a.right < a.counted
    assert len(lesson.misses(versus)) == a.counted - a.right
    if a.fraction < 0.8:
        assert "misses the goal" in lesson.agreement_text(versus)


def test_the_default_and_the_numbering_are_decided_and_said():
    """Is a default 10 % above the fastest forced algorithm decided slower in most cells, and does
    the placement sentence say which algorithms the model has cyclic numbering cost more?"""
    paths = _paths()
    times = _times(paths)
    decisions = lesson.default_decisions(times)
    assert (decisions["outcome"] == "different").mean() > 0.8
    assert "its default was decided slower than the fastest forced algorithm in" in lesson.default_text(decisions)
    placed = lesson.placement_decisions(times, 1 << 20)
    ratios = lesson.model_placement_ratio(paths, 1 << 20)
    assert ratios[("allreduce", "ring")] == pytest.approx(2.0, rel=0.05)
    text = lesson.placement_text(placed, paths, 1 << 20)
    assert "ring" in text.split("more for")[1].split(";")[0]
    assert placed.attrs["provenance"] == [{"run_id": "synthetic"}]


def test_crossovers_and_the_first_figure_takeaway_come_from_the_model():
    """Does the crossover table list where the model's winner changes (recursive doubling to
    Rabenseifner for Allreduce in the block numbering), and the takeaway name the measured winners?"""
    paths = _paths()
    table = lesson.crossovers(paths)
    row = table[(table["op"] == "allreduce") & (table["order"] == "block")].iloc[0]
    assert (row["below"], row["above"]) == ("rec. doubling", "Rabenseifner")
    versus = lesson.versus(_times(paths), paths)
    text = lesson.times_takeaway(versus, paths, "openmpi-system")
    assert text.startswith("openmpi-system, block numbering. MPI_Allreduce: rec. doubling at 8 B")


class _PingpongRun:
    """What fitted_paths reads of a run: its spec's label and its table."""

    def __init__(self, label: str, t_usec):
        self.spec = type("Spec", (), {"label": label})()
        self._table = pd.DataFrame({"bytes": SIZES, "t_usec": t_usec})

    def table(self):
        return self._table


def test_each_library_gets_its_own_path_inside_a_node(monkeypatch):
    """From one ping-pong between the nodes and one inside a node per library: is alpha each one's
    measured 8-byte time, beta the fitted 1/BW, and a library whose times fit no line (a shared
    core's scheduling) kept with beta 0 and the fit's complaint?"""
    libs = [mpi_libraries.get(n) for n in ("openmpi-system", "mpich-5.0.2")]
    monkeypatch.setattr(lesson, "libraries", lambda: libs)
    flat = np.full(len(SIZES), 2000.0)
    flat[SIZES >= 1 << 16] = np.linspace(3000, 1000, int((SIZES >= 1 << 16).sum()))   # falls: no line fits
    runs = [_PingpongRun(lesson.INTER, 15 + SIZES / 120), _PingpongRun(lesson.intra_label("openmpi-system"), 5 + SIZES / 2000),
            _PingpongRun(lesson.intra_label("mpich-5.0.2"), flat)]
    paths = lesson.fitted_paths(runs)
    ompi, mpich = paths["openmpi-system"], paths["mpich-5.0.2"]
    assert ompi.network.inter.alpha_us == pytest.approx(15 + 8 / 120)
    assert ompi.network.inter.beta_us_per_byte == pytest.approx(1 / 120)
    assert ompi.network.intra.alpha_us == pytest.approx(5 + 8 / 2000)
    assert mpich.intra_fit is None and mpich.network.intra == model.Hockney(2000.0, 0.0) and mpich.intra_problem
    table = lesson.paths_table(paths)
    assert len(table) == 3 and table.iloc[2]["BW [MB/s]"] == "-"


DATA = Path(__file__).parent / "data" / "runs"


class _CapturedRun:
    """A collectives run as the lesson reads it, from a captured report: the spec the lesson made
    for it, its table, its report and its output (the kernels ran outside Slurm, 4 ranks on this
    machine's cores, with the specs' arguments and environment, sizes 8 B, 16 KiB, 256 KiB)."""

    def __init__(self, spec, folder: Path):
        self.spec, self.run_id, self.repetition, self.state = spec, folder.name, 1, "completed"
        self._doc = json.loads((folder / "result.json").read_text())
        self.folder = type("Folder", (), {"stdout": folder / "stdout", "stderr": folder / "stderr"})()

    def result(self):
        return self._doc

    def table(self):
        return kernel.collectives_table(self._doc).assign(run_id=self.run_id)


def test_the_runs_own_reports_say_what_was_forced(monkeypatch):
    """From real reports, the system Open MPI's variants switched through MPI_T and one Intel MPI
    job forcing through the environment: does measured() give one row per variant, operation,
    numbering, size and round with the model's name of the forced algorithm, and does each run's
    own readback (MPI_T; Intel MPI's debug lines) say every forced algorithm ran, forced?"""
    monkeypatch.setattr(mpi_libraries.MpiLibrary, "installed", lambda self: True)
    specs = {s.label: s for s in lesson.collective_specs(sizes=lesson.FAST_SIZES, unpaired_rounds=4)}
    runs = [_CapturedRun(specs["openmpi-system"], DATA / "collectives-forced-openmpi-system"),
            _CapturedRun(specs["intel-mpi-2021.19: 1"], DATA / "collectives-forced-intel-mpi")]
    times, said = lesson.measured(runs)
    ompi = times[times["library"] == "openmpi-system"]
    assert len(ompi) == 4 * 3 * 2 * 3 * lesson.ROUNDS and ompi["paired"].all()   # variants, ops, orders, sizes, rounds
    assert set(ompi.loc[ompi["op"] == "bcast", "algorithm"]) == {lesson.DEFAULT, "binomial_near_first",
                                                                 "scatter_allgather", "scatter_ring_allgather"}
    intel = times[times["library"] == "intel-mpi-2021.19"]
    assert set(intel["algorithm"]) == {"recursive_doubling", "binomial", "pairwise"} and not intel["paired"].any()
    assert lesson.unforced(said) == []
    table = lesson.said_table(said)
    assert table.loc[("intel-mpi-2021.19", "1"), "allreduce"] == "recursive doubling (forced)"
    assert table.loc[("openmpi-system", "2"), "alltoall"] == "modified_bruck (forced)"
    assert table.loc[("openmpi-system", lesson.DEFAULT), "bcast"] == "ignore (own choice)"


def test_at_the_seed_scale_the_library_s_picks_are_priced_and_said_as_a_prediction():
    """At 384 ranks on the seed's network: one pick per priced cell, no pick cheaper than the
    model's best, the sentence labelled a prediction, and the switch points in order."""
    libs = [lib for lib in lesson.libraries() if lib.family.lower().startswith("mpich")]
    if not libs:
        pytest.skip("no MPICH installed here (make mpi-libraries)")
    lib = libs[0]
    net = lesson.seed_network(model.Hockney(0.5, 1 / 5000))
    table = lesson.at_scale(lib, net, sizes=(8, 16384))
    assert set(table["op"]) == set(lesson.OPS)
    assert (table.groupby(["op", "bytes"])["picked"].sum() <= 1).all()
    summary = lesson.scale_summary(table)
    priced = summary.dropna(subset=["pick / best"])
    assert len(priced) and (priced["pick / best"] >= 1 - 1e-12).all()
    assert lesson.scale_takeaway(summary, lib.name).startswith("Predicted, not measured: at 384 ranks")
    for op in lesson.OPS:
        for below, above, last, first in lesson.switch_points(lib, op):
            assert below != above and last < first


def test_the_seed_network_is_the_talk_s_infiniband_ping_pong():
    net = lesson.seed_network()
    assert net.inter.alpha_us == pytest.approx(1.64)
    assert 3000 < 1 / net.inter.beta_us_per_byte < 4500      # MB/s: 40 Gb/s InfiniBand


def test_switch_points_are_found_exactly_where_the_tree_switches(monkeypatch):
    """A tree written here (flat Bcast: binomial up to 12,288 B, then scatter + ring): is the
    switch found between exactly those two sizes, with both picks named?"""
    from hpclab.site import coll_selection

    generic = {"collective=bcast": {"comm_type=intra": {
        "avg_msg_size<=12288": {"algorithm=MPIR_Bcast_intra_binomial": {}},
        "avg_msg_size=any": {"algorithm=MPIR_Bcast_intra_scatter_ring_allgather": {}}}}}
    device = {"collective=bcast": {"comm_type=intra": {"composition=MPIDI_Bcast_intra_composition_gamma": {}}}}
    trees = coll_selection.MpichTrees(device, generic, Path("libmpi.so"))
    monkeypatch.setattr(coll_selection, "reader_for", lambda lib: trees)
    lib = mpi_libraries.get(mpi_libraries.names()[0])
    assert lesson.switch_points(lib, "bcast") == [
        ("binomial (flat: 384 ranks)", "scatter_ring_allgather (flat: 384 ranks)", 12288, 12296)]


# --- the lab's expected answers ---------------------------------------------------------------------

def _lab_times(medians: dict, spread: float = 0.01, rounds: int = 6, nbytes: int = lesson.LAB_BYTES):
    """Paired rounds of the lab's Allreduce: each algorithm's time is its median times a round's
    common factor (the machine's drift, shared by the round) and a small factor of its own."""
    rng = np.random.default_rng(7)
    rows = []
    for rnd in range(1, rounds + 1):
        drift = 1 + 0.2 * rng.random()
        for alg, t in medians.items():
            rows.append({"algorithm": alg, "round": rnd, "bytes": nbytes, "op": "allreduce", "order": "block",
                         "t_max_usec": t * drift * (1 + spread * rng.standard_normal())})
    return pd.DataFrame(rows)


def _inter(alpha=50.0, bw=125.0):
    return pd.DataFrame({"bytes": SIZES.astype(int), "t_usec": alpha + SIZES / bw})


def test_the_lab_s_answers_follow_from_its_runs_and_the_textbook():
    """With ring decided quickest and the link exactly alpha + n / BW: the answers name ring alone,
    alpha and beta are the link's, each prediction is the textbook formula, Rabenseifner and ring
    predicted within 5 % are both the model's pick, and the bandwidth part is the larger."""
    ans = lesson.lab_answers(_lab_times({"default": 3000, "recursive_doubling": 4200, "ring": 3000,
                                         "rabenseifner": 3600}), _inter())
    assert ans["fastest"] == ["ring"]
    n, a, b = lesson.LAB_BYTES, 50.0 + 8 / 125, 1 / 125   # alpha: the 8-byte message's time
    assert ans["alpha_us"] == pytest.approx(a) and ans["beta_us_per_byte"] == pytest.approx(b, rel=1e-6)
    assert ans["predicted_us"]["ring"] == pytest.approx(6 * a + 1.5 * n * b, rel=1e-6)
    assert ans["predicted_us"]["rabenseifner"] == pytest.approx(4 * a + 1.5 * n * b, rel=1e-6)
    assert ans["predicted_us"]["recursive_doubling"] == pytest.approx(2 * a + 2 * n * b, rel=1e-6)
    assert ans["model_pick"] == ["rabenseifner", "ring"]   # 1.5 n beta dwarfs 2 alpha: a tie at 5 %
    assert ans["model_agrees"] == [False, True] and ans["dominant_term"] == ["beta"]


def test_algorithms_the_rounds_cannot_tell_apart_are_all_accepted():
    """Two algorithms 1 % apart under 10 % noise per run: both count as quickest, and each
    comparison is said in a sentence; a small message makes the alpha part the larger."""
    ans = lesson.lab_answers(_lab_times({"default": 100, "recursive_doubling": 100, "ring": 101,
                                         "rabenseifner": 300}, spread=0.1, nbytes=8), _inter())
    assert set(ans["fastest"]) == {"recursive_doubling", "ring"}
    assert set(ans["fastest_sentences"]) == set(lesson.FORCED["allreduce"]) - {ans["fastest"][0]}
    assert ans["model_pick"] == ["recursive_doubling"] and ans["dominant_term"] == ["alpha"]


def test_the_lab_s_message_size_is_checked_before_anything_is_submitted():
    with pytest.raises(HpclabError, match="8 B to 4 MiB"):
        lesson.lab_specs(16 << 20)
    coll, ping = lesson.lab_specs(4096)
    assert coll.args.sizes == "4096" and coll.args.ops == "allreduce" and coll.label == "collectives"
    assert ping.label == lesson.INTER and ping.nodes == 2
