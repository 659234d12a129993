"""TCP on the interface the site names (issue 41): on a host with IPv6 beside IPv4, Open MPI 5.0.7's
TCP transport paired no interfaces and every `btl=self,tcp` job failed. Each library's record says
how to pin its TCP to an interface, the site profile names the interface per place, the job counts
the bytes each interface sent, and a job that still meets the pairing problem says so.

The last test builds a learner's kind of network (a namespace whose eth0 has an IPv4 address, an
IPv6 unique-local one and a link-local one) and runs every installed library's TCP selections in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from hpclab.cluster import netns
from hpclab.core.errors import TcpUnpaired
from hpclab.course.lessons import transports as lesson_transports
from hpclab.jobs import experiment, templates
from hpclab.runs.folder import RunFolder
from hpclab.runs.parse import network
from hpclab.site import mpi_libraries, slurm
from hpclab.site.profile import load_site
from hpclab.spec.model import make_spec

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: {lo_rx}  622135    0    0    0     0          0         0 {lo_tx}  622135    0    0    0     0       0          0
  eth0: 5000 40    0    0    0     0          0         0 {eth_tx}  30    0    0    0     0       0          0
"""


def test_the_local_site_names_the_loopback_on_a_node_and_the_virtual_nodes_interface_between():
    """Does the embedded cluster's profile name `lo` for one node and the interface the virtual
    nodes really have (cluster/netns.NODE_IFACE) between nodes?"""
    site = load_site("local")
    assert site.tcp_interface(1) == "lo"
    assert site.tcp_interface(2) == site.tcp_interface(5) == netns.NODE_IFACE


def test_every_library_pins_tcp_with_its_own_variables_for_both_places():
    """Does each record pin TCP in both places, with variables that name the interface?"""
    for lib in mpi_libraries.LIBRARIES:
        for nodes in (1, 2):
            env = lib.tcp_environment(nodes, "ifX")
            assert env and "ifX" in env.values(), (lib.name, nodes)
        assert lib.tcp_environment(1, None) == {}


@pytest.mark.parametrize("nodes, iface", [(1, "lo"), (2, "eth0")])
def test_a_tcp_job_of_the_system_open_mpi_names_the_interface_and_leaves_ipv6_out(nodes, iface):
    """Does a job that selects btl=self,tcp export the interface of its place and IPv6 off, and does
    a spec that names its own interface keep it?"""
    site = load_site("local")
    sp = make_spec(kernel="pingpong", nodes=nodes, ntasks=2, mca={"pml": "ob1", "btl": "self,tcp"})
    env = templates.job_environment(sp, site)
    assert env["OMPI_MCA_btl_tcp_if_include"] == iface and env["OMPI_MCA_btl_tcp_disable_family"] == "6"
    own = make_spec(kernel="pingpong", nodes=nodes, ntasks=2, mca={"btl_tcp_if_include": "eth7"})
    assert templates.job_environment(own, site)["OMPI_MCA_btl_tcp_if_include"] == "eth7"


def test_mpich_on_one_node_pins_libfabric_only():
    """UCX's tcp cannot connect over `lo` (measured: 'tcp/lo - no route'): on one node only
    libfabric's tcp is pinned, between nodes both are."""
    lib = mpi_libraries.get("mpich-5.0.2")
    assert lib.tcp_environment(1, "lo") == {"FI_TCP_IFACE": "lo"}
    assert lib.tcp_environment(2, "eth0") == {"FI_TCP_IFACE": "eth0", "UCX_NET_DEVICES": "eth0"}


