"""The trace loader on files written here byte by byte: exact answers, and clear errors.

Files are built with the loader's own numpy dtypes (checked against src/mpitrace/format.h), so
clock correction, completion filling and every kind of damaged folder are tested without MPI.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.trace import load
from hpclab.trace.events import CALLS as CONTRACT_CALLS
from hpclab.trace.load import HEADER, RECORD, RECORD_V1, least_offset, load_dir, load_run

FORMAT_H = paths.repo() / "src" / "mpitrace" / "format.h"
CODE = {name: code for code, name in load.CALLS.items()}


def header(rank, size, *, flags=1, nrecords=0, sync_init=(0, 0, 0), sync_final=None, host="node"):
    h = np.zeros(1, dtype=HEADER)
    h["magic"], h["version"], h["header_size"], h["record_size"] = b"MPITRACE", 1, 512, 56
    h["rank"], h["size"], h["flags"], h["clock_id"], h["nrecords"] = rank, size, flags, 1, nrecords
    h["host"] = host.encode()
    t, off, rtt = sync_init
    h["sync_init"] = (t, off, rtt, 1, 20)
    if sync_final is not None:
        t, off, rtt = sync_final
        h["sync_final"] = (t, off, rtt, 1, 20)
    return h


def rec(call, seq, t0=0, t1=None, *, peer=-1, tag=-1, comm=-1, nbytes=0, req=-1, aux=-1, nextra=0):
    code = CODE.get(call, call)
    return (code, nextra, seq, t0, t0 if t1 is None else t1, nbytes, peer, tag, comm, req, aux, 0)


def payload_records(code, seq, data: bytes, **fields):
    """A definition record and its 54-byte chunks (format version 1: 56-byte records)."""
    head = rec(code, seq, nbytes=len(data), nextra=-(-len(data) // 54), **fields)
    chunks = []
    for i in range(0, len(data), 54):
        raw = np.zeros(56, dtype=np.uint8)
        raw[:2] = np.frombuffer(np.uint16(load.CHUNK).tobytes(), np.uint8)
        part = data[i:i + 54]
        raw[2:2 + len(part)] = np.frombuffer(part, np.uint8)
        chunks.append(raw.view(RECORD_V1)[0].tolist())
    return [head] + chunks


def write_rank(folder: Path, rank, size, records, **hdr):
    folder.mkdir(parents=True, exist_ok=True)
    arr = np.array(records, dtype=RECORD_V1)
    hdr.setdefault("nrecords", len(arr))
    path = folder / f"rank-{rank:06d}.mpit"
    with open(path, "wb") as f:
        f.write(header(rank, size, **hdr).tobytes())
        f.write(arr.tobytes())
    return path


def two_rank_run(folder: Path, **hdr1):
    """Rank 0 sends 80 B to rank 1 (tag 7); rank 1 receives it with Irecv(ANY_SOURCE) + Wait."""
    comm = payload_records(load.DEF_COMM, 0, np.array([0, 1], "<i4").tobytes(), comm=0, peer=2)
    name = payload_records(load.DEF_STRING, 1, b"exchange", aux=0)
    r0 = comm + [rec("MPI_Init", 0, 0, 100)] + name + [
        rec("region_begin", 1, 150, aux=0),
        rec("MPI_Send", 2, 1000, 1100, peer=1, tag=7, comm=0, nbytes=80),
        rec("region_end", 3, 1200, aux=0),
        rec("MPI_Finalize", 4, 5000, 5100)]
    r1 = comm + [
        rec("MPI_Init", 0, 0, 100),
        rec("MPI_Irecv", 1, 200, 250, peer=load.PEER_ANY, tag=-1, comm=0, nbytes=800, req=0),
        rec("MPI_Waitany", 2, 300, 2000, aux=1, nextra=1),
        rec(load.X_COMPLETE, 2, peer=0, tag=7, comm=0, nbytes=80, req=0, aux=1),
        rec("MPI_Sendrecv_replace", 3, 2100, 2200, peer=-2, tag=1, comm=0, nextra=1),
        rec(load.X_RECV, 3, peer=-2, tag=-1, comm=0, nbytes=0),
        rec("flush", 4, 2300, 2400),
        rec("MPI_Finalize", 5, 5000, 5100)]
    write_rank(folder, 0, 2, r0)
    write_rank(folder, 1, 2, r1, **hdr1)


def test_call_codes_agree_with_the_c_header():
    """Do the loader's call codes and record layout match src/mpitrace/format.h?"""
    text = FORMAT_H.read_text()
    enum = re.search(r"enum mt_call \{(.*?)\};", text, re.S).group(1)
    enum = re.sub(r"/\*.*?\*/", "", enum, flags=re.S)
    codes, nxt = {}, 0
    for item in (x.strip() for x in enum.split(",")):
        if not item:
            continue
        name, _, value = item.partition("=")
        nxt = int(value) if value.strip() else nxt
        codes[name.strip()] = nxt
        nxt += 1
    for code, call in load.CALLS.items():
        c_name = "MT_" + call.removeprefix("MPI_").upper()
        assert codes[c_name] == code, call
    assert codes["MT_X_COMPLETE"] == load.X_COMPLETE and codes["MT_DEF_COMM"] == load.DEF_COMM
    assert codes["MT_CHUNK"] == load.CHUNK
    assert f"MT_RECORD_SIZE {RECORD.itemsize}" in text and f"MT_HEADER_SIZE {HEADER.itemsize}" in text
    # every recorded call lands on a name of the event table, or is dropped on purpose
    for call in load.CALLS.values():
        assert call in CONTRACT_CALLS or call in load.AS_CONTRACT


