"""Specs: typed fields, keyword checks with suggestions, sweeps, YAML loading, and the checks
against a site. Every bad spec must end in an HpclabError, never another exception."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpclab.spec import checks as spec_checks
from hpclab.core.errors import HpclabError
from hpclab.site.profile import Partition, Site
from hpclab.kernels.registry import names as kernel_names
from hpclab.spec.model import (MPIRUN_BIND_TO, MPIRUN_OBJECTS, OMP_PLACES, OMP_PROC_BIND,
                         SRUN_CPU_BIND, SRUN_HINT, Binding, Numactl, Omp, Spec, load_specs,
                         make_spec, parse_sweep_option, sweep, time_seconds)


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


# --- hypothesis: specs with one mistake made on purpose -------------------------------------------
# Each strategy below returns (spec dict, words): a spec that is valid except for one mistake, and
# the words (field path, offending value) its rejection message must contain.

LOWER = "abcdefghijklmnopqrstuvwxyz_"
word = st.text(alphabet=LOWER, min_size=1, max_size=10)
BIND = {"cpu_bind": set(SRUN_CPU_BIND) | {"no"}, "hint": set(SRUN_HINT),
        "distribution": {"block", "cyclic", "arbitrary"},
        "map_by": set(MPIRUN_OBJECTS) | {"seq", "dist", "ppr"}, "rank_by": set(MPIRUN_OBJECTS),
        "bind_to": set(MPIRUN_BIND_TO)}
LAUNCHER_OF = {"cpu_bind": "srun", "hint": "srun", "distribution": "srun", "map_by": "mpirun",
               "rank_by": "mpirun", "bind_to": "mpirun"}
COUNTS = {"nodes": (1, 10000), "ntasks": (1, 1000000), "cpus_per_task": (1, 4096),
          "repetitions": (1, 100), "ntasks_per_node": (1, None)}


@st.composite
def valid_spec(draw):
    """A spec that make_spec accepts: any kernel, a consistent rank count, a few options."""
    kernel = draw(st.sampled_from(kernel_names()))
    ntasks = draw(st.integers(2, 8))
    data = {"kernel": kernel, "ntasks": ntasks, "cpus_per_task": draw(st.integers(1, 4)),
            "omp": {"num_threads": draw(st.integers(1, 4))}}
    if kernel == "poisson" and draw(st.booleans()):
        data["args"] = {"grid": f"{ntasks}x1", "n": draw(st.integers(ntasks, 500))}
    if kernel == "program":  # a program of the user's: the command is what it runs
        data["command"] = [draw(st.sampled_from(["./a.out", "/bin/true", "python"])), "--n", "3"]
    if draw(st.booleans()):
        data["mca"] = {"btl": draw(st.sampled_from(["self,vader", "^tcp", "self,tcp"]))}
    make_spec(data)  # the base must really be valid, or the test proves nothing
    return data


def _unknown_field(draw, data):
    group = draw(st.sampled_from([None, "binding", "omp", "args", "numactl"]))
    known = set(Spec.model_fields) if group is None else {
        "binding": set(Binding.model_fields), "omp": set(Omp.model_fields),
        "numactl": set(Numactl.model_fields), "args": {"kernel", "extra_args", "size", "reps", "n",
                                                     "grid", "exchange", "iters", "tol", "fuse",
                                                     "max_bytes", "warmup", "no_check", "pairs"}}[group]
    name = draw(word.filter(lambda w: w not in known))
    if group is None:
        data[name] = draw(st.integers())
        return [repr(name), "unknown field"]
    data[group] = {**(data.get(group) or {}), name: 1}
    return [f"{group}.{name}", "unknown field"]


def _count_out_of_range(draw, data):
    field = draw(st.sampled_from(sorted(COUNTS)))
    lo, hi = COUNTS[field]
    bad = draw(st.integers(max_value=lo - 1) | (st.integers(min_value=hi + 1) if hi else st.nothing()))
    data[field] = bad
    return [f"{field}:", str(bad)]


def _binding_keyword(draw, data):
    field = draw(st.sampled_from(sorted(BIND)))
    bad = draw(word.filter(lambda w: w not in BIND[field]))
    data["binding"] = {field: bad}
    data["launcher"] = LAUNCHER_OF[field]
    return [f"binding.{field}", repr(bad)]


def _omp_keyword(draw, data):
    field, valid = draw(st.sampled_from([("proc_bind", OMP_PROC_BIND), ("places", OMP_PLACES)]))
    bad = draw(word.filter(lambda w: w not in valid))
    data["omp"] = {field: bad}
    return [f"omp.{field}", repr(bad)]


def _bad_literal(draw, data):
    field, valid = draw(st.sampled_from([("launcher", ["srun", "mpirun"]), ("kernel", kernel_names())]))
    bad = draw(word.filter(lambda w: w not in valid))
    data[field] = bad
    data.pop("args", None)  # arguments are checked against the kernel: keep the one mistake
    return [f"{field}:", repr(bad)]


BAD_TEXT = {
    "time": st.text(alphabet=LOWER + " ", min_size=1, max_size=12),
    "experiment": st.sampled_from(["-x", "a b", "x/y", "", "\u00e9"]),
    "numactl.membind": word.filter(lambda w: w != "all"),
    "omp.num_threads": st.integers(max_value=0),
}


def _bad_text(draw, data):
    field = draw(st.sampled_from(sorted(BAD_TEXT)))
    bad = draw(BAD_TEXT[field])
    group, _, name = field.rpartition(".")
    if group:
        data[group] = {name: bad}
    else:
        data[name] = bad
    return [f"{field}:", repr(bad)]


def _inconsistent(draw, data):
    kind = draw(st.sampled_from(["nodes", "per_node", "pingpong", "grid"]))
    n = data["ntasks"]
    if kind == "nodes":
        data["nodes"] = n + draw(st.integers(1, 10))
        return [f"ntasks={n}", f"nodes={data['nodes']}"]
    if kind == "per_node":
        data["nodes"] = 1
        data["ntasks_per_node"] = draw(st.integers(1, n - 1))
        return [f"ntasks_per_node={data['ntasks_per_node']}", f"ntasks={n}"]
    data.pop("command", None)  # the mistake below switches the kernel to a C kernel
    if kind == "pingpong":
        data.update(kernel="pingpong", ntasks=1, args={})
        return ["pingpong", "ntasks=1"]
    p, q = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    if p * q == n:
        p += 1
    data.update(kernel="poisson", args={"grid": f"{p}x{q}"})
    return [f"grid {p}x{q}", f"ntasks={n}"]


MISTAKES = [_unknown_field, _count_out_of_range, _binding_keyword, _omp_keyword, _bad_literal,
            _bad_text, _inconsistent]


@st.composite
def spec_with_one_mistake(draw):
    data = draw(valid_spec())
    words = draw(st.sampled_from(MISTAKES))(draw, data)
    return data, words


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_with_one_mistake())
def test_every_invalid_spec_is_rejected_naming_field_and_value(case):
    """Is a spec with one mistake (unknown field, count out of range, unknown keyword, bad
    format, inconsistent counts) rejected with an HpclabError that names the field and value?"""
    data, words = case
    with pytest.raises(HpclabError) as exc:
        make_spec(data)
    assert exc.value.what.startswith("invalid spec: ")
    for w in words:
        assert w in exc.value.what, (w, exc.value.what)
    assert exc.value.hint


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


def test_problems_come_in_the_documented_order():
    """Does a spec wrong in many ways at once list its problems in the order the module's
    docstring gives (resources, binding, MPI library, MCA, NUMA, kernel, tracer), each check of
    the chain in turn?"""
    spec = make_spec(kernel="stream", partition="wrk", nodes=3, ntasks=20, time="09:00:00",
                     binding={"map_by": "core"}, mca={"btl": "self,vadr"}, numactl={"membind": "5"},
                     args={"extra_args": ["--threads"]}, trace=True)
    site_facts = facts(trace_lib=False)
    found = [what for what, _ in spec_checks.problems(spec, SITE, site_facts)]
    order = ["is not part of site", "has 2 node(s)", "more tasks than cores", "limit 01:00:00",
             "is an mpirun option", "MCA btl component 'vadr'", "NUMA node(s) [5]",
             "does not accept --threads", "trace: true needs"]
    assert len(found) == len(order)
    assert all(words in what for words, what in zip(order, found)), found
    assert found == [what for check in spec_checks.CHECKS for what, _ in check(spec, SITE, site_facts)]


def test_missing_binary_and_trace_library():
    """Does a missing kernel binary or trace library point at `make -C src`?"""
    sp = make_spec(kernel="stream", trace=True)
    with pytest.raises(HpclabError) as exc:
        spec_checks.check(sp, SITE, facts(kernel_help={"stream": None}, trace_lib=False))
    assert exc.value.hint.count("make -C src") == 2


def test_a_kernel_whose_help_lists_nothing_is_named_not_every_flag():
    """A kernel whose --help printed no options (its MPI library could not start) is one problem
    quoting what it printed, not 'does not accept' for every flag with an empty list."""
    sp = make_spec(kernel="stream", args={"size": 1000, "reps": 2})
    printed = "Abort(807027984): Fatal error in internal_Init_thread: unsupported PMI version PMIx. Aborting."
    with pytest.raises(HpclabError) as exc:
        spec_checks.check(sp, SITE, facts(kernel_help={"stream": printed}))
    assert "printed no options" in str(exc.value) and "PMIx" in str(exc.value)
    assert "does not accept" not in str(exc.value)


def test_cpu_bind_map_list_may_hold_several_cpus():
    """Is srun's comma-separated map_cpu list (map_cpu:0,0) accepted, and a stray number after a plain keyword refused?"""
    from hpclab.spec.model import check_cpu_bind

    assert check_cpu_bind("verbose,map_cpu:0,1") == "verbose,map_cpu:0,1"
    assert check_cpu_bind("mask_cpu:0x1,0x2") == "mask_cpu:0x1,0x2"
    with pytest.raises(ValueError):
        check_cpu_bind("cores,1")


