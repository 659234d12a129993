"""Virtual nodes: several slurmd 'nodes' on one machine, each in its own namespaces and CPU subset.

The first tests need nothing running (profiles, planning, the files a node sees). The cluster tests
start real multi-node clusters, run MPI across them and put the single-node cluster back at the end.
Scratch files live below build/, not /tmp: every virtual node has a private /tmp.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.cluster import config, links, local, netns, vnodes
from hpclab.core.errors import HpclabError

# --- without a cluster ------------------------------------------------------------------------


def test_course_profiles_exist_and_rates_are_ordered():
    """Are unshaped, 10g, 1g and 100m defined, with rates falling in that order?"""
    p = links.load_profiles()
    assert {"unshaped", "10g", "1g", "100m"} <= set(p)
    assert not p["unshaped"].shaped
    assert p["10g"].rate_bytes_per_s > p["1g"].rate_bytes_per_s > p["100m"].rate_bytes_per_s
    assert p["1g"].rate_bytes_per_s == 125e6  # 1000 Mbit/s = 125 MB/s, MB = 10^6 bytes


def test_token_bucket_holds_at_least_two_frames():
    """Is every shaped profile's bucket deep enough for tbf (>= 2 frames) and its queue deeper?"""
    for prof in links.load_profiles().values():
        if prof.shaped:
            assert prof.burst_bytes() >= 2 * links.ETHERNET_FRAME
            assert prof.limit_bytes() > prof.burst_bytes()


def test_unknown_profile_names_the_known_ones():
    """Does --link with a typo end in an error that lists the real profiles?"""
    with pytest.raises(HpclabError) as e:
        links.get_profile("1G-typo")
    assert "1g" in e.value.hint and "unshaped" in e.value.hint


def test_malformed_profile_file_is_a_clear_error(tmp_path):
    """Does a profile without a rate end in an HpclabError naming the profile?"""
    bad = tmp_path / "links.yaml"
    bad.write_text("slow:\n  delay_us: 5\n  burst_us: 1\n  about: x\n")
    with pytest.raises(HpclabError, match="slow"):
        links.load_profiles(bad)


def test_plan_spreads_nodes_round_robin_over_the_cpus():
    """Do N nodes of C CPUs get C distinct CPUs each, filling the machine's CPUs in turn?"""
    cpus = vnodes.machine_cpus()
    nodes = vnodes.plan(4, 1)
    assert [n.name for n in nodes] == ["node1", "node2", "node3", "node4"]
    assert [n.cpuset for n in nodes] == [[cpus[k % len(cpus)]] for k in range(4)]
    assert len({n.addr for n in nodes}) == 4 and all(n.netns for n in nodes)
    full = vnodes.plan(1, len(cpus))[0]
    assert full.cpuset == cpus and full.hardware.cpus == len(cpus)


@pytest.mark.parametrize("nodes,cpus", [(0, 1), (vnodes.MAX_NODES + 1, 1), (2, 0), (2, 10_000)])
def test_impossible_node_counts_are_refused(nodes, cpus):
    """Are zero nodes, too many nodes, or more CPUs per node than the machine has refused?"""
    with pytest.raises(HpclabError):
        vnodes.plan(nodes, cpus)


def test_mca_file_yields_only_when_oversubscribed():
    """Does the nodes' Open MPI file keep MPI on the bridge always, and yield only when oversubscribed?"""
    shared = vnodes.mca_params(oversubscribed=True)
    alone = vnodes.mca_params(oversubscribed=False)
    for text in (shared, alone):
        assert f"btl_tcp_if_include = {vnodes.SUBNET}" in text
        assert f"oob_tcp_if_include = {vnodes.SUBNET}" in text
    assert "mpi_yield_when_idle = 1" in shared and "mpi_yield_when_idle" not in alone


def test_hosts_file_names_every_node_once():
    """Does the hosts file a node sees map the controller and every node to its bridge address?"""
    text = vnodes.hosts_file([("vm", vnodes.CONTROLLER_ADDR), ("node1", "10.213.0.1"), ("node2", "10.213.0.2")])
    assert re.search(r"^10\.213\.0\.254 vm$", text, re.M)
    assert re.search(r"^10\.213\.0\.2 node2$", text, re.M)
    assert "127.0.0.1 localhost" in text