def test_mpich_between_virtual_nodes_keeps_ucx_off_shared_memory():
    """Between the embedded cluster's virtual nodes (one kernel), does an MPICH job keep UCX on
    TCP (its shared memory reaches every process of the machine, whatever its node), while a job on
    one node, a site whose nodes are real machines, and a spec's own UCX_TLS are left as they are?"""
    local, real = load_site("local"), load_site("example-cluster")
    assert local.nodes_share_a_kernel and not real.nodes_share_a_kernel

    def env(site, nodes, **kw):
        return templates.job_environment(make_spec(kernel="pingpong", nodes=nodes, ntasks=2, mpi="mpich-5.0.2", **kw), site)

    assert env(local, 2)["UCX_TLS"] == "tcp,self"
    assert "UCX_TLS" not in env(local, 1) and "UCX_TLS" not in env(real, 2)
    assert env(local, 2, env={"UCX_TLS": "sm,self"})["UCX_TLS"] == "sm,self"
    assert all("UCX_TLS" not in templates.job_environment(make_spec(kernel="pingpong", nodes=2, ntasks=2, mpi=m), local)
               for m in (None, "openmpi-5.0.11", "intel-mpi-2021.19"))


def test_the_interface_that_sent_the_bytes_is_named(tmp_path):
    """From /proc/net/dev before and after, is the interface that sent most (from 1 MB on) named,
    'none' for a run whose messages crossed no interface, and None when nothing was counted?"""
    (tmp_path / "provenance").mkdir()
    before = NET_DEV.format(lo_rx=100, lo_tx=100, eth_tx=7000)
    (tmp_path / network.BEFORE).write_text(before)
    (tmp_path / network.AFTER).write_text(NET_DEV.format(lo_rx=300_000_100, lo_tx=300_000_100, eth_tx=9000))
    sent = network.bytes_sent(tmp_path)
    assert sent == {"lo": 300_000_000, "eth0": 2000} and network.carried_by(sent) == "lo"
    (tmp_path / network.AFTER).write_text(NET_DEV.format(lo_rx=4100, lo_tx=4100, eth_tx=7000))
    assert network.carried_by(network.bytes_sent(tmp_path)) == "none"
    (tmp_path / network.AFTER).unlink()
    assert network.bytes_sent(tmp_path) is None and network.carried_by(None) is None


UNPAIRED = ("[vm][[2812,0],1][../../../../../opal/mca/btl/tcp/btl_tcp_proc.c:266:mca_btl_tcp_proc_create_"
            "interface_graph] Unable to find reachable pairing between local and remote interfaces\n")


def test_a_job_that_meets_open_mpis_pairing_problem_says_so_and_what_fixes_it(tmp_path, monkeypatch):
    """Does a job whose stderr holds Open MPI's pairing complaint end as TcpUnpaired, with a reason
    that names the cause, the issue and the variables that fix it?"""
    sp = make_spec(kernel="pingpong", ntasks=2, experiment="unpaired", mca={"pml": "ob1", "btl": "self,tcp"})
    folder = RunFolder.create("unpaired", sp.to_dict(), "#!/bin/bash\n", root=tmp_path)
    folder.write("stderr", UNPAIRED)
    folder.set_status("running", job_id="42")
    run = experiment.Run(folder, sp)
    monkeypatch.setattr(experiment.slurm, "sacct_records", lambda ids: [])
    monkeypatch.setattr(experiment.slurm, "node_trouble", lambda nodes: {})
    experiment._finish(run, slurm.JobInfo("42", "failed", "FAILED", exit_code=14, nodes="node1"))
    st = run.folder.status()
    assert st["failure"] == "tcp_unpaired"
    assert "ompi#14079" in st["reason"] and "btl_tcp_disable_family=6" in st["reason"]
    with pytest.raises(TcpUnpaired) as err:
        experiment.raise_for_failures([run])
    assert "tcp_interfaces" in err.value.hint


# --- a learner's network: IPv4, an IPv6 unique-local address and a link-local one -----------------

def _ip(*args: str, ns: str | None = None) -> None:
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


