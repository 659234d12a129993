"""Tests for hpclab.kernels' parsers and hpclab.runs.parse: every parser on real outputs, truncated outputs and garbage.

tests/data/runs/<name>/ are run folders captured on the course machine by tests/data/capture.sh
(result.json, stdout, stderr, provenance/lstopo-<host>.xml); tests/data/*_bindings*.txt and
srun_cpu_bind_*.txt are launcher outputs captured the same way.
"""

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpclab.core.errors import HpclabError
from hpclab.kernels.contract import load_result, parse_report_text, parse_result_json
from hpclab.kernels.pingpong import parse_pingpong_text, pingpong_table, transport_label
from hpclab.kernels.poisson import poisson_table
from hpclab.kernels.stream import stream_tables
from hpclab.runs.parse import parse_bindings, parse_run, read_bindings, run_provenance, run_topology
from tests.kernel_text import parse_poisson_text, parse_stream_text

DATA = Path(__file__).parent / "data"
RUNS = DATA / "runs"
ALL_RUNS = sorted(p.name for p in RUNS.iterdir() if p.is_dir())
# a run captured for its JSON only (collectives-forced-openmpi-system: the lesson's test reads its
# result.json) has no stdout; the text parsers are checked on the others
TEXT_RUNS = [n for n in ALL_RUNS if (RUNS / n / "stdout").exists()]
TEXT_PARSERS = {"pingpong": parse_pingpong_text, "stream": parse_stream_text,
                "poisson": parse_poisson_text}


def kernel_of(name: str) -> str:
    return name.split("-")[0]


def runs_of(kernel: str) -> list[str]:
    return [n for n in ALL_RUNS if kernel_of(n) == kernel]


def test_captured_runs_cover_every_kernel():
    """Is there at least one real run folder per kernel (else re-run tests/data/capture.sh)?"""
    assert {kernel_of(n) for n in ALL_RUNS} == {"pingpong", "stream", "poisson", "collectives"}


# ----------------------------------------------------------------------------------------------
# JSON reports
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_RUNS)
def test_json_reports_follow_the_contract(name):
    """Does every captured result.json pass the contract check for its kernel?"""
    doc = load_result(RUNS / name / "result.json", kernel=kernel_of(name))
    assert doc["contract"] == 1 and doc["validation"]["ok"]
    assert len(doc["placement"]) == doc["config"]["ranks"]


def test_json_of_another_kernel_is_refused():
    """Does asking for a stream report in a pingpong file fail and name the right parser?"""
    with pytest.raises(HpclabError, match="this is a pingpong report, not stream"):
        load_result(RUNS / runs_of("pingpong")[0] / "result.json", kernel="stream")


def test_json_of_another_contract_is_refused():
    """Does a report with contract 2 fail instead of being misread?"""
    doc = json.loads((RUNS / runs_of("stream")[0] / "result.json").read_text())
    doc["contract"] = 2
    with pytest.raises(HpclabError, match="contract 2 is not supported"):
        parse_result_json(json.dumps(doc), source="r.json")


@settings(max_examples=40, deadline=None)
@given(fraction=st.floats(0.0, 0.999))
def test_truncated_json_names_file_and_line(fraction):
    """Does a JSON report cut anywhere fail with the file name and a line number?"""
    text = (RUNS / runs_of("pingpong")[0] / "result.json").read_text()
    cut = text[: int(len(text.rstrip()) * fraction)]
    with pytest.raises(HpclabError, match=r"^cut.json:\d+: the file (is empty|is not valid JSON)"):
        parse_result_json(cut, source="cut.json")


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d["results"]["rows"][1].pop("t_usec"), r"missing key 't_usec' in results.rows\[1\]"),
    (lambda d: d["results"]["rows"][0].update(bytes="8"), r"results.rows\[0\].bytes should be int"),
    (lambda d: d.pop("placement"), "missing key 'placement'"),
    (lambda d: d["validation"].update(ok="yes"), "validation.ok should be bool"),
])
def test_malformed_json_names_the_key(mutate, message):
    """Does a structurally wrong report name the file and the JSON path of the problem?"""
    doc = json.loads((RUNS / runs_of("pingpong")[0] / "result.json").read_text())
    mutate(doc)
    with pytest.raises(HpclabError, match=f"^bad.json: {message}"):
        pingpong_table(parse_result_json(json.dumps(doc), source="bad.json"), source="bad.json")