# --- objects the project did not create (no root needed: the system is stood in for) ------------


@pytest.fixture
def fake_system(tmp_path, monkeypatch):
    """A state folder, /run/netns and cpuset root below tmp_path, and no network devices: returns
    (layout, set of device names that 'exist'). Nothing here touches the real machine."""
    devices: set[str] = set()
    monkeypatch.setattr(netns, "NETNS_DIR", tmp_path / "netns")
    monkeypatch.setattr(netns, "CPUSET_ROOT", tmp_path / "cpuset")
    monkeypatch.setattr(vnodes, "_link_exists", lambda name: name in devices)

    def no_commands(argv, what):
        raise AssertionError(f"ran {argv} ({what}) on the real machine")

    monkeypatch.setattr(vnodes, "_run", no_commands)
    (tmp_path / "netns").mkdir()
    (tmp_path / "cpuset").mkdir()
    (tmp_path / "cpuset" / "cpuset.mems").write_text("0\n")
    return config.Layout(tmp_path / "state"), devices


def test_foreign_bridge_is_refused_and_not_recorded(fake_system):
    """Does a device called hpclab0 that the record does not hold stop `up`, with the command that
    removes it, and stay out of the record (so `down` will not delete it)?"""
    lay, devices = fake_system
    devices.add(vnodes.BRIDGE)
    with pytest.raises(HpclabError) as e:
        vnodes._make_bridge(lay)
    assert vnodes.BRIDGE in e.value.what and f"ip link del {vnodes.BRIDGE}" in e.value.hint
    assert vnodes._load_record(lay)["bridge"] == []


def test_foreign_cgroup_is_neither_adopted_nor_emptied(fake_system):
    """Is an existing hpclab-node1 cpuset cgroup refused, kept out of the record, and left with its
    tasks by the teardown that `down` runs?"""
    lay, _ = fake_system
    cg = vnodes.cgroup_dir("hpclab-node1")
    cg.mkdir()
    (cg / "tasks").write_text("1\n")  # never signalled: the teardown must not even look at it
    with pytest.raises(HpclabError, match="hpclab-node1") as e:
        vnodes._make_cgroup(lay, "hpclab-node1", [0])
    assert f"rmdir {cg}" in e.value.hint
    assert vnodes._load_record(lay)["cgroup"] == []
    assert vnodes._teardown(lay) == []
    assert (cg / "tasks").read_text() == "1\n"


def test_foreign_objects_lists_every_taken_name_not_in_the_record(fake_system):
    """Before `up --nodes 2` creates anything: are the taken names found, and are the ones the record
    holds (a crashed cluster of ours) left to the teardown instead?"""
    lay, devices = fake_system
    devices.update({"hpclab-v1", "hpclab-v2"})
    (netns.NETNS_DIR / "hpclab-node2").touch()
    vnodes.cgroup_dir("hpclab-node1").mkdir()
    (vnodes.cgroup_dir("hpclab-node1") / "tasks").write_text("4242\n")   # someone's process in it
    vnodes._save_record(lay, {**{k: [] for k in vnodes.KINDS}, "veth": ["hpclab-v2"]})
    found = vnodes.foreign_objects(lay, 2)
    assert found == [("veth", "hpclab-v1"), ("cgroup", str(vnodes.cgroup_dir("hpclab-node1"))),
                     ("netns", "hpclab-node2")]
    with pytest.raises(HpclabError) as e:
        vnodes._refuse_foreign(found)
    assert "ip link del hpclab-v1" in e.value.hint and "ip netns del hpclab-node2" in e.value.hint
    assert vnodes.foreign_objects(lay, 3) == found  # node3's names are all free


