"""Notebook 02's fidelity rows (transport-fallback, component-selection) from recorded runs:
'yes' only for a loss beyond the spread of the repetitions, or for every component, the MTL path
included, named by the runs' own reports."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpclab.analysis import transports
from hpclab.course import reading
from hpclab.course.lessons import transports as lesson
from hpclab.runs.parse import parse_run

RUNS = Path(__file__).parent / "data" / "runs"
# a cm/ofi capture lives apart: the parse tests over data/runs assume ob1 captures of one BTL each
CM_OFI = Path(__file__).parent / "data" / "transports" / "pingpong-cm-ofi"


def _reps(folder: str, label: str, n: int, scale: float = 1.0) -> list[pd.DataFrame]:
    """n repetitions of one recorded run, labelled as a selection: times scaled by 1, 1.02, 1.04, ...
    (times `scale`), each with its own run id."""
    base = parse_run(CM_OFI if folder == CM_OFI.name else RUNS / folder, "pingpong")
    out = []
    for i in range(n):
        t = base.copy()
        t["label"], t["run_id"] = label, f"{folder}-{label}-{i}"
        t["t_usec"] = t["t_usec"] * scale * (1 + 0.02 * i)
        out.append(t)
    return out


def _table(*parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat([t for p in parts for t in p], ignore_index=True)


def _rounds(*parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Runs of each part numbered 1, 2, ... as rounds of one experiment (they alternated)."""
    for part in parts:
        for k, t in enumerate(part, start=1):
            t["repetition"] = k
    return _table(*parts)


def test_fallback_is_yes_when_tcp_loses_decided_on_paired_rounds():
    """Six rounds of vader beside six that ended on TCP: 'yes', decided on paired runs, with both
    transports, the loss worded by phrases and all twelve run ids."""
    row = lesson.transport_fallback(_rounds(_reps("pingpong-vader", "default", 6),
                                             _reps("pingpong-tcp", "no vader", 6)), without="no vader")
    assert row.reproduced == "yes" and row.evidence == "measured"
    assert "ob1/vader" in row.here and "ob1/tcp" in row.here
    assert "6 paired runs" in row.here and "slower than 'default'" in row.here
    assert "lost latency and bandwidth, decided by the statistics" in row.why
    assert len(row.runs) == 12


def test_fallback_is_yes_unpaired_with_four_runs_a_side():
    """Runs that did not alternate (no rounds) are compared unpaired: 4 a side can decide."""
    row = lesson.transport_fallback(_table(_reps("pingpong-vader", "default", 4),
                                             _reps("pingpong-tcp", "no vader", 4)), without="no vader")
    assert row.reproduced == "yes" and "4 runs each" in row.here


def test_fallback_with_too_few_runs_is_only_partly():
    """Three runs a side unpaired, or five paired rounds, cannot reach 95 %: 'partly', saying why,
    whatever the medians (a 20x gap included)."""
    row = lesson.transport_fallback(_table(_reps("pingpong-vader", "default", 3),
                                             _reps("pingpong-tcp", "no vader", 3)), without="no vader")
    assert row.reproduced == "partly" and "fewer than 4 runs" in row.why
    assert "cannot be told apart with so few runs" in row.here
    five = lesson.transport_fallback(_rounds(_reps("pingpong-vader", "default", 5),
                                              _reps("pingpong-tcp", "no vader", 5)), without="no vader")
    assert five.reproduced == "partly" and "fewer than 6 paired runs" in five.why


def test_fallback_within_the_noise_is_partly():
    """A fallback whose runs are the fast path's timings on another transport's label is 'partly':
    the transport moved, and the statistics decided no loss."""
    vader = _reps("pingpong-vader", "default", 6)
    tcp_like = [t.assign(label="no vader", transport="ob1/tcp", run_id=t["run_id"] + "-x") for t in vader]
    row = lesson.transport_fallback(_rounds(vader, tcp_like), without="no vader")
    assert row.reproduced == "partly" and "decided no loss" in row.why
    assert "no difference larger than 5 %" in row.here