def test_irecv_gets_the_matched_source_tag_and_size(tmp_path):
    """Does an Irecv posted for any source carry, once loaded, what its completion matched?"""
    two_rank_run(tmp_path)
    t = load_dir(tmp_path)
    ev = t.events
    irecv = ev[ev["call"] == "MPI_Irecv"].iloc[0]
    assert (irecv.peer, irecv.tag, irecv.bytes, irecv.req) == (0, 7, 80, 0)
    wait = ev[(ev["rank"] == 1) & (ev["seq"] == 2)].iloc[0]
    assert (wait.call, wait.completes) == ("MPI_Wait", (0,))
    sr = ev[ev["call"] == "MPI_Sendrecv"].iloc[0]
    assert (sr.peer, sr.recv_peer, sr.bytes, sr.recv_bytes) == (-2, -2, 0, 0)
    assert list(ev.loc[ev["call"].str.startswith("region"), "name"]) == ["exchange", "exchange"]
    assert "flush" not in set(ev["call"])
    assert t.meta["tracer_flushes"] == 1 and t.meta["tracer_flush_ns"] == 100
    assert t.meta["calls_mapped"] == {"MPI_Waitany -> MPI_Wait": 1,
                                      "MPI_Sendrecv_replace -> MPI_Sendrecv": 1, "flush -> dropped": 1}
    assert t.comms == {0: [0, 1]} and t.hosts == {0: "node", 1: "node"}


def test_times_are_shifted_by_the_interpolated_offset(tmp_path):
    """Is each local time moved by the offset interpolated between the Init and Finalize syncs?"""
    # rank 1 is 1000 ns behind rank 0 at local time 0 and 2000 ns behind at local time 4000
    two_rank_run(tmp_path, sync_init=(0, 1000, 0), sync_final=(4000, 2000, 0))
    ev = load_dir(tmp_path).events
    r1 = ev[ev["rank"] == 1].set_index("seq")
    # offset(t) = 1000 + 1000 * t / 4000, held at 2000 after t = 4000
    assert r1.loc[1, "t_enter"] == 200 + 1050
    assert r1.loc[2, "t_exit"] == 2000 + 1500
    assert r1.loc[5, "t_enter"] == 5000 + 2000
    r0 = ev[ev["rank"] == 0].set_index("seq")
    assert r0.loc[2, "t_enter"] == 1000  # rank 0 is the reference