# ----------------------------------------------------------------------------------------------
# Text reports agree with JSON reports
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TEXT_RUNS)
def test_text_header_matches_json(name):
    """Do the arguments, config and placement read from stdout equal those in result.json?"""
    doc = load_result(RUNS / name / "result.json")
    report = parse_report_text((RUNS / name / "stdout").read_text(), kernel=kernel_of(name))
    assert report.arguments == doc["arguments"]
    assert report.ok == doc["validation"]["ok"]
    for key, value in doc["config"].items():
        if isinstance(value, float):
            assert report.config[key] == pytest.approx(value, rel=1e-5)
        else:
            assert report.config[key] == value, key
    ranks = report.placement[report.placement["thread"].isna()]
    assert ranks["cpu"].tolist() == [p["cpu"] for p in doc["placement"]]
    assert ranks["allowed"].tolist() == [p["allowed"] for p in doc["placement"]]
    threads = report.placement[report.placement["thread"].notna()]
    assert threads["cpu"].tolist() == [t["cpu"] for p in doc["placement"] for t in p["threads"]]


@pytest.mark.parametrize("name", runs_of("pingpong"))
def test_pingpong_text_table_matches_json(name):
    """Does the pingpong text table give the JSON rows to the 2 decimals it prints?"""
    text = parse_pingpong_text((RUNS / name / "stdout").read_text())
    js = pingpong_table(load_result(RUNS / name / "result.json"))
    assert text["bytes"].tolist() == js["bytes"].tolist()
    assert text["repetitions"].tolist() == js["repetitions"].tolist()
    assert (abs(text["t_usec"] - js["t_usec"]) <= 0.005 + 1e-9).all()
    assert (text["transport"] == js["transport"]).all()


@pytest.mark.parametrize("name", runs_of("stream"))
def test_stream_text_tables_match_json(name):
    """Do the STREAM text tables give the JSON per-rank and whole-job rates (to 0.1 MB/s)?"""
    text = parse_stream_text((RUNS / name / "stdout").read_text())
    per_rank, kernels = stream_tables(load_result(RUNS / name / "result.json"))
    assert (abs(text["mb_s"].to_numpy() - per_rank["mb_s"].to_numpy()) <= 0.05 + 1e-6).all()
    assert text["thread_cpus"].tolist() == per_rank["thread_cpus"].tolist()
    best = pd.DataFrame(text.attrs["kernels"])["best_mb_s"].to_numpy()
    assert (abs(best - kernels["best_mb_s"].to_numpy()) <= 0.05 + 1e-6).all()


@pytest.mark.parametrize("name", runs_of("poisson"))
def test_poisson_text_timers_match_json(name):
    """Do the Poisson text timers give the JSON timers to the 0.1 ms printed?"""
    text = parse_poisson_text((RUNS / name / "stdout").read_text())
    js = poisson_table(load_result(RUNS / name / "result.json"))
    merged = text.merge(js, on=["rank", "phase"], suffixes=("_text", "_json"))
    assert len(merged) == len(js) == len(text)
    assert (abs(merged["seconds_text"] - merged["seconds_json"]) <= 5e-5 + 1e-9).all()
    assert (merged["kind_text"] == merged["kind_json"]).all()
    assert text.attrs["summary"]["iterations"] == js.attrs["summary"]["iterations"]


# ----------------------------------------------------------------------------------------------
# Properties of the tidy tables that hold for any run
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", runs_of("pingpong"))
def test_pingpong_rates_are_bytes_over_time(name):
    """Is Mbytes/sec = bytes / t[usec] (MB = 10^6 B) for every row with bytes > 0?"""
    t = pingpong_table(load_result(RUNS / name / "result.json"))
    rows = t[t["bytes"] > 0]
    rate = (rows["bytes"] / rows["t_usec"]).to_numpy()
    assert rate == pytest.approx(rows["mbytes_per_sec"].to_numpy(), rel=1e-9)
    assert t["bytes"].is_monotonic_increasing


