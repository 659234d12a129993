"""One read path for a kernel's results (issue 27): only hpclab/runs/ and hpclab/kernels/ look
inside a report's `results`; everything above asks the kernel modules' accessors, tested here on
small hand-written reports."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from hpclab.core.errors import HpclabError
from hpclab.kernels import pingpong, poisson, stream

PACKAGE = Path(__file__).resolve().parent.parent / "hpclab"
# the floors that own a report's layout: the run folder and the kernels' own parsers
OWNERS = ("runs", "kernels")


def _results_subscripts(path: Path) -> list[int]:
    # The syntax tree, not the text: a hint that names report['results'] in words is no read.
    tree = ast.parse(path.read_text(), filename=str(path))
    def reads_results(node) -> bool:
        if isinstance(node, ast.Subscript):   # doc["results"]
            return isinstance(node.slice, ast.Constant) and node.slice.value == "results"
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)   # doc.get("results")
                and node.func.attr == "get" and bool(node.args) and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "results")

    return [node.lineno for node in ast.walk(tree) if reads_results(node)]


def test_no_module_outside_runs_and_kernels_indexes_results():
    """Does any module above the kernels floor read doc["results"] itself instead of an accessor?"""
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if path.relative_to(PACKAGE).parts[0] not in OWNERS
             for line in _results_subscripts(path)]
    assert not found, ("these lines index a kernel report's results; use the accessors of "
                       "hpclab/kernels/<kernel>.py instead:\n  " + "\n  ".join(found))


def test_the_scan_sees_both_quote_styles(tmp_path):
    """Does the scan catch ["results"] and ['results'] but not the word inside a message?"""
    probe = tmp_path / "probe.py"
    probe.write_text('a = doc["results"]\nb = doc[\'results\']["x"]\nc = "pass report[\'results\']"\n')
    assert _results_subscripts(probe) == [1, 2]


# --- hand-written reports: only the keys the accessors read ------------------------------------

def stream_doc() -> dict:
    return {"kernel": "stream", "results": {
        "bytes_per_array": 8_000_000,
        "kernels": {"Copy": {"best_mb_s": 9000.0}, "Triad": {"best_mb_s": 10_500.5}},
        "per_rank": [{"rank": 0, "Triad": 5000.0}, {"rank": 1, "Triad": 5250}]}}


def poisson_doc() -> dict:
    timers = {"copy": 0.1, "red": 0.2, "black": 0.3, "residuum": 0.4}
    return {"kernel": "poisson", "results": {
        "n": 256, "iterations": 10, "wall_time": 1.25,
        "per_rank": [{"rank": 0, "compute": timers, "mpi": {"halo": 0.05}}]}}


def pingpong_doc() -> dict:
    return {"kernel": "pingpong", "results": {
        "rows": [{"bytes": 0, "t_usec": 1.5}, {"bytes": 8, "t_usec": 1.6}],
        "transport": {"pml": "ob1", "requested": {"pml": "ob1", "btl": "self,vader"}}}}


def test_stream_accessors_read_the_reported_numbers():
    """Do the STREAM accessors give the job's rates, the ranks' sum and the array size?"""
    doc = stream_doc()
    assert set(stream.kernel_rates(doc)) == {"Copy", "Triad"}
    assert stream.best_rate(doc, "Triad") == 10_500.5
    assert isinstance(stream.best_rate(doc, "Copy"), float)
    assert stream.rank_sum_rate(doc, "Triad") == 10_250.0
    assert stream.bytes_per_array(doc) == 8_000_000


def test_stream_rank_sum_is_nan_without_per_rank_rates():
    """Does a report without per-rank rates give NaN for their sum, not an error?"""
    doc = stream_doc()
    del doc["results"]["per_rank"]
    assert math.isnan(stream.rank_sum_rate(doc, "Triad"))


@pytest.mark.parametrize("ask, words", [
    (lambda d: stream.best_rate(d, "Scale"), "missing key 'Scale' in results.kernels"),
    (lambda d: stream.rank_sum_rate(d, "Copy"), "missing key 'Copy' in results.per_rank[0]"),
])
def test_stream_accessors_name_what_is_missing(ask, words):
    """Does asking for a function the report lacks say which key is missing, as an HpclabError?"""
    with pytest.raises(HpclabError, match=words.replace("[", r"\[").replace("]", r"\]")):
        ask(stream_doc())


def test_stream_accessors_without_results_or_bytes():
    """Do a report without results, or without the array size, give an HpclabError with a hint?"""
    with pytest.raises(HpclabError, match="missing key 'results'") as err:
        stream.kernel_rates({"kernel": "stream"})
    assert err.value.hint
    doc = stream_doc()
    del doc["results"]["bytes_per_array"]
    with pytest.raises(HpclabError, match="missing key 'bytes_per_array' in results"):
        stream.bytes_per_array(doc)


def test_an_accessor_refuses_another_kernels_report():
    """Does a pingpong report handed to a STREAM accessor say which kernel it is from?"""
    with pytest.raises(HpclabError, match="this is a pingpong report, not stream"):
        stream.best_rate(pingpong_doc(), "Triad")


def test_poisson_accessors_read_the_reported_numbers():
    """Do the Poisson accessors give the results, wall time, per-rank timers and grid shape?"""
    doc = poisson_doc()
    assert poisson.measures(doc)["iterations"] == 10
    assert poisson.wall_time(doc) == 1.25
    assert [r["rank"] for r in poisson.per_rank(doc)] == [0]
    assert poisson.rank_compute(doc, 0)["black"] == 0.3
    assert poisson.subdomain_shape(doc) == (256, 256)
    doc["results"]["shape"] = [512, 128]
    assert poisson.subdomain_shape(doc) == (512, 128)


def test_poisson_accessors_name_what_is_missing():
    """Do missing timers, a missing rank or a missing wall time give an HpclabError, not KeyError?"""
    doc = poisson_doc()
    with pytest.raises(HpclabError, match="no entry 3"):
        poisson.rank_compute(doc, 3)
    del doc["results"]["per_rank"][0]["compute"]
    with pytest.raises(HpclabError, match=r"missing key 'compute' in results\.per_rank\[0\]"):
        poisson.rank_compute(doc, 0)
    del doc["results"]["wall_time"], doc["results"]["per_rank"], doc["results"]["n"]
    with pytest.raises(HpclabError, match="missing key 'wall_time' in results"):
        poisson.wall_time(doc)
    with pytest.raises(HpclabError, match="missing key 'per_rank' in results"):
        poisson.per_rank(doc)
    with pytest.raises(HpclabError, match="missing key 'n' in results"):
        poisson.subdomain_shape(doc)
    with pytest.raises(HpclabError, match="missing key 'results'"):
        poisson.measures({"kernel": "poisson"})


def test_pingpong_accessors_read_the_report_itself():
    """Are the rows the report's own dicts (so the grading demo can forge them in place), and
    the requested transport what the job asked for?"""
    doc = pingpong_doc()
    pingpong.message_rows(doc)[1]["t_usec"] *= 2
    assert doc["results"]["rows"][1]["t_usec"] == 3.2
    assert pingpong.requested_transport(doc) == {"pml": "ob1", "btl": "self,vader"}


def test_pingpong_accessors_without_rows_or_transport():
    """Does a report without rows fail with an HpclabError, and one without the requested
    transport (older reports) give {}?"""
    doc = pingpong_doc()
    del doc["results"]["rows"], doc["results"]["transport"]
    with pytest.raises(HpclabError, match="missing key 'rows' in results"):
        pingpong.message_rows(doc, source="run/result.json")
    assert pingpong.requested_transport(doc) == {}
    with pytest.raises(HpclabError, match="^run/result.json: missing key 'results'"):
        pingpong.requested_transport({"kernel": "pingpong"}, source="run/result.json")