# --- hypothesis: specs that are valid but do not fit the site ------------------------------------
# Each returns (spec fields, facts overrides, words): one conflict with SITE / facts() and the words
# (the field and the value) the message must contain.

def _too_many_tasks(draw):
    cpus = draw(st.integers(1, 4))
    ntasks = 8 // cpus + draw(st.integers(1, 20))  # two nodes of 4 cores hold 8 // cpus tasks
    return {"nodes": 2, "ntasks": ntasks, "cpus_per_task": cpus}, {}, [f"ntasks={ntasks}",
                                                                        "more tasks than cores"]


def _too_many_nodes(draw):
    nodes = draw(st.integers(3, 50))
    return {"nodes": nodes, "ntasks": nodes}, {}, [f"nodes={nodes}", "has 2 node(s)"]


def _unknown_partition(draw):
    name = draw(word.filter(lambda w: w != "work"))
    return {"partition": name}, {}, [f"partition {name!r}", "is not part of site"]


def _time_above_limit(draw):
    minutes = draw(st.integers(61, 10 ** 4))
    return {"time": minutes}, {}, [f"{minutes // 60:02d}:{minutes % 60:02d}:00", "01:00:00"]


def _mca_component_missing(draw):
    framework = draw(st.sampled_from(["btl", "pml"]))
    have = facts().components[framework]
    name = draw(word.filter(lambda w: w not in have))
    value = draw(st.sampled_from([name, f"^{name}", f"self,{name}" if framework == "btl" else name]))
    return {"mca": {framework: value}}, {}, [f"MCA {framework} component {name!r}", "is not installed"]


