"""Notebook 02's section on each library's other transports (hpclab.course.lesson_transports):
the specs set the library's own selection variables, and the sentences follow the numbers."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.course import lesson_transports as lt
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
    """A pingpong table: per label, runs of (t at 0 B, t at 4 MiB) in usec."""
    out = []
    for label, runs in rows.items():
        for i, (t0, t4) in enumerate(runs):
            run = {"label": label, "run_id": f"{label}-{i}", "transport": "as the kernel read it"}
            out += [{**run, "bytes": 0, "t_usec": t0}, {**run, "bytes": 4 << 20, "t_usec": t4}]
    return pd.DataFrame(out)


def test_a_slower_transport_is_named_slower_only_beyond_the_spread():
    lib = mpi_libraries.get("mpich-5.0.2")
    sel = lib.transports[1]
    label = lt.transport_label(lib.name, sel.label)
    table = _table({lib.name: [(0.6, 400.0), (0.62, 410.0), (0.65, 390.0)],
                    label: [(3.9, 1800.0), (4.0, 1850.0), (3.8, 1830.0)]})
    said = pd.DataFrame({"carried by (as it said)": ["UCX", "UCX"]}, index=[lib.name, label])
    [sentence] = lt.library_transport_sentences(table, said)
    assert sentence.startswith(f"mpich-5.0.2 with MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self turns off {sel.disables}")
    assert "it said UCX both times" in sentence and "beyond the spread" in sentence
    assert "within the noise" not in sentence


def test_overlapping_runs_are_called_within_the_noise():
    lib = mpi_libraries.get("openmpi-5.0.11")
    label = lt.transport_label(lib.name, lib.transports[1].label)
    table = _table({lib.name: [(0.2, 380.0), (0.25, 390.0), (0.21, 385.0)],
                    label: [(0.22, 383.0), (0.2, 395.0), (0.24, 381.0)]})
    said = pd.DataFrame({"carried by (as it said)": ["sm", "sm"]}, index=[lib.name, label])
    [sentence] = lt.library_transport_sentences(table, said)
    assert sentence.count("within the noise") == 2


def test_the_same_path_apart_beyond_the_spread_gets_the_odds_of_chance_and_how_the_runs_ran():
    """Does an explicit selection of the default's own path, measured apart from the default, get
    the odds of such a gap by chance (and what they point at) instead of a lesson about transports,
    and only then?"""
    lib = mpi_libraries.get("openmpi-5.0.11")
    sel = next(t for t in lib.transports if t.disables.startswith("nothing"))
    label = lt.transport_label(lib.name, sel.label)
    said = pd.DataFrame({"carried by (as it said)": ["sm", "sm"]}, index=[lib.name, label])
    three = _table({lib.name: [(0.227, 380.0), (0.232, 390.0), (0.234, 385.0)],
                    label: [(0.235, 383.0), (0.244, 395.0), (0.288, 381.0)]})
    [sentence] = lt.library_transport_sentences(three, said, alternated=False)
    assert "beyond the spread" in sentence and "Both reported the same path (sm)" in sentence
    assert "ran as separate batches" in sentence
    assert "fail to overlap 10.0% of the time (2 of the 20 equally likely orderings): chance alone" in sentence
    five = _table({lib.name: [(0.20, 380.0), (0.201, 390.0), (0.202, 385.0), (0.203, 381.0), (0.204, 382.0)],
                   label: [(0.21, 383.0), (0.211, 395.0), (0.212, 381.0), (0.213, 384.0), (0.214, 386.0)]})
    [sentence] = lt.library_transport_sentences(five, said)
    assert "their runs alternated in time" in sentence
    assert "0.8% of the time (2 of the 252 equally likely orderings): a gap this clear points at something" in sentence
    close = _table({lib.name: [(0.2, 380.0), (0.25, 390.0), (0.21, 385.0)],
                    label: [(0.22, 383.0), (0.2, 395.0), (0.24, 381.0)]})
    [sentence] = lt.library_transport_sentences(close, said)
    assert "same path" not in sentence and sentence.count("within the noise") == 2


@pytest.mark.parametrize("missing", ["default", "other"])
def test_a_library_without_both_runs_is_left_out(missing):
    lib = mpi_libraries.get("openmpi-5.0.11")
    label = lt.transport_label(lib.name, lib.transports[1].label)
    present = label if missing == "default" else lib.name
    table = _table({present: [(0.2, 380.0)] * 3})
    said = pd.DataFrame({"carried by (as it said)": ["sm"]}, index=[present])
    assert lt.library_transport_sentences(table, said) == []


# --- the ABI section -------------------------------------------------------------------------------

def test_the_abi_program_links_only_the_standard_library_and_runs_where_it_is_shipped(tmp_path):
    """Does the ABI build ask for libmpi_abi.so.1 and no libmpi of an implementation, while each
    usual build names its own, and is it run under exactly the libraries that ship the ABI?"""
    from hpclab.course import lesson_abi

    if not any(lib.installed() and (lib.bindir / "mpicc_abi").exists() for lib in mpi_libraries.LIBRARIES):
        pytest.skip("no library with mpicc_abi installed (make mpi-libraries)")
    abi = lesson_abi.build(tmp_path)
    assert lesson_abi.ABI_LIBRARY in abi.needed
    assert not [n for n in abi.needed if n.startswith("libmpi.so")]
    for name, libs in lesson_abi.usual_builds().items():
        assert libs and all(n.startswith("libmpi.so") for n in libs), name
    specs, not_run = lesson_abi.specs(abi)
    shipped = {lib.name for lib in mpi_libraries.LIBRARIES if lib.installed() and lesson_abi.ships_abi(lib)}
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
    from hpclab.course import lesson_abi

    abi = lesson_abi.AbiBuild("mpich-5.0.2", ["mpicc_abi"], tmp_path / "x", ["libmpi_abi.so.1"])
    two = [_abi_run(tmp_path, "mpich-5.0.2", "MPICH Version: 5.0.2"),
           _abi_run(tmp_path, "intel-mpi-2021.19", "Intel(R) MPI Library 2021.19.0")]
    text = " ".join(lesson_abi.sentences(abi, two, {}, {}))
    assert "ran unchanged under 2 libraries (mpich-5.0.2, intel-mpi-2021.19)" in text
    assert "2 ranks ran the same binary and each was handed Intel(R) MPI Library 2021.19.0" in text
    (tmp_path / "again").mkdir()
    one = [_abi_run(tmp_path / "again", "mpich-5.0.2", "MPICH Version: 5.0.2"),
           _abi_run(tmp_path / "again", "intel-mpi-2021.19", None, state="failed")]
    text = " ".join(lesson_abi.sentences(abi, one, {}, {}))
    assert "ran unchanged" not in text and "ended failed" in text and "runs under 1 library" in text


def test_specs_of_several_libraries_are_checked_each_against_its_own_components():
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