def test_a_failed_creation_leaves_the_record(fake_system, monkeypatch):
    """If `ip link add` fails (say the name was taken a moment after the check), is the name taken
    out of the record again?"""
    lay, _ = fake_system

    def fails(argv, what):
        raise HpclabError(f"{what} failed")

    monkeypatch.setattr(vnodes, "_run", fails)
    with pytest.raises(HpclabError):
        vnodes._make_bridge(lay)
    assert vnodes._load_record(lay)["bridge"] == []


def test_link_in_effect_reads_what_up_recorded(fake_system):
    """Does the status helper give the link line of the virtual network that exists, and None
    when there is none?"""
    lay, _ = fake_system
    assert vnodes.link_in_effect(lay) is None
    vnodes.layout_file(lay).parent.mkdir(parents=True, exist_ok=True)
    line = "link '1g': rate 1000 Mbit/s (125 MB/s) by tbf on 4/4 veth ends"
    vnodes.layout_file(lay).write_text(json.dumps(
        {"nodes": 2, "cpus_per_node": 1, "link": "1g", "oversubscribed": False, "link_summary": line}))
    assert vnodes.link_in_effect(lay) is None  # a layout without a recorded bridge: nothing runs
    vnodes._save_record(lay, {**{k: [] for k in vnodes.KINDS}, "bridge": [vnodes.BRIDGE]})
    assert vnodes.link_in_effect(lay) == line


# --- link profiles on a kernel without sch_netem --------------------------------------------------


def _fake_tc(netem: bool):
    """A stand-in for links._tc: tbf always works; netem only if the kernel 'has' sch_netem."""
    calls = []

    def tc(netns, *args):
        calls.append((netns, args))
        if "netem" in args and not netem:
            return subprocess.CompletedProcess(["tc", *args], 2, "", "Error: Specified qdisc kind is unknown.\n")
        return subprocess.CompletedProcess(["tc", *args], 0, "", "")

    return tc, calls


def test_missing_netem_keeps_the_rate_and_reports_the_delay_not_applied(monkeypatch):
    """Without sch_netem: is the rate still set, the delay marked not applied with tc's reason, and
    does the summary say 'NOT applied' rather than claim the delay?"""
    prof = links.get_profile("1g")
    assert prof.delay_us > 0
    tc, calls = _fake_tc(netem=False)
    monkeypatch.setattr(links, "_tc", tc)
    applied = [links.apply("hpclab-v1", prof), links.apply("eth0", prof, netns="hpclab-node1")]
    assert all(a.rate and not a.delay for a in applied)
    assert "no sch_netem" in applied[0].notes[0] and "qdisc kind is unknown" in applied[0].notes[0]
    assert calls[-1][0] == "hpclab-node1"  # the node's end is shaped inside its namespace
    text = links.summary(prof, applied)
    assert "tbf on 2/2 veth ends" in text
    assert f"delay {prof.delay_us:g} us NOT applied" in text


def test_summary_says_which_ends_got_the_delay(monkeypatch):
    """With netem on every end, on some, or an unshaped profile: does the summary say exactly that?"""
    prof = links.get_profile("100m")
    with_netem, _ = _fake_tc(netem=True)
    without, _ = _fake_tc(netem=False)
    monkeypatch.setattr(links, "_tc", with_netem)
    both = [links.apply("a", prof), links.apply("b", prof)]
    assert f"delay {prof.delay_us:g} us by netem on every end" in links.summary(prof, both)
    monkeypatch.setattr(links, "_tc", without)
    half = both[:1] + [links.apply("c", prof)]
    assert "on only 1/2 ends" in links.summary(prof, half)
    unshaped = links.get_profile("unshaped")
    assert links.apply("d", unshaped) == links.Applied("d", "")  # nothing is run for it
    assert "not shaped" in links.summary(unshaped, [])


# --- the command line ----------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["cluster", "up", "--cpus-per-node", "1"],
                                  ["cluster", "down", "--nodes", "2", "--cpus-per-node", "1"]])