def _mca_name_unknown(draw):
    known = facts().params | set(facts().components)
    name = draw(word.filter(lambda w: w[0].isalpha() and w not in known))
    return {"mca": {name: "1"}}, {}, [f"MCA name {name!r}"]


def _numa_node_missing(draw):
    node = draw(st.integers(2, 64))  # facts() has NUMA nodes 0 and 1
    return {"numactl": {"membind": f"0,{node}"}}, {}, [f"NUMA node(s) [{node}]"]


def _kernel_flag_unknown(draw):
    name = "--" + draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=10)
                       .filter(lambda w: w not in ("size", "reps", "json")))
    return {"args": {"extra_args": [name]}}, {}, [f"does not accept {name}"]


def _binding_of_other_launcher(draw):
    field = draw(st.sampled_from(["map_by", "rank_by", "bind_to"]))
    return {"binding": {field: "core"}}, {}, [f"binding.{field}", "launches with srun"]


def _binary_missing(draw):
    return {}, {"kernel_help": {"stream": None}}, ["kernel binary", "does not exist"]


SITE_MISTAKES = [_too_many_tasks, _too_many_nodes, _unknown_partition, _time_above_limit,
                 _mca_component_missing, _mca_name_unknown, _numa_node_missing,
                 _kernel_flag_unknown, _binding_of_other_launcher, _binary_missing]


