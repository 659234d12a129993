"""Notebook 02's fidelity rows (transport-fallback, component-selection) from recorded runs:
'yes' only for a loss beyond the spread of the repetitions, or for every component, the MTL path
included, named by the runs' own reports."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpclab.analysis import transports
from hpclab.course import fidelity
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


def test_fallback_is_yes_when_tcp_loses_beyond_the_spread_of_three_runs():
    """Three vader runs beside three runs that ended on TCP: 'yes', with both transports, the
    loss worded by phrases and all six run ids."""
    row = fidelity.transport_fallback(_table(_reps("pingpong-vader", "default", 3),
                                             _reps("pingpong-tcp", "no vader", 3)), without="no vader")
    assert row.reproduced == "yes" and row.evidence == "measured"
    assert "ob1/vader" in row.here and "ob1/tcp" in row.here
    assert "beyond the spread of 3 runs" in row.here and "latency and bandwidth" in row.why
    assert len(row.runs) == 6


def test_fallback_with_two_runs_per_side_is_only_partly():
    """The same transports with 2 repetitions each: the loss cannot be called, so 'partly'."""
    row = fidelity.transport_fallback(_table(_reps("pingpong-vader", "default", 2),
                                             _reps("pingpong-tcp", "no vader", 2)), without="no vader")
    assert row.reproduced == "partly" and "fewer than 3" in row.why
    assert "cannot be told apart" in row.here


def test_fallback_within_the_noise_is_partly():
    """A fallback whose runs overlap the fast path's runs (here the same timings on another
    transport's label) is 'partly': the transport moved, no loss was measured."""
    vader = _reps("pingpong-vader", "default", 3)
    tcp_like = [t.assign(label="no vader", transport="ob1/tcp", run_id=t["run_id"] + "-x") for t in vader]
    row = fidelity.transport_fallback(_table(vader, tcp_like), without="no vader")
    assert row.reproduced == "partly" and "no loss" in row.why and "within the noise" in row.here


def test_no_fallback_when_the_transport_did_not_change():
    """Two selections that both ran on vader: 'no', and a missing selection: 'not shown'."""
    vader = _reps("pingpong-vader", "default", 3)
    row = fidelity.transport_fallback(_table(vader, [t.assign(label="no vader") for t in vader]), without="no vader")
    assert row.reproduced == "no" and "same transport" in row.why
    assert fidelity.transport_fallback(_table(vader), without="no vader").reproduced == "not shown"


def test_the_fallback_sentence_flips_with_the_sides():
    """Does the text name the TCP side as slower with one order and the vader side as faster with
    the other?"""
    table = _table(_reps("pingpong-vader", "default", 3), _reps("pingpong-tcp", "no vader", 3))
    assert "'no vader' is" in transports.fallback_text(table, "default", "no vader").split(". ", 1)[1]
    c = transports.compare(table, "default", "no vader")
    assert c.latency.winner == "'default'" and c.b_loses
    assert c.latency.sentence().startswith("'default' is") and "faster" in c.latency.sentence()
    assert "slower" in c.latency.swapped().sentence()


def test_component_selection_needs_the_mtl_path_for_yes():
    """ob1+vader and ob1+tcp honoured but no cm/MTL run: 'partly', naming the missing MTL path;
    with a cm+ofi run that reports mtl ofi: 'yes'; a run reporting another BTL than asked: 'no'."""
    ob1 = _table(_reps("pingpong-vader", "ob1+vader", 1), _reps("pingpong-tcp", "ob1+tcp", 1))
    partly = fidelity.component_selection(ob1)
    assert partly.reproduced == "partly" and "MTL path" in partly.why and "none run" in partly.here
    with_cm = pd.concat([ob1, *_reps("pingpong-cm-ofi", "cm+ofi (tcp)", 1)], ignore_index=True)
    yes = fidelity.component_selection(with_cm)
    assert yes.reproduced == "yes" and "cm/ofi" in yes.here, yes
    bad = fidelity.component_selection(_table(_reps("pingpong-vader", "ob1+tcp", 1),
                                              _reps("pingpong-tcp", "ob1+vader", 1)))
    assert bad.reproduced == "no" and "not as asked" in bad.here


def test_a_cm_selection_that_reports_ob1_is_not_honoured():
    """A run asked for pml cm / mtl ofi whose report says ob1 is 'not as asked'."""
    table = _table(_reps("pingpong-vader", "cm+ofi (tcp)", 1), _reps("pingpong-tcp", "ob1+tcp", 1))
    row = fidelity.component_selection(table)
    assert row.reproduced == "no" and "cm+ofi (tcp) reported ob1/vader" in row.here