@pytest.mark.parametrize("name", runs_of("pingpong"))
def test_transport_text_line_matches_json(name):
    """Does the key = value transport report name the same PML/BTL/MTL as the JSON?"""
    doc = load_result(RUNS / name / "result.json")
    tr = doc["results"]["transport"]
    report = parse_report_text((RUNS / name / "stdout").read_text())
    assert report.config["pml"] == tr["pml"]
    assert report.config["btl"].split(",") == tr["btl"]
    assert report.config["mtl"] == tr["mtl"]
    # the capture asked for btl self,<name> (pingpong-vader, pingpong-tcp): that one carried it
    wanted = name.split("-")[1]
    assert pingpong_table(doc)["transport"].iloc[0] == f"ob1/{wanted}"


@pytest.mark.parametrize("pml,btl,mtl,label", [
    ("ob1", ["self", "vader"], None, "ob1/vader"), ("ob1", "self,tcp", None, "ob1/tcp"),
    ("ob1", ["self"], None, "ob1/self"), ("cm", [], "psm2", "cm/psm2"), ("ucx", [], None, "ucx"),
    (None, [], None, "unknown"),
])
def test_transport_labels(pml, btl, mtl, label):
    """Is the path of a message named by PML and the BTL or MTL that reaches the peer?"""
    assert transport_label(pml, btl, mtl) == label


@pytest.mark.parametrize("name", runs_of("stream"))
def test_stream_aggregate_is_sum_of_ranks(name):
    """Does the per-rank table sum to the report's aggregate for every function?"""
    doc = load_result(RUNS / name / "result.json")
    per_rank, _ = stream_tables(doc)
    sums = per_rank.groupby("function")["mb_s"].sum()
    for function, value in doc["results"]["aggregate"].items():
        assert sums[function] == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("name", runs_of("poisson"))
def test_poisson_phases_fit_inside_rank_total(name):
    """Are timers compute or mpi only, and does each rank's phase sum stay within its total?"""
    t = poisson_table(load_result(RUNS / name / "result.json"))
    assert set(t["kind"]) == {"compute", "mpi"}
    per_rank = t.groupby("rank").agg(phases=("seconds", "sum"), total=("rank_total", "first"))
    assert (per_rank["phases"] <= per_rank["total"] * (1 + 1e-9) + 1e-9).all()


# ----------------------------------------------------------------------------------------------
# Truncated and garbled text
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [runs_of(k)[0] for k in TEXT_PARSERS])
def test_every_line_truncation_fails_with_file_and_line(name):
    """Does a stdout cut after any complete line (short of the end) fail with file:line?"""
    parse = TEXT_PARSERS[kernel_of(name)]
    lines = (RUNS / name / "stdout").read_text().splitlines(keepends=True)
    for keep in range(1, len(lines)):
        with pytest.raises(HpclabError, match=r"^out.txt:\d+: "):
            parse("".join(lines[:keep]), source="out.txt")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_truncation_inside_a_line_never_misreads_earlier_rows(data):
    """Cut anywhere: does parsing fail with file:line, or keep every row but the last intact?"""
    name = data.draw(st.sampled_from([runs_of(k)[0] for k in TEXT_PARSERS]))
    parse = TEXT_PARSERS[kernel_of(name)]
    text = (RUNS / name / "stdout").read_text()
    full = parse(text)
    cut = data.draw(st.integers(0, len(text) - 1))
    try:
        part = parse(text[:cut], source="cut.txt")
    except HpclabError as err:
        assert str(err).startswith("cut.txt")
        return
    # only the last number of the last line can be shortened without any sign; that line is
    # the last row (pingpong, stream) or every row of the last rank (poisson timers)
    assert len(part) == len(full)
    if kernel_of(name) == "poisson":
        keep = full["rank"] != full["rank"].max()
    else:
        keep = full.index < len(full) - 1
    pd.testing.assert_frame_equal(part[keep].reset_index(drop=True),
                                  full[keep].reset_index(drop=True))


@pytest.mark.parametrize("name", [runs_of(k)[0] for k in TEXT_PARSERS])
def test_garbage_line_is_reported_at_its_line(name):
    """Is a garbage line inserted into the report reported with its exact line number?"""
    parse = TEXT_PARSERS[kernel_of(name)]
    lines = (RUNS / name / "stdout").read_text().splitlines()
    for at in (3, len(lines) - 1):
        bad = lines[:at] + ["@@ this is not part of the report @@"] + lines[at:]
        with pytest.raises(HpclabError, match=rf"^g.txt:{at + 1}: "):
            parse("\n".join(bad) + "\n", source="g.txt")


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400))
def test_random_text_fails_cleanly(text):
    """Does any random text give an HpclabError (never another exception) from every parser?"""
    for parse in (*TEXT_PARSERS.values(), parse_result_json):
        try:
            parse(text)
        except HpclabError:
            pass


