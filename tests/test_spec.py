"""Specs: typed fields, keyword checks with suggestions, sweeps, YAML loading, and the checks
against a site. Every bad spec must end in an HpclabError, never another exception."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpclab import spec_checks
from hpclab.errors import HpclabError
from hpclab.site import Partition, Site
from hpclab.spec import load_specs, make_spec, parse_sweep_option, sweep, time_seconds


def test_defaults_are_filled_in():
    """Does a minimal spec get one task, one node, the kernel as experiment name and no binding?"""
    s = make_spec(kernel="stream")
    assert (s.nodes, s.ntasks, s.cpus_per_task, s.repetitions) == (1, 1, 1, 1)
    assert s.experiment == "stream"
    assert s.args.to_argv() == []


def test_kernel_arguments_become_flags():
    """Are kernel arguments turned into the kernel's flags, booleans as bare flags?"""
    s = make_spec(kernel="pingpong", ntasks=4, args={"max_bytes": 1024, "pairs": True, "no_check": False})
    assert s.args.to_argv() == ["--max-bytes", "1024", "--pairs"]
    p = make_spec(kernel="poisson", ntasks=4, args={"grid": "2x2", "exchange": "nonblocking"})
    assert p.args.to_argv() == ["--grid", "2x2", "--exchange", "nonblocking"]


@pytest.mark.parametrize("fields, words", [
    ({"bindng": {}}, ["bindng", "did you mean 'binding'"]),
    ({"args": {"grid": "2x2"}}, ["grid", "size"]),
    ({"binding": {"cpu_bind": "core"}}, ["did you mean 'cores'", "sockets"]),
    ({"binding": {"cpu_bind": "map_cpu"}}, ["map_cpu:0,1"]),
    ({"binding": {"distribution": "blok"}}, ["did you mean 'block'"]),
    ({"binding": {"distribution": "block:cyclic:cyclic:block"}}, ["three levels"]),
    ({"binding": {"hint": "memory-bound"}}, ["did you mean 'memory_bound'"]),
    ({"launcher": "mpirun", "binding": {"map_by": "sockt"}}, ["did you mean 'socket'"]),
    ({"launcher": "mpirun", "binding": {"map_by": "core:PE=x"}}, ["modifier"]),
    ({"launcher": "mpirun", "binding": {"bind_to": "cores"}}, ["did you mean 'core'"]),
    ({"launcher": "srun", "binding": {"bind_to": "core"}}, ["mpirun option"]),
    ({"launcher": "mpirun", "binding": {"cpu_bind": "cores"}}, ["srun option"]),
    ({"binding": {"hint": "compute_bound", "cpu_bind": "cores"}}, ["--hint"]),
    ({"omp": {"proc_bind": "spred"}}, ["did you mean 'spread'"]),
    ({"omp": {"places": "core"}}, ["did you mean 'cores'"]),
    ({"omp": {"num_threads": 0}}, ["num_threads"]),
    ({"numactl": {"membind": "zero"}}, ["membind"]),
    ({"numactl": {"membind": "0", "interleave": "0"}}, ["one memory policy"]),
    ({"time": "five minutes"}, ["Slurm syntax"]),
    ({"ntasks": 1, "nodes": 2}, ["every node needs a task"]),
    ({"ntasks": 5, "ntasks_per_node": 2}, ["fewer than ntasks"]),
    ({"mca": {"BTL": "self"}}, ["lower case"]),
    ({"env": {"OMP_NUM_THREADS": "4"}}, ["omp:"]),
    ({"env": {"LD_PRELOAD": "x.so"}}, ["trace"]),
    ({"kernel": "strem"}, ["kernel"]),
])
def test_bad_specs_name_the_problem(fields, words):
    """Is each kind of mistake rejected with a message naming the field and a way out?"""
    data = {"kernel": "stream", **fields}
    with pytest.raises(HpclabError) as exc:
        make_spec(data)
    text = str(exc.value)
    for w in words:
        assert w in text


def test_kernel_specific_consistency():
    """Are pingpong with one rank and a poisson grid that does not match ntasks rejected?"""
    with pytest.raises(HpclabError, match="ntasks=2"):
        make_spec(kernel="pingpong", ntasks=1)
    with pytest.raises(HpclabError, match="even"):
        make_spec(kernel="pingpong", ntasks=3, args={"pairs": True})
    with pytest.raises(HpclabError, match="2x2 has 4 ranks"):
        make_spec(kernel="poisson", ntasks=3, args={"grid": "2x2"})


