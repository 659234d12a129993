"""Notebook 02's section on each library's other transports (hpclab.course.lessons.transports):
the specs set the library's own selection variables, and the sentences follow the numbers."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.course.lessons import transports as lt
from hpclab.site import mpi_libraries


def test_each_installed_library_gets_one_spec_per_other_transport_with_its_variables():
    specs = lt.library_transport_specs(repetitions=3)
    for s in specs:
        lib = mpi_libraries.get(s.mpi)
        sel = next(t for t in lib.transports[1:] if lt.transport_label(lib.name, t.label) == s.label)
        assert {**s.env, **{f"OMPI_MCA_{k}": v for k, v in s.mca.items()}} == dict(sel.env) and s.kernel == "pingpong" and s.ntasks == 2 and s.repetitions == 3
    installed = [lib for lib in mpi_libraries.LIBRARIES if lib.installed()]
    assert len(specs) == sum(len(lib.transports) - 1 for lib in installed)


def _table(rows: dict[str, list[tuple[float, float]]]) -> pd.DataFrame:
    """A pingpong table: per label, runs of (t at 0 B, t at 4 MiB) in usec, run k in round k."""
    out = []
    for label, runs in rows.items():
        for i, (t0, t4) in enumerate(runs):
            run = {"label": label, "run_id": f"{label}-{i}", "transport": "as the kernel read it", "repetition": i + 1}
            out += [{**run, "bytes": 0, "t_usec": t0}, {**run, "bytes": 4 << 20, "t_usec": t4}]
    return pd.DataFrame(out)


MPICH, OFF = "mpich-5.0.2", "mpich-5.0.2: ucx over tcp, no shared memory"
SYSTEM = mpi_libraries.SYSTEM


def test_notebook_specs_pair_every_compared_spec_and_run_the_others_once():
    """One experiment: the fallback pair and each other library's default (and, outside the Open MPI
    family, its turned-off path) run ROUNDS times; the report-only selections once."""
    specs = lt.notebook_specs()
    rounds = {s.label: s.repetitions for s in specs}
    assert lt.ROUNDS == 6
    assert rounds["default"] == rounds[lt.without_shm_label()] == lt.ROUNDS
    assert all(rounds[n] == 1 for n in lt.ONCE if n in rounds)
    for lib, other in lt.library_choices():
        assert rounds[lib.name] == lt.ROUNDS
        assert (other is None) == (lib.family == "openmpi")
        if other is not None:
            assert rounds[lt.transport_label(lib.name, other.label)] == lt.ROUNDS
            assert not other.disables.startswith("nothing")


def test_a_slower_transport_is_decided_slower_on_paired_rounds():
    """Six paired rounds of UCX over TCP against MPICH's default: decided slower in t(0 B) and lower
    in bandwidth; the table says so, paired."""
    table = _table({MPICH: [(0.6, 400.0), (0.62, 410.0), (0.65, 390.0), (0.61, 405.0), (0.63, 395.0), (0.6, 400.0)],
                    OFF: [(3.9, 1800.0), (4.0, 1850.0), (3.8, 1830.0), (4.1, 1790.0), (3.7, 1820.0), (3.9, 1810.0)]})
    [(what, c)] = lt.library_comparisons(table)
    assert what == f"{OFF} vs its default" and c.latency.paired and c.bandwidth.paired
    assert c.latency.outcome == "different" and c.latency.word() == "slower"
    assert c.bandwidth.outcome == "different" and c.bandwidth.word() == "lower"
    t = lt.library_decisions([(what, c)])
    assert list(t["runs"]) == ["6 paired", "6 paired"] and t["outcome"].iloc[0].endswith("slower")
    assert lt.library_summary([(what, c)]).startswith("Without shared memory, t(0 B) was decided slower for 1 of 1")


def test_five_rounds_cannot_decide_whatever_the_gap():
    """Five paired rounds cannot reach 95 %: the table says 'too few runs', not a loss."""
    table = _table({MPICH: [(0.6, 400.0)] * 5, OFF: [(3.9, 1800.0)] * 5})
    [(what, c)] = lt.library_comparisons(table)
    assert set(lt.library_decisions([(what, c)])["outcome"]) == {"too few runs"}
    assert "decided slower for 0 of 1" in lt.library_summary([(what, c)])


def test_overlapping_runs_are_not_called_different():
    lib = mpi_libraries.get("openmpi-5.0.11")
    table = _table({SYSTEM: [(0.2, 380.0), (0.25, 390.0), (0.21, 385.0), (0.22, 381.0), (0.24, 386.0), (0.23, 384.0)],
                    lib.name: [(0.22, 383.0), (0.2, 395.0), (0.24, 381.0), (0.21, 388.0), (0.25, 382.0), (0.22, 385.0)]})
    [(what, c)] = lt.library_comparisons(table)
    assert what == f"{lib.name} vs {SYSTEM}"
    assert c.latency.outcome != "different" and c.bandwidth.outcome != "different"
    assert "openmpi-5.0.11 cannot tell" in lt.library_summary([(what, c)]) or \
        "openmpi-5.0.11 no difference" in lt.library_summary([(what, c)])


@pytest.mark.parametrize("missing", ["default", "other"])
def test_a_library_without_both_runs_is_left_out(missing):
    present = OFF if missing == "default" else MPICH
    table = _table({present: [(0.2, 380.0)] * 3})
    assert lt.library_comparisons(table) == []


# --- the ABI section -------------------------------------------------------------------------------

def test_the_abi_program_links_only_the_standard_library_and_runs_where_it_is_shipped(tmp_path):
    """Does the ABI build ask for libmpi_abi.so.1 and no libmpi of an implementation, while each
    usual build names its own, and is it run under exactly the libraries that ship the ABI?"""

    if not any(lib.installed() and (lib.bindir / "mpicc_abi").exists() for lib in mpi_libraries.LIBRARIES):
        pytest.skip("no library with mpicc_abi installed (make mpi-libraries)")
    abi = lt.build_abi(tmp_path)
    assert lt.ABI_LIBRARY in abi.needed
    assert not [n for n in abi.needed if n.startswith("libmpi.so")]
    for name, libs in lt.usual_builds().items():
        assert libs and all(n.startswith("libmpi.so") for n in libs), name
    specs, not_run = lt.abi_specs(abi)
    shipped = {lib.name for lib in mpi_libraries.LIBRARIES if lib.installed() and lt.ships_abi(lib)}
    assert {s.label for s in specs} == shipped and not shipped & set(not_run)
    assert all(s.command == [str(abi.exe)] and s.mpi == s.label for s in specs)
    assert all("libmpi_abi.so.1" in why or "not installed" in why for why in not_run.values())


def _abi_run(tmp_path, label: str, handed: str | None, state: str = "completed"):
    """A finished ABI job as the sentences read it: its label, state and stdout."""
    from types import SimpleNamespace

    out = tmp_path / label / "stdout"
    out.parent.mkdir()
    out.write_text("" if handed is None else f"rank 0 of 2 library: {handed}\nrank 1 of 2 library: {handed}\n")
    folder = SimpleNamespace(stdout=out, tail=lambda: "srun: error: no libmpi_abi.so.1")
    return SimpleNamespace(spec=SimpleNamespace(label=label), state=state, folder=folder)


def test_the_abi_conclusion_follows_the_libraries_the_ranks_named(tmp_path):
    """Does the lesson say one file ran under several libraries only when the ranks of two runs named
    two different implementations, and otherwise say what is missing?"""

    abi = lt.AbiBuild("mpich-5.0.2", ["mpicc_abi"], tmp_path / "x", ["libmpi_abi.so.1"])
    two = [_abi_run(tmp_path, "mpich-5.0.2", "MPICH Version: 5.0.2"),
           _abi_run(tmp_path, "intel-mpi-2021.19", "Intel(R) MPI Library 2021.19.0")]
    text = " ".join(lt.abi_sentences(abi, two, {}, {}))
    assert "ran unchanged under 2 libraries (mpich-5.0.2, intel-mpi-2021.19)" in text
    assert "2 ranks ran the same binary and each was handed Intel(R) MPI Library 2021.19.0" in text
    (tmp_path / "again").mkdir()
    one = [_abi_run(tmp_path / "again", "mpich-5.0.2", "MPICH Version: 5.0.2"),
           _abi_run(tmp_path / "again", "intel-mpi-2021.19", None, state="failed")]
    text = " ".join(lt.abi_sentences(abi, one, {}, {}))
    assert "ran unchanged" not in text and "ended failed" in text and "runs under 1 library" in text


def test_specs_of_several_libraries_are_checked_each_against_its_own_components(cluster):
    """One experiment with the system Open MPI's vader and Open MPI 5's sm: is each checked
    against its own library's ompi_info (the facts were once shared per kernel: 'sm is not
    installed here')?"""
    from hpclab.jobs import experiment

    specs = [s for s in lt.library_transport_specs() if s.mca.get("btl", "").startswith("self,")]
    if len({s.mpi for s in specs}) < 2:
        pytest.skip("needs two Open MPI libraries installed (make mpi-libraries)")
    assert [sp for sp, _ in experiment.validate(specs)] == specs


def test_one_experiments_runs_split_back_into_defaults_and_other_transports():
    from types import SimpleNamespace as NS

    defaults = [NS(label="a"), NS(label="b")]
    runs = [NS(spec=NS(label=x)) for x in ("a", "a", "b", "b", "a: tcp", "a: tcp")]
    lib, sel = lt.split_library_runs(runs, defaults)
    assert [r.spec.label for r in lib] == ["a", "a", "b", "b"] and [r.spec.label for r in sel] == ["a: tcp"] * 2