@st.composite
def spec_that_does_not_fit(draw):
    fields, over, words = draw(st.sampled_from(SITE_MISTAKES))(draw)
    return make_spec({"kernel": "stream", **fields}), over, words


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_that_does_not_fit())
def test_every_spec_that_does_not_fit_the_site_is_rejected_naming_it(case):
    """Does every valid spec with one conflict against the site (cores, nodes, partition, time,
    MCA component or name, NUMA node, kernel flag, launcher, binary) fail the site check with an
    HpclabError naming the field and value, and a hint?"""
    spec, over, words = case
    with pytest.raises(HpclabError) as exc:
        spec_checks.check(spec, SITE, facts(**over))
    assert exc.value.what.startswith("spec for stream cannot run on site 'testsite': ")
    for w in words:
        assert w in exc.value.what, (w, exc.value.what)
    assert exc.value.hint


# --- spec files that are not spec files -------------------------------------------------------


def _example_specs() -> list[bytes]:
    """The YAML spec examples of the docs (every ```yaml block with a kernel:)."""
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    blocks = [b for f in sorted(docs.glob("*.md"))
              for b in re.findall(r"```yaml\n(.*?)```", f.read_text(), re.S) if "kernel:" in b]
    assert blocks, "no YAML spec examples found in docs/"
    return [b.encode() for b in blocks]


def _corrupt(data: bytes, rng) -> bytes:
    """Up to 8 random edits: a byte replaced by any byte, bytes deleted, random bytes or YAML
    tokens inserted, a piece copied elsewhere."""
    tokens = [b"{", b"}", b"[", b"]", b": ", b"- ", b"&a ", b"*a", b"!!binary ", b"\t", b"'", b'"', b"\x00",
              b"\xef\xbb\xbf", b"9" * 30, b"null", b".inf", b"---\n", b"? ", b"<<: *a\n", b"\xff\xfe"]
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(len(b) + 1)
        op = rng.random()
        if op < 0.3 and pos < len(b):
            b[pos] = rng.randrange(256)
        elif op < 0.5:
            del b[pos:pos + rng.randint(1, 12)]
        elif op < 0.7:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op < 0.9:
            b[pos:pos] = rng.choice(tokens)
        else:
            j = rng.randrange(len(b) or 1)
            b[pos:pos] = b[j:j + rng.randint(1, 40)]
    return bytes(b)


def test_corrupted_spec_files_give_clear_errors_never_a_traceback(tmp_path):
    """Fuzz: 1500 corrupted copies of the docs' example specs (random bytes, cut and pasted
    pieces, YAML tokens, broken UTF-8): does every one load as specs or raise an HpclabError
    with a hint, and never another exception?"""
    import random

    from hpclab.spec.model import load_specs

    rng = random.Random(18)
    outcomes = {"specs": 0, "error": 0}
    for i in range(1500):
        path = tmp_path / f"spec{i}.yaml"
        path.write_bytes(_corrupt(rng.choice(_example_specs()), rng))
        try:
            specs = load_specs(path)
        except HpclabError as exc:
            assert exc.what and exc.hint
            outcomes["error"] += 1
        else:
            assert all(s.kernel in kernel_names() for s in specs)
            outcomes["specs"] += 1
    assert outcomes["error"] > 1000  # the corruption really corrupts