@pytest.fixture
def dual_stack_namespace():
    """A network namespace with lo and an eth0 carrying 192.0.2.10/24, fd00::10/64 and
    fe80::10/64, as a learner's VM has; removed afterwards."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 to make a network namespace")
    ns = f"hpclab-t41-{uuid.uuid4().hex[:6]}"
    _ip("netns", "add", ns)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0",
                        "net.ipv6.conf.default.accept_dad=0"], check=True, capture_output=True, timeout=30)
        _ip("link", "set", "lo", "up", ns=ns)
        _ip("link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer", ns=ns)
        _ip("addr", "add", "192.0.2.10/24", "dev", "eth0", ns=ns)
        _ip("addr", "add", "fd00::10/64", "dev", "eth0", "nodad", ns=ns)
        _ip("link", "set", "eth0-peer", "up", ns=ns)
        _ip("link", "set", "eth0", "up", ns=ns)
        shown = subprocess.run(["ip", "-n", ns, "-br", "addr", "show", "eth0"], capture_output=True, text=True,
                               timeout=30).stdout
        assert "192.0.2.10/24" in shown and "fd00::10/64" in shown and "fe80::" in shown, shown
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _tcp_runs() -> list[tuple[mpi_libraries.MpiLibrary, str, dict]]:
    """(library, label, the spec's selection as env) for every TCP selection a course job makes:
    each library record's TCP transports, and notebook 02's Open MPI selections that leave TCP to
    carry the messages (ob1+tcp, cm+ofi over libfabric's tcp, the shared-memory BTL excluded)."""
    out = [(lib, sel.label, dict(sel.env)) for lib in mpi_libraries.LIBRARIES
           for sel in lib.transports[1:] if "tcp" in sel.label]
    system = mpi_libraries.get(mpi_libraries.SYSTEM)
    if system.installed():
        chosen = lesson_transports.selections()
        names = [n for n in chosen if "tcp" in n] + [lesson_transports.without_shm_label()]
        for name in names:  # ob1+tcp, cm+ofi (tcp) where this Open MPI has the ofi MTL, no vader/sm
            out.append((system, f"notebook 02: {name}", {f"OMPI_MCA_{k}": v for k, v in chosen[name].mca.items()}))
    return out


@pytest.mark.slow
def test_every_installed_librarys_tcp_selections_run_on_a_dual_stack_host(dual_stack_namespace, mpi_env):
    """In a namespace shaped like a learner's dual-stack machine, does every TCP selection of every
    installed library run a ping-pong to the end with the environment a one-node job gets
    (templates.job_environment with the local site), and do its bytes go through the loopback?"""
    site, ran = load_site("local"), []
    for lib, label, selection in _tcp_runs():
        system = lib.name == mpi_libraries.SYSTEM
        binary = mpi_libraries.build_dirs(None if system else lib.name)[0] / "pingpong"
        if not lib.installed() or not binary.is_file():
            continue
        sp = make_spec(kernel="pingpong", ntasks=2, mpi=None if system else lib.name,
                       mca={k.removeprefix("OMPI_MCA_"): v for k, v in selection.items() if k.startswith("OMPI_MCA_")},
                       env={k: v for k, v in selection.items() if not k.startswith("OMPI_MCA_")})
        env = {**os.environ, **lib.environment(), **templates.job_environment(sp, site)}
        netdev = ["ip", "netns", "exec", dual_stack_namespace, "cat", "/proc/net/dev"]
        before = subprocess.run(netdev, capture_output=True, text=True, timeout=30).stdout
        done = subprocess.run(["ip", "netns", "exec", dual_stack_namespace, *lib.standalone_argv(2),
                               str(binary), "--max-bytes", "1048576", "--reps", "20"],
                              env=env, capture_output=True, text=True, timeout=120)
        after = subprocess.run(netdev, capture_output=True, text=True, timeout=30).stdout
        assert done.returncode == 0, (lib.name, label, done.stderr[-2000:])
        sent = {k: network.parse_net_dev(after)[k] - v for k, v in network.parse_net_dev(before).items()}
        assert sent["lo"] > network.CARRIED_BYTES and sent["eth0"] < network.CARRIED_BYTES, (lib.name, label, sent)
        ran.append(f"{lib.name}: {label}")
    assert ran, "no MPI library is installed here (make setup)"
    print("ran on a dual-stack host:", "; ".join(ran))
