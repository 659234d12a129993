"""The room's servers weigh more than a job's tasks when they share a core (hpclab/classroom/limits.py,
ROOM_WEIGHT_V1/V2): a student starting a kernel gets most of a core that Slurm's jobs also want.
Real cgroups, two busy processes pinned to one core, the CPU time each got; skipped where this
machine has no writable cgroup hierarchy."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from hpclab.classroom import limits

USER = "hpclab-test-weight"   # not a student: a cgroup of this test's own, removed at the end
SPIN = "import time\nt = time.monotonic() + {s}\nwhile time.monotonic() < t: pass\n"


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime


def _spinner(seconds: float, cgroup=None) -> subprocess.Popen:
    enter = (lambda: cgroup.enter()) if cgroup is not None else None
    return subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", SPIN.format(s=seconds)],
                            preexec_fn=enter)


def test_a_server_outweighs_a_job_task_on_a_shared_core():
    if limits.mode() == "none" or os.geteuid() != 0:
        pytest.skip("no writable cgroup hierarchy here: " + limits.describe())
    parents_before = {d.parent: d.parent.exists() for d in limits.cgroup(USER).dirs}
    cg = limits.create(USER, mem_bytes=1 << 30, cpus=1.0)
    try:
        weight = "cpu.shares" if cg.version == "v1" else "cpu.weight"
        parent = next(d.parent for d in cg.dirs if (d.parent / weight).exists())
        expected = limits.ROOM_WEIGHT_V1 if cg.version == "v1" else limits.ROOM_WEIGHT_V2
        assert int((parent / weight).read_text()) == expected
        outside, inside = _spinner(3.0), _spinner(3.0, cg)
        time.sleep(2.0)
        got = {"inside": _cpu_seconds(inside.pid), "outside": _cpu_seconds(outside.pid)}
        for p in (outside, inside):
            p.wait(timeout=30)
        # equal weights would share the core about evenly; 8x gives the room about 8 of 9 parts
        assert got["inside"] > 2 * got["outside"], got
    finally:
        cg.remove()
        for parent, existed in parents_before.items():
            if not existed:
                try:
                    parent.rmdir()
                except OSError:
                    pass
