"""The 1g link between virtual nodes holds its rate: a sustained transfer runs within 10 % of 125 MB/s.

The link is shaped by tc tbf with a 1 ms token bucket (hpclab/cluster/links.yaml). A ping-pong finds
the bucket full before each message, so a message's first 125 kB pass unshaped and small messages
show more than the rate; only messages of many buckets measure the link (docs/virtual-nodes.md).
These tests start a real two-node cluster and put the single-node cluster back at the end, like
tests/test_vnodes.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.analysis import transports
from hpclab.cluster import links, local, vnodes
from hpclab.analysis.fits import hockney_fit

PINGPONG = paths.bin_dir() / "pingpong"
LINK = "1g"
LARGEST = 16 << 20  # bytes: 128 token buckets of the 1g profile


@pytest.fixture(scope="module")
def two_nodes_1g(cluster):
    """Two 1-CPU virtual nodes joined by the 1g link; the single-node cluster comes back after."""
    vnodes.down()
    report = vnodes.up(nodes=2, cpus_per_node=1, link=LINK)
    yield report
    vnodes.down()
    local.up()


@pytest.fixture
def scratch():
    """A folder both nodes can see (below build/: every node has a private /tmp)."""
    root = paths.build_dir() / "test-link-rate"
    root.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(dir=root))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _across(scratch: Path) -> list[dict]:
    out = scratch / "across.json"
    argv = ["srun", "--mpi=pmix", "-N2", "-n2", "--ntasks-per-node=1", str(PINGPONG),
            "--max-bytes", str(LARGEST), "--json", str(out)]
    r = subprocess.run(argv, cwd=scratch, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{' '.join(argv)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert "tcp" in report["results"]["transport"]["btl"], "the two ranks must talk over the link"
    return report["results"]["rows"]


@pytest.mark.cluster
@pytest.mark.slow
def test_sustained_1g_rate_is_within_10_percent(two_nodes_1g, scratch):
    """Between two nodes on the 1g link: does the largest message (16 MiB, 128 buckets) move at
    125 MB/s within 10 %, and does a Hockney line fitted only to bucket-free sizes give the same
    rate, with a latency that is not negative?"""
    if not PINGPONG.exists():
        pytest.skip("build/bin/pingpong is not built: run 'make -C src'")
    assert f"link '{LINK}': rate" in two_nodes_1g.client_config
    rate = links.get_profile(LINK).rate_bytes_per_s / 1e6  # MB/s
    rows = _across(scratch)
    top = max(rows, key=lambda r: r["bytes"])
    assert top["bytes"] == LARGEST
    assert 0.9 * rate <= top["mbytes_per_sec"] <= 1.1 * rate, \
        f"sustained {top['mbytes_per_sec']:.1f} MB/s on a {rate:g} MB/s link"
    lo = transports.bucket_free_size(LINK)
    fit = hockney_fit([r["bytes"] for r in rows], [r["t_usec"] for r in rows], size_range=(lo, LARGEST))
    assert 0.9 * rate <= fit.bandwidth_mb_s <= 1.1 * rate, \
        f"fitted {fit.bandwidth_mb_s:.1f} MB/s over {lo}..{LARGEST} bytes on a {rate:g} MB/s link"
    assert fit.latency_us >= 0