def test_cpus_per_node_without_virtual_nodes_is_an_error(argv, monkeypatch, capsys):
    """Is --cpus-per-node without --nodes (or outside `up`) refused with a message, before any
    cluster is started or stopped, instead of being silently ignored?"""
    from hpclab.cli import main as cli

    def must_not_run(*a, **k):
        raise AssertionError("the cluster was touched")

    for name in ("up", "down"):
        monkeypatch.setattr(local, name, must_not_run)
        monkeypatch.setattr(vnodes, name, must_not_run)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "--cpus-per-node" in err and "--nodes" in err


# --- with real virtual clusters ------------------------------------------------------------------

PINGPONG = paths.bin_dir() / "pingpong"
POISSON = paths.bin_dir() / "poisson"


@pytest.fixture(scope="module")
def vcluster(cluster):
    """Start a virtual cluster on demand: vcluster(nodes, cpus, link) -> env for Slurm commands.

    At the end the network is removed and the single-node cluster others rely on comes back.
    """
    def start(nodes: int, cpus: int | None = None, link: str = "unshaped"):
        vnodes.down()
        report = vnodes.up(nodes=nodes, cpus_per_node=cpus, link=link)
        assert report.nodes == [f"node{k}" for k in range(1, nodes + 1)]
        return report

    yield start
    vnodes.down()
    local.up()


@pytest.fixture
def scratch():
    """A folder every node can see (below build/, since each node has a private /tmp)."""
    root = paths.build_dir() / "test-vnodes"
    root.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(dir=root))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _run(argv: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(argv)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def _pingpong(cwd: Path, name: str, launcher: list[str], max_bytes: int) -> dict:
    _run(launcher + [str(PINGPONG), "--max-bytes", str(max_bytes), "--json", str(cwd / name)], cwd)
    return json.loads((cwd / name).read_text())


def _row(report: dict, nbytes: int) -> dict:
    return next(r for r in report["results"]["rows"] if r["bytes"] == nbytes)


def _ended(pid: int) -> bool:
    """Has process `pid` ended (gone, or a zombie its parent has not reaped yet)?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _wait_idle(names: list[str], timeout: float = 60) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    states = {}
    while time.monotonic() < deadline:
        states = local.node_states()
        if all(states.get(n, "").startswith("idle") for n in names):
            return states
        time.sleep(0.5)
    return states


@pytest.mark.cluster
@pytest.mark.slow
def test_two_nodes_pingpong_shared_memory_inside_tcp_across(vcluster, scratch):
    """With two nodes on a 1g link: are both idle, is a node-internal pingpong shared memory, the
    cross-node one TCP and several times slower at small sizes, and its bandwidth the link's?"""
    if not PINGPONG.exists():
        pytest.skip("build/bin/pingpong is not built: run 'make -C src'")
    report = vcluster(2, 2, "1g")  # 2 CPUs each, so that two ranks fit inside one node
    assert "OVERSUBSCRIBED" in report.client_config  # 2 nodes x 2 CPUs on a 2-core machine
    assert "tbf on 4/4 veth ends" in report.client_config
    assert _wait_idle(["node1", "node2"]) == {"node1": "idle", "node2": "idle"}
    status = subprocess.run([sys.executable, "-m", "hpclab.cli.main", "cluster", "status"], capture_output=True,
                            text=True, timeout=60).stdout
    assert "link '1g': rate" in status, f"cluster status does not name the link profile:\n{status}"

    inside = _pingpong(scratch, "inside.json", ["srun", "--mpi=pmix", "-N1", "-n2", "-w", "node1"], 4096)
    across = _pingpong(scratch, "across.json",
                       ["srun", "--mpi=pmix", "-N2", "-n2", "--ntasks-per-node=1"], 4 * 1024 * 1024)
    assert "vader" in inside["results"]["transport"]["btl"]
    assert "tcp" in across["results"]["transport"]["btl"]
    t_in, t_across = _row(inside, 0)["t_usec"], _row(across, 0)["t_usec"]
    assert t_across > 3 * t_in, f"across {t_across} us vs inside {t_in} us"
    big = max(across["results"]["rows"], key=lambda r: r["bytes"])
    rate = links.get_profile("1g").rate_bytes_per_s / 1e6
    assert 0.8 * rate <= big["mbytes_per_sec"] <= 1.2 * rate, f"{big['mbytes_per_sec']} MB/s on a {rate} MB/s link"


@pytest.mark.cluster
@pytest.mark.slow
def test_mpirun_inside_an_allocation_spans_nodes(vcluster, scratch):
    """Does mpirun in a two-node batch job start one rank per node, with its own hostname each?"""
    vcluster(2, 1, "unshaped")
    script = scratch / "job.sh"
    script.write_text("#!/bin/bash\nmpirun --allow-run-as-root -np 2 --map-by node hostname\n")
    r = _run(["sbatch", "--parsable", "--wait", "-N2", "--ntasks-per-node=1", f"--chdir={scratch}",
              "--output=out.txt", str(script)], scratch)
    assert r.returncode == 0
    assert sorted((scratch / "out.txt").read_text().split()) == ["node1", "node2"]


@pytest.mark.cluster
@pytest.mark.slow
def test_four_oversubscribed_nodes_run_poisson_confined_to_their_cpus(vcluster, scratch):
    """On four 1-CPU nodes sharing two cores: does each task see its node's name and CPU, and does a
    2D Poisson run across all four nodes complete and validate under srun?"""
    report = vcluster(4, 1, "unshaped")
    assert "OVERSUBSCRIBED" in report.client_config
    where = _run(["srun", "-N4", "-n4", "--ntasks-per-node=1", "bash", "-c",
                  "echo $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"], scratch)
    seen = dict(line.split() for line in where.stdout.splitlines())
    planned = {n.name: ",".join(map(str, n.cpuset)) for n in vnodes.plan(4, 1)}
    assert seen == planned
    mca = _run(["srun", "-N1", "-w", "node3", "cat", "/etc/openmpi/openmpi-mca-params.conf"], scratch).stdout
    assert "mpi_yield_when_idle = 1" in mca, "oversubscribed nodes make Open MPI yield"
    if not POISSON.exists():
        pytest.skip("build/bin/poisson is not built: run 'make -C src'")
    r = _run(["srun", "--mpi=pmix", "-N4", "-n4", "--ntasks-per-node=1", str(POISSON), "--n", "64", "--grid", "2x2"],
             scratch, timeout=300)
    assert "Solution validates" in r.stdout


def _our_slurmds() -> list[int]:
    """Pids of slurmd processes started for virtual nodes (command line names a nodeK)."""
    pids = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode(errors="replace")).name == "slurmd" and \
                any(re.fullmatch(rb"node\d+", a) for a in argv):
            pids.append(int(p.name))
    return pids


