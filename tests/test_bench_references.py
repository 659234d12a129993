"""The parsers bench/references.py uses to read the reference benchmarks' output."""

import re
from pathlib import Path

import pytest

from bench.references import latency_and_4mib, latency_and_bandwidth, parse_imb_pingpong, parse_stream_reference
from hpclab.core.errors import HpclabError

DATA = Path(__file__).parent / "data" / "references"


def test_stream_reference_triad_from_a_real_run():
    # captured from STREAM 5.10 built with the kernels' compile line on this machine
    text = (DATA / "stream-5.10-1thread.txt").read_text()
    expected = float(re.search(r"^Triad:\s+(\S+)", text, re.M).group(1))
    assert parse_stream_reference(text) == expected > 0


def test_stream_reference_that_did_not_validate_is_refused():
    text = (DATA / "stream-5.10-1thread.txt").read_text().replace("Solution Validates", "Failed")
    with pytest.raises(HpclabError, match="did not validate"):
        parse_stream_reference(text)


def test_stream_reference_without_triad_is_refused():
    with pytest.raises(HpclabError, match="Triad"):
        parse_stream_reference("Solution Validates\n")


# IMB-MPI1's table layout (header comments, then one row per size); the numbers are arbitrary.
IMB_SHAPED = """\
#----------------------------------------------------------------
# Benchmarking PingPong
# #processes = 2
#----------------------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            0         1000         2.00         0.00
            1         1000         2.00         0.50
      1000000           10       100.00     10000.00
      2000000           10       400.00      5000.00

#----------------------------------------------------------------
# Benchmarking PingPing
       #bytes #repetitions      t[usec]   Mbytes/sec
            0         1000         9.00         0.00
"""


def test_imb_pingpong_table_stops_at_the_next_benchmark():
    rows = parse_imb_pingpong(IMB_SHAPED)
    assert [r["bytes"] for r in rows] == [0, 1, 1000000, 2000000]
    # latency is t(0 B); bandwidth the peak of bytes / t in 10^6 B/s, whatever IMB calls a Mbyte
    assert latency_and_bandwidth(rows) == (2.0, 10000.0)


def test_output_without_pingpong_is_refused():
    with pytest.raises(HpclabError, match="no PingPong table"):
        parse_imb_pingpong("# Benchmarking Barrier\n")


def test_the_4_mib_message_is_read_beside_latency_and_peak():
    rows = parse_imb_pingpong(IMB_SHAPED) + [{"bytes": 4 << 20, "repetitions": 10, "t_usec": 419.4304}]
    latency, four_mib, peak = latency_and_4mib(rows)
    assert latency == 2.0 and four_mib == pytest.approx(10000.0) and peak == pytest.approx(10000.0)
    with pytest.raises(HpclabError, match="no 4 MiB message"):
        latency_and_4mib(parse_imb_pingpong(IMB_SHAPED))