def test_launcher_lines_mixed_into_stdout_are_skipped():
    """When stderr and stdout share a file, are binding lines inside the report ignored?"""
    name = runs_of("stream")[0]
    lines = (RUNS / name / "stdout").read_text().splitlines()
    noise = "[vm:123] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/.]"
    mixed = lines[:1] + [noise] + lines[1:5] + [noise] + lines[5:]
    a = parse_stream_text("\n".join(mixed))
    b = parse_stream_text("\n".join(lines))
    pd.testing.assert_frame_equal(a, b)


def test_report_of_another_kernel_is_refused():
    """Does the stream text parser refuse a pingpong stdout, naming the line of the banner?"""
    text = (RUNS / runs_of("pingpong")[0] / "stdout").read_text()
    with pytest.raises(HpclabError, match=r"^p.txt:2: this is a pingpong report, not stream"):
        parse_stream_text(text, source="p.txt")


# ----------------------------------------------------------------------------------------------
# Launcher binding reports
# ----------------------------------------------------------------------------------------------

def test_mpirun_report_bindings_core():
    """Are Open MPI's binding lines read as one row per rank, in logical PU numbers?"""
    table = read_bindings(DATA / "mpirun_report_bindings_core.txt")
    assert table["rank"].tolist() == [0, 1]
    assert table["cpus"].tolist() == [[0], [1]]  # [B/.] and [./B]
    assert set(table["numbering"]) == {"logical"} and set(table["source"]) == {"mpirun"}
    assert table["bind"].iloc[0].startswith("socket 0[core 0")


def test_mpirun_not_bound_gives_no_cpus():
    """Is 'is not bound' read as a row without CPUs?"""
    table = read_bindings(DATA / "mpirun_report_bindings_unbound.txt")
    assert table["cpus"].tolist() == [None]
    assert table["bind"].tolist() == ["not bound"]


def test_mpirun_diagram_with_sockets_and_hyperthreads():
    """Does a two-socket, two-thread diagram count logical PUs across sockets and cores?
    (Line written in Open MPI 4.x's documented format; this machine has one socket.)"""
    line = ("[node7:4242] MCW rank 3 bound to socket 1[core 4[hwt 0-1]]: "
            "[../../../..][BB/../../..]")
    row = parse_bindings(line).iloc[0]
    assert (row["rank"], row["host"], row["pid"], row["cpus"]) == (3, "node7", 4242, [8, 9])


@pytest.mark.parametrize("file,cpus", [
    ("srun_cpu_bind_cores.txt", [[0], [1]]),
    ("srun_cpu_bind_map.txt", [[1], [0]]),
    ("srun_cpu_bind_none.txt", [None, None]),
])
def test_srun_cpu_bind_verbose(file, cpus):
    """Are srun's cpu-bind lines read as (rank, OS CPUs), including map_cpu and none?"""
    table = read_bindings(DATA / file)
    text = (DATA / file).read_text()
    masks = {int(l.split("task")[1].split()[0]): l.split("mask ")[1].split()[0]
             for l in text.splitlines()}
    assert table["rank"].tolist() == sorted(masks)
    assert table["cpus"].tolist() == cpus
    assert set(table["numbering"]) == {"os"} and set(table["local_rank"]) == {0, 1}


@pytest.mark.parametrize("line", [
    "cpu-bind=MASK - vm, task  0  0 [18495]: mask 0x",
    "cpu-bind=MASK - vm, task  0",
    "[vm:07082] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/",
    "[vm:07082] MCW rank 1 bound",
])
def test_cut_binding_lines_name_the_line(line):
    """Is a binding line cut short reported with its line, not silently dropped?"""
    text = "some program output\n" + line + "\n"
    with pytest.raises(HpclabError, match=r"^err.txt:2: unreadable"):
        parse_bindings(text, source="err.txt")


def test_binding_lines_among_other_output():
    """Are other lines ignored and an empty output an empty table with the usual columns?"""
    empty = parse_bindings("hello\nworld\n")
    assert empty.empty and "cpus" in empty.columns


