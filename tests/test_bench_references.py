"""The parsers bench/references.py uses to read the reference benchmarks' output, and how it judges a goal."""

import re
from pathlib import Path

import pytest

from bench.references import (judge, judge_within, latency_and_4mib, latency_and_bandwidth, parse_imb_collective,
                              parse_imb_pingpong, parse_stream_reference, verdict)
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


# Judging a goal on paired runs: the ratio's 95 % CI decides, not the ratio of medians.
TRIAD_REF = [10000.0, 10100.0, 9900.0, 10050.0, 9950.0, 10000.0]  # MB/s, six paired runs


def test_a_goal_is_met_only_when_the_whole_interval_is_on_its_good_side():
    """Ours within 1 % of the reference, goal >= 0.98: 'meets', since even the CI's low end clears it?"""
    ours = [v * f for v, f in zip(TRIAD_REF, [0.995, 1.0, 1.01, 0.99, 1.0, 1.005])]
    j = judge(ours, TRIAD_REF, 0.98, higher_is_better=True)
    assert j["verdict"] == "meets" and j["lo"] >= 0.98 and j["runs"] == 6
    assert verdict(j).startswith(f"{j['estimate']:.3f}, CI ") and verdict(j).endswith(": meets, goal >= 0.98")


def test_a_goal_is_missed_only_when_the_whole_interval_is_on_its_bad_side():
    """Latency 10 % above the reference's in every pair, goal <= 1.05: 'misses'?"""
    ref = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95]  # us
    j = judge([1.1 * v * f for v, f in zip(ref, [1.0, 1.01, 0.99, 1.0, 1.02, 0.98])], ref, 1.05, higher_is_better=False)
    assert j["verdict"] == "misses" and j["lo"] > 1.05


def test_a_ratio_whose_interval_straddles_the_goal_cannot_be_judged():
    """Ratio of medians just above 0.98 but noisy pairs, and 5 runs (which cannot reach 95 %):
    'cannot tell with N runs', never 'meets'?"""
    ours = [v * f for v, f in zip(TRIAD_REF, [0.90, 1.05, 0.99, 1.08, 0.93, 1.0])]
    assert judge(ours, TRIAD_REF, 0.98, higher_is_better=True)["verdict"] == "cannot tell with 6 runs"
    assert judge(TRIAD_REF[:5], TRIAD_REF[:5], 0.98, higher_is_better=True)["verdict"] == \
        "cannot tell with 5 runs (6 needed)"


# IMB-MPI1's collective tables (t_min, t_max, t_avg per size); the numbers are arbitrary.
IMB_COLLECTIVES = """\
#----------------------------------------------------------------
# Benchmarking Allreduce
# #processes = 2
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            8         1000         1.00         1.50         1.25
      1048576           40       900.00      1000.00       950.00

#----------------------------------------------------------------
# Benchmarking Bcast
# #processes = 2
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            8         1000         0.50         0.70         0.60
"""


def test_imb_collective_tables_are_read_by_name_and_their_t_max_taken():
    """Is each collective's table read by its name, its t_max column taken, and a missing one refused?"""
    assert parse_imb_collective(IMB_COLLECTIVES, "Allreduce") == {8: 1.5, 1048576: 1000.0}
    assert parse_imb_collective(IMB_COLLECTIVES, "Bcast") == {8: 0.7}
    with pytest.raises(HpclabError, match="no Alltoall table"):
        parse_imb_collective(IMB_COLLECTIVES, "Alltoall")


def test_parity_with_imb_is_a_band_either_side():
    """Within 1 % of IMB in six paired runs: 'meets' the 5 % band; 10 % above or below it in every
    pair: 'misses' either way; and the cell says the band?"""
    ref = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]
    near = [v * f for v, f in zip(ref, [0.995, 1.0, 1.01, 0.99, 1.0, 1.005])]
    j = judge_within(near, ref)
    assert j["verdict"] == "meets" and verdict(j).endswith(": meets, goal 0.952-1.05")
    for factor in (1.1, 0.9):
        assert judge_within([factor * v for v in ref], ref)["verdict"] == "misses"
