"""Bad traces: foreign or truncated tables, crashed runs, unmatched messages."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpclab.core.errors import HpclabError
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.events import Trace, _regions_well_nested, check, normalise, validate
from hpclab.trace.profile import profile
from hpclab.trace.replay import replay
from hpclab.trace.split import split


def small():
    b = TraceBuilder(3)
    for r in range(3):
        b[r].compute(100 * (r + 1)).sendrecv((r + 1) % 3, 8, 0, (r - 1) % 3, 8, 0).allreduce(8)
    return b


def test_foreign_table_names_the_missing_columns():
    """Does a table without the contract's columns fail with a message naming them?"""
    import pandas as pd
    with pytest.raises(HpclabError, match="t_enter"):
        normalise(pd.DataFrame({"rank": [0], "seq": [0]}))
    problems = check(Trace(pd.DataFrame({"rank": [0]})))
    assert problems[0].fatal and "not an hpclab trace" in problems[0].what


def test_overlapping_events_name_rank_and_event():
    """Is an event that enters before the previous one exits reported with its rank and seq?"""
    t = small().build()
    ev = t.events.copy()
    i = ev.index[(ev["rank"] == 1) & (ev["call"] == "MPI_Allreduce")][0]
    ev.loc[i, "t_enter"] = ev.loc[i - 1, "t_exit"] - 50
    with pytest.raises(HpclabError, match=r"rank 1, event seq 2 \(MPI_Allreduce\)"):
        validate(t.with_events(ev))


def test_crashed_run_is_a_warning_and_still_analysed():
    """Is a rank that never reached MPI_Finalize reported, while profile and replay still work?"""
    b = TraceBuilder(2)
    for r in range(2):
        b[r].compute(100).sendrecv(1 - r, 8, 0, 1 - r, 8, 0).compute(50)
    full = b.build()
    ev = full.events[~((full.events["rank"] == 1) & (full.events["call"] == "MPI_Finalize"))]
    crashed = full.with_events(ev.reset_index(drop=True))
    warnings = validate(crashed)
    assert any(w.rank == 1 and "MPI_Finalize was never reached" in w.what for w in warnings)
    assert len(profile(crashed)) > 0
    assert split(crashed).T_real > 0


def test_unmatched_message_named_and_rest_replayed():
    """Does a receive without a send name its rank and event, strict replay refuse it, and a
    lenient replay treat it as a no-op and finish?"""
    t = small().build()
    ev = t.events
    drop = ev.index[(ev["rank"] == 2) & (ev["call"] == "MPI_Sendrecv")]
    ev2 = ev.drop(drop).reset_index(drop=True)
    # rank 2's program without its Sendrecv: rank 0 receives from nobody, rank 1 sends to nobody
    bad = t.with_events(ev2)
    with pytest.raises(HpclabError, match="rank 1, event seq 1 \\(MPI_Sendrecv\\): send to rank 2 .* is never received"):
        replay(bad, strict=True)
    out = replay(bad)
    assert out.meta["replay_problems"]
    assert len(out.events) == len(ev2)


def test_truncated_table_missing_a_rank_is_reported():
    """If one rank's events are missing entirely (a lost file), is that rank named?"""
    t = small().build()
    ev = t.events[t.events["rank"] != 1].reset_index(drop=True)
    problems = check(t.with_events(ev))
    assert any(p.rank == 1 and "no events" in p.what for p in problems)


def test_badly_nested_regions_are_fatal():
    """Is a region_end that does not close the open region rejected with its rank and event?"""
    b = TraceBuilder(1)
    b[0].region_begin("a").region_begin("b").region_end("b").region_end("a")
    t = b.build()
    ev = t.events.copy()
    ev.loc[ev["name"] == "b", "name"] = ["b", "c"]
    with pytest.raises(HpclabError, match="rank 0, event seq 3 \\(region_end\\)"):
        validate(t.with_events(ev))


def test_deadlock_under_model_names_blocked_ranks():
    """Does a receive-receive cycle name the blocked ranks instead of looping forever?"""
    b = TraceBuilder(2)
    b[0].recv(1, 8, 0).send(1, 8, 0)
    b[1].recv(0, 8, 0).send(0, 8, 0)
    with pytest.raises(HpclabError, match="rank 0 seq 1 MPI_Recv.*rank 1 seq 1 MPI_Recv"):
        b.build()


def _nesting_problems_by_walking(markers):
    """The obvious stack walk, per rank: is every region closed by an end that names it?"""
    stacks: dict = {}
    for rank, is_begin, name in markers:
        stack = stacks.setdefault(rank, [])
        if is_begin:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return True
    return any(stacks.values())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.sampled_from("abc")), max_size=30))
def test_vectorised_region_check_agrees_with_a_stack_walk(markers):
    """Does the fast region check accept exactly the marker sequences a stack walk accepts?"""
    markers = sorted(markers, key=lambda m: m[0])  # events are sorted by rank, stable
    rank = np.array([m[0] for m in markers], dtype=np.int64)
    begin = np.array([m[1] for m in markers], dtype=bool)
    name = np.array([m[2] for m in markers], dtype=object)
    assert _regions_well_nested(rank, begin, name) == (not _nesting_problems_by_walking(markers))