@pytest.mark.parametrize("name, data, words", [
    ("utf16", "kernel: stream\n".encode("utf-16"), ["not UTF-8", "line 1"]),
    ("latin1", "kernel: stream\nlabel: Müller\n".encode("latin-1"), ["not UTF-8 text", "line 2"]),
    ("binary", bytes(range(256)) * 8, ["binary file"]),
    ("deep", b"kernel: stream\nargs: " + b"[" * 20000 + b"]" * 20000, ["cannot be read as a spec"]),
    ("aliases", b"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                b"e: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nkernel: stream\n", ["too many values"]),
    ("bigint", b"kernel: stream\nntasks: " + b"9" * 5000 + b"\n", ["cannot be read as a spec"]),
    ("sweep_key", b"kernel: stream\nsweep: {1: [1, 2]}\n", ["sweep key 1"]),
    ("huge", b"kernel: stream\n" + b"#" * 2_000_000, ["larger than"]),
])
def test_spec_files_that_are_not_specs(tmp_path, name, data, words):
    """Do binary files, wrong encodings, absurd nesting, alias bombs, giant numbers and files of
    megabytes each give one HpclabError saying what is wrong with the file?"""
    from hpclab.spec.model import load_specs

    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    with pytest.raises(HpclabError) as exc:
        load_specs(path)
    for w in words:
        assert w in exc.value.what, exc.value.what
    assert exc.value.hint


def test_a_folder_or_missing_path_as_spec_says_which(tmp_path):
    """A folder given as the spec says it is a folder; a missing file says not found."""
    from hpclab.spec.model import load_specs

    with pytest.raises(HpclabError, match="is a folder"):
        load_specs(tmp_path)
    with pytest.raises(HpclabError, match="not found"):
        load_specs(tmp_path / "nope.yaml")


@pytest.mark.parametrize("fields, value", [({"mem": 2000}, ("mem", 2000)), ({"mem": "2G"}, ("mem", 2048)),
                                           ({"mem_per_cpu": "500M"}, ("mem_per_cpu", 500)),
                                           ({"mem_per_cpu": "1.5G"}, ("mem_per_cpu", 1536))])
def test_memory_fields_take_mb_or_units(fields, value):
    """Do mem and mem_per_cpu accept MB or a size with a unit, stored as whole MB?"""
    assert getattr(make_spec(kernel="stream", **fields), value[0]) == value[1]


@pytest.mark.parametrize("fields, words", [({"mem": "lots"}, "not a size"), ({"mem": 0}, "mem"),
                                           ({"mem": True}, "memory must be"),
                                           ({"mem": 100, "mem_per_cpu": 10}, "not both")])
def test_bad_memory_fields_are_rejected(fields, words):
    """Is a memory field that is not a size, zero, a bool or both fields at once rejected?"""
    with pytest.raises(HpclabError, match=words):
        make_spec(kernel="stream", **fields)


@pytest.mark.parametrize("fields, ok", [({"mem": 4000}, True), ({"mem": 9000}, False),
                                        ({"mem_per_cpu": 1000, "ntasks": 4}, True),
                                        ({"mem_per_cpu": 3000, "ntasks": 4}, False)])
def test_memory_is_checked_against_the_partition(fields, ok):
    """Is a job asking more memory per node than the partition's nodes have rejected, naming
    both numbers, and one that fits accepted?"""
    import dataclasses

    site = dataclasses.replace(SITE, partitions=(dataclasses.replace(SITE.partitions[0], mem_per_node=8000),))
    spec = make_spec(kernel="stream", **fields)
    if ok:
        assert not [w for w, _ in spec_checks.problems(spec, site, facts(partition=site.partitions[0]))
                    if "memory" in w]
    else:
        with pytest.raises(HpclabError, match="8000 MB"):
            spec_checks.check(spec, site, facts(partition=site.partitions[0]))