@pytest.mark.parametrize("offset, rtt, least", [(0, 0, 0), (25, 50, 0), (-25, 50, 0), (26, 51, 0),
                                                (-25, 51, 0), (1000, 50, 975), (-1000, 50, -975), (-26, 51, -1)])
def test_offsets_within_half_a_round_trip_are_no_correction(offset, rtt, least):
    """Is an offset the round trip cannot tell from zero (a shared clock) left at zero, and a
    larger one shrunk by what the round trip allows?"""
    assert least_offset(offset, rtt) == least


def test_ranks_sharing_a_clock_are_not_shifted(tmp_path):
    """A slow sync round trip on one machine gives a nonzero estimate: are the times still raw?"""
    two_rank_run(tmp_path, sync_init=(0, 300, 800), sync_final=(4000, -350, 900))
    ev = load_dir(tmp_path).events
    r1 = ev[ev["rank"] == 1].set_index("seq")
    assert r1.loc[1, "t_enter"] == 200 and r1.loc[5, "t_enter"] == 5000


def test_receive_ending_before_its_send_is_a_clock_violation(tmp_path):
    """Is a receive that completes before its send began (bad offsets) counted in meta?"""
    two_rank_run(tmp_path, sync_init=(0, -5000, 50))  # pushes rank 1 far into the past
    t = load_dir(tmp_path)
    assert t.meta["clock_violations"] == 1
    assert "rank 1 seq 1 (MPI_Irecv)" in t.meta["clock_violation_examples"][0]
    two_rank_run(tmp_path / "ok")
    assert load_dir(tmp_path / "ok").meta["clock_violations"] == 0


def test_truncated_file_names_file_and_record(tmp_path):
    """Does a file cut mid-record raise an error naming it, and strict=False load the rest?"""
    two_rank_run(tmp_path)
    path = tmp_path / "rank-000001.mpit"
    data = path.read_bytes()
    path.write_bytes(data[:-30])  # cuts the Finalize record
    with pytest.raises(HpclabError, match=r"rank-000001\.mpit \(rank 1\) is truncated: record"):
        load_dir(tmp_path)
    t = load_dir(tmp_path, strict=False)
    assert len(t.meta["problems"]) == 2  # cut record, and fewer records than the header says
    assert (t.events["rank"] == 1).sum() == 4  # Init, Irecv, Wait, Sendrecv


def test_event_cut_off_from_its_completions_is_dropped(tmp_path):
    """Is an event whose completion records were lost dropped, with the loss reported?"""
    two_rank_run(tmp_path)
    path = tmp_path / "rank-000001.mpit"
    data = path.read_bytes()
    keep = 512 + 56 * (2 + 3)  # comm def (2), Init, Irecv, Waitany: its completion is gone
    path.write_bytes(data[:keep])
    t = load_dir(tmp_path, strict=False)
    assert any("lost 1 of its completion records" in p for p in t.meta["problems"])
    r1 = t.events[t.events["rank"] == 1]
    assert list(r1["call"]) == ["MPI_Init", "MPI_Irecv"]
    assert r1["peer"].iloc[1] == -1  # posted for any source, never completed


def test_foreign_file_is_rejected_by_name(tmp_path):
    """Does a file that is not an mpitrace file give an error naming that file?"""
    two_rank_run(tmp_path)
    (tmp_path / "rank-000001.mpit").write_bytes(b"\x7fELF" + bytes(600))
    with pytest.raises(HpclabError, match=r"rank-000001\.mpit does not start with MPITRACE"):
        load_dir(tmp_path)
    t = load_dir(tmp_path, strict=False)
    assert set(t.events["rank"]) == {0}


def test_missing_rank_file_is_named(tmp_path):
    """Does a folder without one rank's file say which rank is missing?"""
    two_rank_run(tmp_path)
    (tmp_path / "rank-000000.mpit").unlink()
    with pytest.raises(HpclabError, match=r"file of rank 0 \(rank-000000\.mpit\) is missing"):
        load_dir(tmp_path)
    t = load_dir(tmp_path, strict=False)
    assert set(t.events["rank"]) == {1} and len(t.meta["problems"]) == 1