def test_no_fallback_when_the_transport_did_not_change():
    """Two selections that both ran on vader: 'no', and a missing selection: 'not shown'."""
    vader = _reps("pingpong-vader", "default", 3)
    row = lesson.transport_fallback(_table(vader, [t.assign(label="no vader") for t in vader]), without="no vader")
    assert row.reproduced == "no" and "same transport" in row.why
    assert lesson.transport_fallback(_table(vader), without="no vader").reproduced == "not shown"


def test_the_fallback_sentence_flips_with_the_sides():
    """Does the text name the TCP side as slower with one order and the vader side as faster with
    the other?"""
    table = _rounds(_reps("pingpong-vader", "default", 6), _reps("pingpong-tcp", "no vader", 6))
    assert "'no vader' is" in transports.fallback_text(table, "default", "no vader").split(". ", 1)[1]
    c = transports.compare(table, "default", "no vader", paired=True)
    assert c.latency.paired and c.latency.winner == "'default'" and c.b_loses
    assert c.latency.sentence().startswith("'default' is") and "faster" in c.latency.sentence()
    assert "slower" in c.latency.swapped().sentence()


def test_the_figure_takeaway_is_built_from_the_runs():
    """Section 3's takeaway: the decided latency loss and where shared memory peaks, at most 40 words."""
    table = _rounds(_reps("pingpong-vader", "default", 6), _reps("pingpong-tcp", "no vader", 6))
    text = lesson.figure_takeaway(table, 2 << 20, without="no vader")
    assert text.startswith("Over TCP an empty message is") and "slower (95 % CI" in text
    assert "2 MiB L2" in text and reading.words(text) <= 40


def test_component_selection_needs_the_mtl_path_for_yes():
    """ob1+vader and ob1+tcp honoured but no cm/MTL run: 'partly', naming the missing MTL path;
    with a cm+ofi run that reports mtl ofi: 'yes'; a run reporting another BTL than asked: 'no'."""
    ob1 = _table(_reps("pingpong-vader", "ob1+vader", 1), _reps("pingpong-tcp", "ob1+tcp", 1))
    partly = lesson.component_selection(ob1)
    assert partly.reproduced == "partly" and "MTL path" in partly.why and "none run" in partly.here
    with_cm = pd.concat([ob1, *_reps("pingpong-cm-ofi", "cm+ofi (tcp)", 1)], ignore_index=True)
    yes = lesson.component_selection(with_cm)
    assert yes.reproduced == "yes" and "cm/ofi" in yes.here, yes
    bad = lesson.component_selection(_table(_reps("pingpong-vader", "ob1+tcp", 1),
                                              _reps("pingpong-tcp", "ob1+vader", 1)))
    assert bad.reproduced == "no" and "not as asked" in bad.here


def test_a_library_whose_report_does_not_change_makes_the_selection_partly():
    """Open MPI's selections all honoured, the MTL path included, but MPICH said UCX with and
    without its shared memory: 'partly', naming the library and what it said both times; a library
    whose report changed keeps 'yes'."""
    ob1 = _table(_reps("pingpong-vader", "ob1+vader", 1), _reps("pingpong-tcp", "ob1+tcp", 1),
                 _reps("pingpong-cm-ofi", "cm+ofi (tcp)", 1))
    col = "carried by (as it said)"
    same = pd.DataFrame({col: ["UCX", "UCX"]}, index=["mpich-5.0.2", "mpich-5.0.2: ucx over tcp, no shared memory"])
    row = lesson.component_selection(ob1, same)
    assert row.reproduced == "partly" and "mpich-5.0.2 said UCX both times" in row.why
    assert "did not change" in row.why and "mpich-5.0.2 said UCX both times" in row.here
    moved = pd.DataFrame({col: ["shm", "libfabric tcp"]},
                         index=["intel-mpi-2021.19", "intel-mpi-2021.19: ofi tcp, no shared memory"])
    assert lesson.component_selection(ob1, moved).reproduced == "yes"


def test_a_cm_selection_that_reports_ob1_is_not_honoured():
    """A run asked for pml cm / mtl ofi whose report says ob1 is 'not as asked'."""
    table = _table(_reps("pingpong-vader", "cm+ofi (tcp)", 1), _reps("pingpong-tcp", "ob1+tcp", 1))
    row = lesson.component_selection(table)
    assert row.reproduced == "no" and "cm+ofi (tcp) reported ob1/vader" in row.here