@pytest.mark.cluster
@pytest.mark.slow
def test_up_down_twice_leaves_nothing_behind(vcluster):
    """After up and down, twice: is there no namespace, veth, bridge, cgroup or node slurmd left?"""
    for _ in range(2):
        vcluster(2, 1, "100m")
        state = vnodes.network_state()
        assert state.bridge and len(state.netns) == 2 and len(state.veths) == 2 and len(state.cgroups) == 2
        assert len(_our_slurmds()) == 2
        vnodes.down()
        assert vnodes.network_state() == vnodes.NetworkState(False, [], [], [])
        assert _our_slurmds() == []
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert "hpclab" not in netns
        links_now = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert "hpclab" not in links_now


@pytest.mark.cluster
@pytest.mark.slow
def test_up_after_a_crash_cleans_up_and_starts_fresh(vcluster):
    """If slurmctld and the node slurmds die (kill -9), does the next up clear the leftovers and
    bring both nodes back, with exactly one namespace, veth and cgroup per node?"""
    import os
    import signal

    vcluster(2, 1, "unshaped")
    lay = config.layout()
    victims = [local.slurmctld_daemon(lay)] + [local.slurmd_daemon(lay, n) for n in config.load_nodes(lay)]
    pids = [d.pid() for d in victims]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    # up must meet them dead, not dying: wait until each is gone or a zombie (their pid files stay,
    # as a crash leaves them)
    end = time.monotonic() + 10
    while alive := [p for p in pids if not _ended(p)]:
        assert time.monotonic() < end, f"slurmctld and slurmd pids {alive} still alive 10 s after SIGKILL"
        time.sleep(0.05)
    report = vnodes.up(nodes=2, cpus_per_node=1, link="unshaped")
    assert not report.already_running
    assert _wait_idle(["node1", "node2"]) == {"node1": "idle", "node2": "idle"}
    state = vnodes.network_state()
    assert (len(state.netns), len(state.veths), len(state.cgroups)) == (2, 2, 2)
    assert len(_our_slurmds()) == 2