def test_unclosed_file_is_a_crash(tmp_path):
    """Is a file whose header was never closed reported as a crashed rank?"""
    two_rank_run(tmp_path, flags=0)
    with pytest.raises(HpclabError, match="rank 1.*was not closed"):
        load_dir(tmp_path)
    assert load_dir(tmp_path, strict=False).meta["finalized"] == {0: True, 1: False}


def test_empty_or_absent_folder_says_what_to_run(tmp_path):
    """Do an empty folder, a missing folder and a run without trace/ raise clear errors?"""
    with pytest.raises(HpclabError, match="no trace files"):
        load_dir(tmp_path)
    with pytest.raises(HpclabError, match="does not exist"):
        load_dir(tmp_path / "nope")
    with pytest.raises(HpclabError, match="has no trace/ folder"):
        load_run(tmp_path)


def test_load_run_reads_the_trace_folder(tmp_path):
    """Does load_run find <run_dir>/trace and note the run folder?"""
    two_rank_run(tmp_path / "trace")
    t = load_run(tmp_path)
    assert t.meta["run_dir"] == str(tmp_path) and len(t.events) == 10


def test_parquet_cache_gives_the_same_table(tmp_path):
    """Does the Parquet cache give back the same events and side tables?"""
    two_rank_run(tmp_path)
    first = load_dir(tmp_path, cache=True)
    assert (tmp_path / load.CACHE_NAME).exists()
    again = load_dir(tmp_path)
    assert again.meta.get("cached") is True
    assert again.events.equals(first.events)
    assert again.comms == first.comms and again.hosts == first.hosts


def write_v2(folder: Path, rank: int, size: int, records: list[tuple], cpu: list[tuple]):
    """A format version 2 file: the version 1 records with CPU times (enter, exit) appended."""
    folder.mkdir(parents=True, exist_ok=True)
    h = header(rank, size, nrecords=len(records))
    h["version"], h["record_size"], h["cpu_clock_id"], h["cpu_interval"] = 2, 72, 3, 100_000
    arr = np.array([r + c for r, c in zip(records, cpu)], dtype=RECORD)
    (folder / f"rank-{rank:06d}.mpit").write_bytes(h.tobytes() + arr.tobytes())


def test_cpu_times_load_per_event_and_old_traces_load_without_them(tmp_path):
    """Does a version 2 file give each event its CPU times at entry and exit, and does a
    version 1 file (no CPU times) still load, with -1 and a note saying why?"""
    recs = [rec("MPI_Init", 0, 0, 100), rec("MPI_Barrier", 1, 5000, 5200, comm=0),
            rec("MPI_Finalize", 2, 9000, 9100)]
    cpu = [(10, 110), (2010, 2210), (6010, 6110)]  # switched out 3000 ns in the first burst
    write_v2(tmp_path / "v2", 0, 1, recs, cpu)
    t = load_dir(tmp_path / "v2")
    assert t.events[["cpu_enter", "cpu_exit"]].values.tolist() == [list(c) for c in cpu]
    assert t.meta["cpu_time"] and t.meta["format_versions"] == [2]
    assert t.meta["cpu_interval_ns"] == 100_000 and t.meta["cpu_time_note"] == ""
    from hpclab.trace.split import rank_times
    rt = rank_times(t)
    assert rt[["comp_ns", "comp_wall_ns", "off_cpu_ns", "not_running_ns"]].values.tolist() == \
        [[5700, 8700, 3000, 3000]]

    write_rank(tmp_path / "v1", 0, 1, recs)
    old = load_dir(tmp_path / "v1")
    assert (old.events[["cpu_enter", "cpu_exit"]] == -1).all().all()
    assert not old.meta["cpu_time"] and "format version 1" in old.meta["cpu_time_note"]
    assert old.meta["problems"] == []
    assert rank_times(old)[["comp_ns", "off_cpu_ns"]].values.tolist() == [[8700, 0]]