# ----------------------------------------------------------------------------------------------
# Run folders
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_RUNS)
def test_parse_run_gives_tidy_rows_with_provenance(name):
    """Does each real run folder give a non-empty table with run id, provenance and bindings?"""
    table = parse_run(RUNS / name, kernel_of(name))
    assert not table.empty and set(table["run_id"]) == {name}
    prov = table.attrs["provenance"]
    assert prov["run_id"] == name and prov["host"] and prov["date"]
    if "rank" in table:
        assert {"bind_source", "bound_cpus", "bound_numbering"} <= set(table.columns)


def test_parse_run_converts_mpirun_bindings_to_os_numbers():
    """With the host's lstopo XML in provenance/, are mpirun's logical PUs given as OS CPUs?"""
    table = parse_run(RUNS / "stream-bind-core", "stream")
    topo = run_topology(RUNS / "stream-bind-core")
    ranks = table.drop_duplicates("rank")
    assert set(ranks["bind_source"]) == {"mpirun"}
    assert set(ranks["bound_numbering"]) == {"os"}
    for cpus in ranks["bound_cpus"]:
        assert set(cpus) <= set(topo.pus["pu"])
    # the kernel ran where the launcher bound it
    for _, row in ranks.iterrows():
        assert row["cpu"] in row["bound_cpus"]


def test_parse_run_srun_bindings_and_unbound_runs():
    """Are srun masks attached per rank, and does an unbound mpirun run say so?"""
    srun = parse_run(RUNS / "stream-srun-cores", "stream").drop_duplicates("rank")
    assert set(srun["bind_source"]) == {"srun"}
    assert all(row["cpu"] in row["bound_cpus"] for _, row in srun.iterrows())
    none = parse_run(RUNS / "stream-bind-none", "stream").drop_duplicates("rank")
    assert none["bound_cpus"].isna().all()


def test_tables_of_several_runs_concatenate():
    """Can parse_run tables of different runs be concatenated (attrs hold plain values)?"""
    tables = [parse_run(RUNS / n, kernel_of(n)) for n in runs_of("stream")]
    both = pd.concat(tables, ignore_index=True)
    assert set(both["run_id"]) == set(runs_of("stream"))


def test_parse_run_errors(tmp_path):
    """Do a missing folder, a folder without result.json and a wrong kernel give clear errors?"""
    with pytest.raises(HpclabError, match="is not a run folder"):
        parse_run(tmp_path / "nope", "stream")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "status.json").write_text('{"state": "failed"}')
    with pytest.raises(HpclabError, match=r"result.json: no such file \(status: failed\)"):
        parse_run(tmp_path / "empty", "stream")
    with pytest.raises(HpclabError, match="unknown kernel 'hpl'"):
        parse_run(RUNS / ALL_RUNS[0], "hpl")


def test_parse_run_falls_back_to_pingpong_stdout(tmp_path):
    """Without result.json, does a pingpong run folder still parse from its stdout?"""
    src = RUNS / runs_of("pingpong")[0]
    run = tmp_path / "pp"
    run.mkdir()
    for name in ("stdout", "stderr"):
        (run / name).write_text((src / name).read_text())
    table = parse_run(run, "pingpong")
    assert table.attrs["from"] == "stdout"
    assert len(table) == len(parse_run(src, "pingpong"))


def test_provenance_prefers_run_folder_files(tmp_path):
    """Does status.json's creation time and run id win over file times?"""
    (tmp_path / "status.json").write_text(json.dumps({"run_id": "r1", "created": "2026-01-02T03:04:05Z"}))
    prov = run_provenance(tmp_path)
    assert prov == {"run_id": "r1", "host": None, "date": "2026-01-02T03:04:05Z"}


def test_the_job_scripts_closing_line_is_not_read_as_a_table_row(tmp_path):
    """Every job script ends its stdout with 'hpclab: kernel exit code N' after the kernel's report:
    does the stdout fallback still parse the table?"""
    src = RUNS / runs_of("pingpong")[0]
    run = tmp_path / "pp"
    run.mkdir()
    (run / "stdout").write_text((src / "stdout").read_text().rstrip("\n") + "\nhpclab: kernel exit code 0\n")
    (run / "stderr").write_text((src / "stderr").read_text())
    assert len(parse_run(run, "pingpong")) == len(parse_run(src, "pingpong"))