@pytest.mark.parametrize("text, seconds", [
    ("5", 300), ("05:30", 330), ("01:00:00", 3600), ("1-00", 86400), ("1-02:03:04", 93784),
])
def test_time_limits_follow_slurm_syntax(text, seconds):
    """Are Slurm's time formats converted to the right number of seconds?"""
    assert time_seconds(text) == seconds


def test_integer_time_means_minutes():
    """Does time: 90 mean 90 minutes, as in sbatch --time=90?"""
    assert make_spec(kernel="stream", time=90).time_seconds() == 5400


def test_sweep_gives_every_combination_in_order():
    """Does a 2 x 2 sweep give four specs with the last key varying fastest?"""
    base = make_spec(kernel="stream", args={"size": 1000})
    specs = sweep(base, {"binding.cpu_bind": ["cores", "none"], "omp.num_threads": [1, 2]})
    got = [(s.binding.cpu_bind, s.omp.num_threads) for s in specs]
    assert got == [("cores", 1), ("cores", 2), ("none", 1), ("none", 2)]
    assert all(s.args.size == 1000 for s in specs)


def test_sweep_into_unset_groups():
    """Can a sweep set fields of groups the base spec left empty (numactl, args)?"""
    specs = sweep({"kernel": "stream"}, {"numactl.membind": ["0"], "args.size": [10, 20]})
    assert [s.args.size for s in specs] == [10, 20]
    assert specs[0].numactl.membind == "0"


def test_sweep_bad_value_names_the_combination():
    """Does a bad value in a sweep say which combination failed?"""
    with pytest.raises(HpclabError, match="binding.cpu_bind=socket"):
        sweep({"kernel": "stream"}, {"binding.cpu_bind": ["cores", "socket"]})
    with pytest.raises(HpclabError, match="non-empty list"):
        sweep({"kernel": "stream"}, {"omp.num_threads": 2})
    with pytest.raises(HpclabError, match="not a group"):
        sweep(make_spec(kernel="stream"), {"time.x": [1]})


def test_sweep_option_parsing():
    """Does --sweep key=v1,v2 parse values as YAML scalars?"""
    assert parse_sweep_option("omp.num_threads=1,2") == ("omp.num_threads", [1, 2])
    assert parse_sweep_option("binding.cpu_bind=cores,none") == ("binding.cpu_bind", ["cores", "none"])
    with pytest.raises(HpclabError):
        parse_sweep_option("omp.num_threads")


def test_yaml_with_sweep(tmp_path):
    """Does a YAML spec with a sweep: mapping expand, and --sweep entries add to it?"""
    p = tmp_path / "s.yaml"
    p.write_text("kernel: stream\nargs: {size: 100}\nsweep:\n  omp.num_threads: [1, 2]\n")
    assert len(load_specs(p)) == 2
    assert len(load_specs(p, extra_sweep={"binding.cpu_bind": ["cores", "none"]})) == 4


@pytest.mark.parametrize("text, word", [
    ("kernel: [", "not valid YAML"), ("- 1\n- 2\n", "mapping"), ("kernel: stream\nsweep: 3\n", "sweep"),
])
def test_bad_yaml_files(tmp_path, text, word):
    """Are broken spec files reported with what is wrong?"""
    p = tmp_path / "s.yaml"
    p.write_text(text)
    with pytest.raises(HpclabError, match=word):
        load_specs(p)


def test_flat_columns_use_dotted_names():
    """Does the flat view give dotted column names for nested fields?"""
    flat = make_spec(kernel="stream", omp={"num_threads": 2}, mca={"btl": "self"}).flat()
    assert flat["omp.num_threads"] == 2 and flat["mca.btl"] == "self" and flat["kernel"] == "stream"


# --- hypothesis: random bad specs -----------------------------------------------------------------

junk = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**7), st.floats(allow_nan=True),
                 st.text(max_size=12), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=6), st.integers(), max_size=2))
FIELDS = ["kernel", "args", "nodes", "ntasks", "ntasks_per_node", "cpus_per_task", "launcher",
          "binding", "omp", "numactl", "mca", "env", "repetitions", "time", "partition", "trace",
          "experiment", "bogus_field"]
SUB = {"binding": ["cpu_bind", "distribution", "hint", "map_by", "rank_by", "bind_to", "nope"],
       "omp": ["num_threads", "proc_bind", "places", "nope"],
       "numactl": ["membind", "interleave", "preferred", "localalloc", "nope"],
       "args": ["size", "reps", "grid", "max_bytes", "exchange", "nope"]}