CG2 = vnodes.cgroup_dir("hpclab-node2")

# How to make, and remove, an object of each kind with one of the project's names that the
# project did not create (a veth's peer gets a name outside the project's).
FOREIGN = {
    "bridge": (["ip", "link", "add", vnodes.BRIDGE, "type", "bridge"], ["ip", "link", "del", vnodes.BRIDGE],
               lambda: vnodes._link_exists(vnodes.BRIDGE)),
    "veth": (["ip", "link", "add", "hpclab-v2", "type", "veth", "peer", "name", "foreign-p2"],
             ["ip", "link", "del", "hpclab-v2"], lambda: vnodes._link_exists("hpclab-v2")),
    "netns": (["ip", "netns", "add", "hpclab-node2"], ["ip", "netns", "del", "hpclab-node2"],
              lambda: vnodes._netns_exists("hpclab-node2")),
    # a cgroup with someone's process in it (an empty one is a leftover, removed: see below)
    "cgroup": (["sh", "-c", f"mkdir {CG2} && cat {CG2.parent}/cpuset.cpus > {CG2}/cpuset.cpus && "
                f"cat {CG2.parent}/cpuset.mems > {CG2}/cpuset.mems && "
                f"(sleep 600 >/dev/null 2>&1 & echo $! > {CG2}/tasks)"],
               ["sh", "-c", f"kill $(cat {CG2}/tasks); sleep 0.3; rmdir {CG2}"],
               lambda: CG2.is_dir()),
}


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize("kind", list(FOREIGN))
def test_up_refuses_a_foreign_object_and_down_leaves_it(vcluster, kind):
    """With a bridge, veth, namespace or cgroup of one of the project's names made by someone else:
    does `up` refuse, naming it, before it creates anything, and does `down` leave it where it was?"""
    make, remove, exists = FOREIGN[kind]
    vnodes.down()  # as multinode.virtual_nodes does: `up` refuses while another cluster runs
    assert not exists(), f"a {kind} of the project's name exists before the test"
    subprocess.run(make, check=True, capture_output=True)
    try:
        with pytest.raises(HpclabError) as e:
            vnodes.up(nodes=2, cpus_per_node=1, link="unshaped")
        how = f"rmdir {CG2}" if kind == "cgroup" else " ".join(remove)   # the hint's removal command
        assert kind in e.value.what and how in e.value.hint
        assert vnodes._load_record(config.layout()) == {k: [] for k in vnodes.KINDS}
        vnodes.down()
        assert exists(), f"down removed a {kind} the project did not create"
        state = vnodes.network_state()
        assert state.bridge == (kind == "bridge") and len(state.netns) == (kind == "netns")
    finally:
        subprocess.run(remove, capture_output=True)
    assert not exists()


def test_an_empty_leftover_cgroup_is_removed_not_refused(fake_system):
    """A node cgroup of our name that holds no process and is in no record (an earlier cluster's,
    its record gone): is it removed so `up` can go ahead, instead of blocking every later
    virtual-node run (as it did in a CI rehearsal)?"""
    lay, _ = fake_system
    cg = vnodes.cgroup_dir("hpclab-node1")
    cg.mkdir()
    assert vnodes.foreign_objects(lay, 1) == []
    assert not cg.exists()
    vnodes._make_cgroup(lay, "hpclab-node1", [0])   # and up makes it afresh
    assert cg.is_dir() and str(cg) in vnodes._load_record(lay)["cgroup"]