@st.composite
def bad_specs(draw):
    data = {"kernel": draw(st.sampled_from(["stream", "pingpong", "poisson", "nope", 3]))}
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(FIELDS))
        if key in SUB and draw(st.booleans()):
            data[key] = {draw(st.sampled_from(SUB[key])): draw(junk)}
        else:
            data[key] = draw(junk)
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad_specs())
def test_random_specs_fail_only_with_hpclab_error(data):
    """Does any malformed spec end in an HpclabError (or a valid Spec), never another exception?"""
    try:
        make_spec(data)
    except HpclabError as exc:
        assert exc.what.startswith("invalid spec")


# --- checks against a site --------------------------------------------------------------------------

SITE = Site(name="testsite", description="", partitions=(Partition("work", 2, 4, 2, "01:00:00"),),
            default_partition="work", launcher="srun")


def facts(**over):
    base = dict(partition=SITE.partitions[0],
                components={"btl": frozenset({"self", "tcp", "vader"}), "pml": frozenset({"ob1", "cm"})},
                params=frozenset({"btl_tcp_if_include"}), numa_nodes=frozenset({0, 1}),
                kernel_help={"stream": "usage: stream [--size N] [--reps N] --json FILE"}, trace_lib=True)
    base.update(over)
    return spec_checks.Facts(**base)


def check(**fields):
    spec_checks.check(make_spec({"kernel": "stream", **fields}), SITE, facts())


def test_a_fitting_spec_passes():
    """Is a spec that fits the partition and names existing components accepted?"""
    check(nodes=2, ntasks=8, args={"size": 10}, mca={"btl": "^tcp", "pml": "ob1", "btl_tcp_if_include": "lo"},
          numactl={"membind": "1"}, time="00:30:00")


@pytest.mark.parametrize("fields, words", [
    ({"ntasks": 9, "nodes": 2}, ["more tasks than cores", "ntasks=8"]),
    ({"ntasks": 3, "cpus_per_task": 2}, ["more tasks than cores"]),
    ({"ntasks": 6, "nodes": 2, "ntasks_per_node": 5}, ["does not fit"]),
    ({"nodes": 3, "ntasks": 3}, ["has 2 node(s)"]),
    ({"partition": "wrk"}, ["did you mean 'work'"]),
    ({"time": "02:00:00"}, ["limit 01:00:00"]),
    ({"mca": {"btl": "self,vadr"}}, ["'vadr'", "did you mean 'vader'", "self, tcp, vader"]),
    ({"mca": {"pml": "ucx"}}, ["'ucx' is not installed"]),
    ({"mca": {"btl_tcp_if_includ": "lo"}}, ["did you mean 'btl_tcp_if_include'"]),
    ({"numactl": {"membind": "0-3"}}, ["NUMA node(s) [2, 3]"]),
    ({"binding": {"map_by": "core"}}, ["launches with srun", "launcher: mpirun"]),
    ({"args": {"reps": 3, "extra_args": ["--threads", "2"]}}, ["does not accept --threads"]),
])
def test_site_problems_are_explained(fields, words):
    """Is each conflict with the site reported with the numbers and a way to fix it?"""
    with pytest.raises(HpclabError) as exc:
        check(**fields)
    text = str(exc.value)
    for w in words:
        assert w in text


def test_every_problem_is_listed():
    """Are several problems reported together, numbered, instead of one at a time?"""
    with pytest.raises(HpclabError) as exc:
        check(ntasks=20, nodes=2, time="09:00:00")
    assert "(1)" in exc.value.what and "(2)" in exc.value.what


def test_missing_binary_and_trace_library():
    """Does a missing kernel binary or trace library point at `make -C src`?"""
    sp = make_spec(kernel="stream", trace=True)
    with pytest.raises(HpclabError) as exc:
        spec_checks.check(sp, SITE, facts(kernel_help={"stream": None}, trace_lib=False))
    assert exc.value.hint.count("make -C src") == 2


def test_cpu_bind_map_list_may_hold_several_cpus():
    """Is srun's comma-separated map_cpu list (map_cpu:0,0) accepted, and a stray number after a plain keyword refused?"""
    from hpclab.spec import check_cpu_bind

    assert check_cpu_bind("verbose,map_cpu:0,1") == "verbose,map_cpu:0,1"
    assert check_cpu_bind("mask_cpu:0x1,0x2") == "mask_cpu:0x1,0x2"
    with pytest.raises(ValueError):
        check_cpu_bind("cores,1")
