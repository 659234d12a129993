"""Virtual nodes: a multi-node Slurm cluster on one machine (`hpclab cluster up --nodes N`).

Each virtual node `nodeK` is one slurmd in its own network namespace (`hpclab-nodeK`, a veth into
the project's bridge `hpclab0`, address 10.213.0.K), its own UTS namespace (hostname nodeK) and
its own mount namespace (a private /tmp, a hosts file naming every node, and an Open MPI MCA file
that sends MPI traffic over the bridge), confined to a CPU subset by a cpuset cgroup. slurmctld,
slurmdbd and MariaDB stay on the host, which holds 10.213.0.254 on the bridge.

Nothing is routed or NATed outward: the bridge carries only traffic between the host and the
namespaces. Every namespace, link and cgroup is written to a record in the state folder *before*
it is created, so `down` (and `up` after a crash) removes exactly what the project made. A name
enters the record only once `up` has checked that nothing of that name exists: an object with
one of the project's names that the record does not hold belongs to someone else, and `up`
refuses to start rather than adopt it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hpclab.cluster import config, links, local
from hpclab.core import commands
from hpclab.cluster.config import BRIDGE, CONTROLLER_ADDR, PREFIX_LEN, SUBNET
from hpclab.cluster import netns
from hpclab.cluster.netns import (NODE_IFACE, cgroup_dir,
                                  host_veth, layout_file, netns_name, node_addr, node_dir, node_name,
                                  record_file, vnodes_dir)
from hpclab.cluster.config import Layout, Node, NodeHardware
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic

MAX_NODES = 64
REQUIRED_PROGRAMS = ["ip", "tc", "nsenter", "unshare", "taskset", "mount"]


# --- the record of what was created ----------------------------------------------------------

KINDS = ("bridge", "netns", "veth", "cgroup")  # creation order; removal runs in reverse


def _load_record(lay: Layout) -> dict[str, list[str]]:
    try:
        data = json.loads(record_file(lay).read_text())
    except (FileNotFoundError, ValueError):
        return {k: [] for k in KINDS}
    return {k: list(data.get(k, [])) for k in KINDS}


def _save_record(lay: Layout, rec: dict[str, list[str]]) -> None:
    record_file(lay).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(record_file(lay), json.dumps(rec, indent=1))


def _remember(lay: Layout, kind: str, name: str) -> None:
    """Add `name` to the record just before it is created, so a crash in between still finds it.
    Call it only after _refuse_foreign has found no object of that name."""
    rec = _load_record(lay)
    if name not in rec[kind]:
        rec[kind].append(name)
    _save_record(lay, rec)


def _forget(lay: Layout, kind: str, name: str) -> None:
    """Take `name` out of the record when creating it failed: whatever holds the name is not ours."""
    rec = _load_record(lay)
    if name in rec[kind]:
        rec[kind].remove(name)
        _save_record(lay, rec)


def _run(argv: list[str], what: str) -> None:
    commands.output(argv, what, "run 'hpclab cluster down' to remove what was created, then try again")


def _create(lay: Layout, kind: str, name: str, argv: list[str], what: str) -> None:
    """Record `name`, then create it with `argv`; if that fails, the name leaves the record again
    (so `down` never deletes an object that someone else created in the meantime)."""
    _remember(lay, kind, name)
    try:
        _run(argv, what)
    except HpclabError:
        _forget(lay, kind, name)
        raise


def _link_exists(name: str) -> bool:
    done = commands.run(["ip", "link", "show", "dev", name], f"look for the link {name}")
    return done is not None and done.returncode == 0


def _netns_exists(name: str) -> bool:
    return (netns.NETNS_DIR / name).exists()


# --- objects with the project's names that the project did not create -------------------------

def _removal_command(kind: str, name: str) -> str:
    return {"bridge": f"ip link del {name}", "veth": f"ip link del {name}",
            "netns": f"ip netns del {name}", "cgroup": f"rmdir {name}"}[kind]


def foreign_objects(lay: Layout, nodes: int) -> list[tuple[str, str]]:
    """(kind, name) of every bridge, veth, namespace or cgroup that `up --nodes nodes` would create
    and that exists now without being in the project's record. Empty when `up` may go ahead."""
    rec = _load_record(lay)
    wanted = [("bridge", BRIDGE, _link_exists)]
    for k in range(1, nodes + 1):
        wanted += [("netns", netns_name(k), _netns_exists), ("veth", host_veth(k), _link_exists),
                   ("cgroup", str(cgroup_dir(netns_name(k))), lambda c: Path(c).exists())]
    for kind, name, _ in wanted:
        if kind == "cgroup" and name not in rec["cgroup"]:
            _remove_empty_leftover(Path(name))
    return [(kind, name) for kind, name, exists in wanted if name not in rec[kind] and exists(name)]


def _remove_empty_leftover(cg: Path) -> None:
    """Remove a node cgroup of ours by name that holds no process and no child cgroup: a leftover
    of an earlier cluster whose record is gone (its state folder was deleted, or its teardown
    was interrupted; seen in a CI rehearsal, where it then blocked every later virtual-node
    test). It holds nothing, so removing it cannot hurt anyone; a cgroup with a process in it
    stays foreign and is refused."""
    if not cg.is_dir():
        return
    try:
        busy = (cg / "tasks").read_text().split() if (cg / "tasks").exists() else []
    except OSError:
        return
    if not busy and not any(c.is_dir() for c in cg.iterdir()):
        try:
            cg.rmdir()
        except OSError:
            pass  # not empty after all, or not ours to remove: refused below


def _refuse_foreign(found: list[tuple[str, str]]) -> None:
    """Raise an HpclabError naming each foreign object and the command that removes it."""
    if not found:
        return
    what = ", ".join(f"{kind} {name}" for kind, name in found)
    commands = "; ".join(_removal_command(kind, name) for kind, name in found)
    raise HpclabError(
        f"virtual nodes need names that are already taken, and the project's record does not say it "
        f"created them: {what}",
        f"they are left as they are. If they are leftovers of an earlier hpclab cluster (say, its state "
        f"folder was deleted), remove them as root ({commands}) and run 'hpclab cluster up' again; if "
        "something else on this machine uses them, virtual nodes cannot run next to it")


# --- building the network ----------------------------------------------------------------------

def _make_bridge(lay: Layout) -> None:
    _refuse_foreign([("bridge", BRIDGE)] if _link_exists(BRIDGE) else [])
    _create(lay, "bridge", BRIDGE, ["ip", "link", "add", BRIDGE, "type", "bridge"], "create the bridge")
    _run(["ip", "addr", "add", f"{CONTROLLER_ADDR}/{PREFIX_LEN}", "dev", BRIDGE], "address the bridge")
    _run(["ip", "link", "set", BRIDGE, "up"], "bring the bridge up")


def _make_node_net(lay: Layout, k: int) -> None:
    ns, veth = netns_name(k), host_veth(k)
    _refuse_foreign([(kind, name) for kind, name, exists in (("netns", ns, _netns_exists), ("veth", veth, _link_exists))
                     if exists(name)])
    _create(lay, "netns", ns, ["ip", "netns", "add", ns], f"create namespace {ns}")
    _create(lay, "veth", veth, ["ip", "link", "add", veth, "type", "veth", "peer", "name", NODE_IFACE, "netns", ns],
            f"create veth {veth}")
    _run(["ip", "link", "set", veth, "master", BRIDGE], f"attach {veth} to {BRIDGE}")
    _run(["ip", "link", "set", veth, "up"], f"bring {veth} up")
    _run(["ip", "-n", ns, "addr", "add", f"{node_addr(k)}/{PREFIX_LEN}", "dev", NODE_IFACE], f"address {ns}")
    _run(["ip", "-n", ns, "link", "set", NODE_IFACE, "up"], f"bring {ns}'s {NODE_IFACE} up")
    _run(["ip", "-n", ns, "link", "set", "lo", "up"], f"bring {ns}'s loopback up")
    # No default route in the namespace: a node reaches the bridge subnet and nothing else.


def _make_cgroup(lay: Layout, ns: str, cpus: list[int]) -> None:
    """A fresh cpuset cgroup for the node. An existing one with a process in it is never adopted:
    `down` empties the cgroups it removes (killing their tasks), which must only ever hit the
    project's own. An empty leftover of that name is removed first (_remove_empty_leftover)."""
    cg = cgroup_dir(ns)
    _remove_empty_leftover(cg)
    _refuse_foreign([("cgroup", str(cg))] if cg.exists() else [])
    _remember(lay, "cgroup", str(cg))
    try:
        cg.mkdir()
    except FileExistsError:  # appeared since the check: someone else's
        _forget(lay, "cgroup", str(cg))
        _refuse_foreign([("cgroup", str(cg))])
    except OSError as e:
        _forget(lay, "cgroup", str(cg))
        raise HpclabError(f"could not create the cgroup {cg}: {e}", f"check that {netns.CPUSET_ROOT} is writable (run as root)")
    (cg / "cpuset.cpus").write_text(",".join(map(str, cpus)))
    (cg / "cpuset.mems").write_text((netns.CPUSET_ROOT / "cpuset.mems").read_text().strip())


def _wait_reachable(k: int, timeout: float = 10.0) -> None:
    """Until the bridge has learnt the port (a fresh bridge port forwards only after a moment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The node connects to a closed port on the host: "refused" proves the path works both ways.
        r = commands.run(["nsenter", f"--net={netns.NETNS_DIR / netns_name(k)}", "bash", "-c",
                          f"exec 3<>/dev/tcp/{CONTROLLER_ADDR}/9 2>&1"], f"reach the host from node {k}", timeout=5)
        if r is not None and ("refused" in r.stdout + r.stderr or r.returncode == 0):
            return
        time.sleep(0.2)
    raise HpclabError(f"{node_name(k)} cannot reach the host at {CONTROLLER_ADDR} over {BRIDGE}",
                      "check 'ip -br link' and 'bridge link'; then 'hpclab cluster down' and 'up' again")


# --- files each node sees in its mount namespace -----------------------------------------------

def hosts_file(names: list[tuple[str, str]]) -> str:
    """/etc/hosts of a node: loopback, the controller's name and every node, all on the bridge."""
    lines = ["# hpclab virtual nodes: bind-mounted over /etc/hosts inside each node", "127.0.0.1 localhost"]
    lines += [f"{addr} {name}" for name, addr in names]
    return "\n".join(lines) + "\n"


def mca_params(oversubscribed: bool) -> str:
    """The node's Open MPI system MCA file: the host's settings plus the virtual-node ones."""
    base = netns.OMPI_SYSTEM_MCA.read_text() if netns.OMPI_SYSTEM_MCA.exists() else ""
    extra = [
        "",
        "# --- hpclab virtual nodes (bind-mounted over this file inside each node) ---",
        "# Between nodes only the bridge connects them: TCP over it, for MPI and for Open MPI's runtime.",
        f"btl_tcp_if_include = {SUBNET}",
        f"oob_tcp_if_include = {SUBNET}",
    ]
    if oversubscribed:
        extra += [
            "# More virtual CPUs than cores: a rank that busy-polls holds the core its peer needs,",
            "# turning microseconds into scheduler time slices. Yield when there is nothing to do.",
            "mpi_yield_when_idle = 1",
        ]
    return base.rstrip("\n") + "\n" + "\n".join(extra) + "\n"


# --- planning --------------------------------------------------------------------------------

def machine_cpus() -> list[int]:
    """The CPUs this process may run on (machine numbering)."""
    return sorted(os.sched_getaffinity(0))


def plan(nodes: int, cpus_per_node: int | None) -> list[Node]:
    """The virtual nodes: names, addresses, CPU subsets (round robin over the machine's CPUs),
    and a share of the memory. cpus_per_node defaults to an equal share, at least 1."""
    if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise HpclabError(f"--nodes must be between 1 and {MAX_NODES}, not {nodes}",
                          "ask for a few nodes, e.g. --nodes 2 (each is a slurmd on this machine)")
    cpus = machine_cpus()
    c = cpus_per_node if cpus_per_node is not None else max(1, len(cpus) // nodes)
    if not isinstance(c, int) or not 1 <= c <= len(cpus):
        raise HpclabError(f"--cpus-per-node must be between 1 and {len(cpus)} (this machine's CPUs), not {c}",
                          "a virtual node cannot have more CPUs than the machine")
    hw = config.probe_hardware()
    # The node line keeps the machine's layout: Slurm numbers a node's CPUs from 0 and binds task
    # k to machine CPU k, so a node whose subset does not start at CPU 0 cannot be described as a
    # smaller machine. The CPUs outside the subset become Slurm's CpuSpecList (never given to jobs).
    hardware = NodeHardware(hw.cpus, hw.sockets, hw.cores_per_socket, hw.threads_per_core,
                            max(128, hw.memory_mb // nodes))
    out = []
    for k in range(1, nodes + 1):
        subset = sorted({cpus[((k - 1) * c + i) % len(cpus)] for i in range(c)})
        out.append(Node(name=node_name(k), addr=node_addr(k), hardware=hardware, cpuset=subset, netns=netns_name(k)))
    return out


@dataclass
class VLayout:
    """What `up` was asked for: kept so a second `up` can tell the same cluster from another."""

    nodes: int
    cpus_per_node: int
    link: str
    oversubscribed: bool
    link_summary: str


def _load_layout(lay: Layout) -> VLayout | None:
    try:
        return VLayout(**json.loads(layout_file(lay).read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None


def _save_layout(lay: Layout, vl: VLayout) -> None:
    """Record what `up` made (atomically: a second `up`, `status` and `down` read it)."""
    layout_file(lay).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(layout_file(lay), json.dumps(asdict(vl), indent=1) + "\n", mode=0o644)


# --- up / down --------------------------------------------------------------------------------

def _check_tools() -> None:
    missing = [p for p in REQUIRED_PROGRAMS if not shutil.which(p)]
    if missing:
        raise HpclabError(f"programs missing for virtual nodes: {', '.join(missing)}",
                          "install iproute2 and util-linux (apt-get install iproute2 util-linux)")
    if not netns.CPUSET_ROOT.is_dir():
        raise HpclabError(f"no cpuset cgroup at {netns.CPUSET_ROOT}: virtual nodes cannot be confined to CPUs",
                          "run on a machine with the cgroup v1 cpuset controller mounted there")


def _up(nodes: int = 2, cpus_per_node: int | None = None, link: str = "unshaped",
       timeout: float = 90.0) -> local.UpReport:
    """Start a cluster of `nodes` virtual nodes with `cpus_per_node` CPUs each, linked by `link`.

    Idempotent for the same arguments; refuses while a different cluster runs. Returns
    local.UpReport; its client_config also names the link profile and what of it took effect,
    and warns when the nodes have more CPUs than the machine has cores.
    """
    t0 = time.monotonic()
    local.check_prerequisites()
    _check_tools()
    profile = links.get_profile(link)
    wanted = plan(nodes, cpus_per_node)
    c = len(wanted[0].cpuset)
    lay = config.layout()
    lay.make_dirs()

    current = config.load_nodes(lay)
    if current and all(d.running() for d in local.daemons(lay, current)):
        have = _load_layout(lay)
        if have and [n.name for n in current] == [n.name for n in wanted] and \
                (have.cpus_per_node, have.link) == (c, link):
            rep = local.up(nodes=wanted, timeout=timeout)
            return local.UpReport(True, time.monotonic() - t0, rep.nodes, rep.client_config + "\n  " + have.link_summary)
        raise HpclabError(
            f"the cluster is running with other nodes or links ({', '.join(n.name for n in current)}"
            + (f", {have.cpus_per_node} CPUs each, link '{have.link}'" if have else "") + ")",
            "stop it first with 'hpclab cluster down', then start the one you want",
        )

    local.refuse_if_shared(f"start {nodes} virtual nodes in place of the running cluster")
    # A name that is taken but not in the record is someone else's: refuse before stopping or
    # creating anything (what the record holds is ours, and the teardown below removes it).
    _refuse_foreign(foreign_objects(lay, nodes))
    # Leftovers of a crashed or half-started cluster: its daemons first, then its network.
    local.down()
    _teardown(lay)

    ncores = len(machine_cpus())
    oversubscribed = nodes * c > ncores
    names = [(config.short_hostname(), CONTROLLER_ADDR)] + [(n.name, n.addr) for n in wanted]
    applied: list[links.Applied] = []
    _make_bridge(lay)
    for k, n in enumerate(wanted, start=1):
        d = node_dir(lay, n.name)
        shutil.rmtree(d, ignore_errors=True)  # a fresh /tmp for every fresh node
        (d / "tmp").mkdir(parents=True)
        (d / "tmp").chmod(0o1777)
        write_atomic(d / "hosts", hosts_file(names), mode=0o644)
        write_atomic(d / "openmpi-mca-params.conf", mca_params(oversubscribed), mode=0o644)
        _make_node_net(lay, k)
        _make_cgroup(lay, n.netns, n.cpuset)
        applied.append(links.apply(host_veth(k), profile))
        applied.append(links.apply(NODE_IFACE, profile, netns=n.netns))
    for k in range(1, nodes + 1):
        _wait_reachable(k)
    link_summary = links.summary(profile, applied)
    _save_layout(lay, VLayout(nodes, c, link, oversubscribed, link_summary))

    rep = local.up(nodes=wanted, timeout=timeout)
    notes = [rep.client_config, link_summary]
    placement = "; ".join(f"{n.name} CPUs {','.join(map(str, n.cpuset))}" for n in wanted)
    notes.append(f"nodes on the bridge {BRIDGE} ({SUBNET}), controller at {CONTROLLER_ADDR}; {placement}")
    if oversubscribed:
        notes.append(f"OVERSUBSCRIBED: {nodes} nodes x {c} CPUs = {nodes * c} CPUs on {ncores} cores. Ranks share "
                     "cores; Open MPI is set to yield when idle (mpi_yield_when_idle=1) inside the nodes, and timings "
                     "include waiting for a core")
    return local.UpReport(False, time.monotonic() - t0, rep.nodes, "\n  ".join(notes))


def _kill_cgroup(cg: Path, timeout: float = 15.0) -> None:
    """Empty a node's cgroup: everything in it was started by that node's slurmd."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pids = [int(p) for p in (cg / "tasks").read_text().split()]
        except FileNotFoundError:
            return
        if not pids:
            break
        # Job steps that outlived their slurmd (the daemons are already stopped): end them.
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM if time.monotonic() < deadline - timeout / 2 else signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    try:
        cg.rmdir()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise HpclabError(f"could not remove the cgroup {cg}: {e}", f"see which processes remain: cat {cg}/tasks")


def _teardown(lay: Layout) -> list[str]:
    """Remove every recorded network object and cgroup that still exists; return what went."""
    rec = _load_record(lay)
    removed = []
    for cg in rec["cgroup"]:
        if Path(cg).exists():
            _kill_cgroup(Path(cg))
            removed.append(f"cgroup {Path(cg).name}")
    for veth in rec["veth"]:
        if _link_exists(veth):  # deleting one end deletes the pair and its qdiscs
            commands.run(["ip", "link", "del", veth], f"remove {veth}")
            removed.append(f"veth {veth}")
    for ns in rec["netns"]:
        if (netns.NETNS_DIR / ns).exists():
            commands.run(["ip", "netns", "del", ns], f"remove {ns}")
            removed.append(f"netns {ns}")
    for br in rec["bridge"]:
        if _link_exists(br):
            commands.run(["ip", "link", "del", br], f"remove {br}")
            removed.append(f"bridge {br}")
    left = [n for n in rec["veth"] + rec["bridge"] if _link_exists(n)] + \
           [n for n in rec["netns"] if (netns.NETNS_DIR / n).exists()] + [c for c in rec["cgroup"] if Path(c).exists()]
    if left:
        raise HpclabError(f"could not remove: {', '.join(left)}", f"remove them by hand; the record is {record_file(lay)}")
    record_file(lay).unlink(missing_ok=True)
    layout_file(lay).unlink(missing_ok=True)
    for name in [n for n in os.listdir(vnodes_dir(lay))] if vnodes_dir(lay).is_dir() else []:
        if name.startswith("node"):
            shutil.rmtree(vnodes_dir(lay) / name, ignore_errors=True)
    return removed


def _down() -> list[str]:
    """Stop every daemon (local.down) and remove the namespaces, links, qdiscs and cgroups the
    project created. Returns the names of what was stopped or removed; also right for the
    single-node cluster, where there is no network to remove."""
    stopped = local.down()
    return stopped + _teardown(config.layout())


@dataclass
class NetworkState:
    """What of the virtual-node network exists now (for status and tests)."""

    bridge: bool
    netns: list[str]
    veths: list[str]
    cgroups: list[str]


def network_state() -> NetworkState:
    """The project's bridge, namespaces, veths and cgroups that exist now, by their names."""
    ns = sorted(p.name for p in netns.NETNS_DIR.glob("hpclab-node*")) if netns.NETNS_DIR.is_dir() else []
    r = commands.run(["ip", "-o", "link", "show"], "list the network links")
    devs = [line.split(":")[1].strip().split("@")[0] for line in (r.stdout if r else "").splitlines() if ":" in line]
    cgs = sorted(p.name for p in netns.CPUSET_ROOT.glob("hpclab-node*")) if netns.CPUSET_ROOT.is_dir() else []
    return NetworkState(BRIDGE in devs, ns, sorted(d for d in devs if d.startswith("hpclab-v")), cgs)


def link_in_effect(lay: Layout | None = None) -> str | None:
    """The link line `up` printed for the virtual network that exists now: the profile and which
    of its parts took effect (e.g. "delay ... NOT applied"); None when there is no virtual network.
    Meant for `hpclab cluster status`."""
    lay = lay or config.layout()
    have = _load_layout(lay)
    if have is None or BRIDGE not in _load_record(lay)["bridge"]:
        return None
    return have.link_summary


def up(nodes: int = 2, cpus_per_node: int | None = None, link: str = "unshaped", **kwargs):
    """Start the multi-node cluster; one `up`/`down` at a time across processes (see _up)."""
    with local.cluster_lock():
        return _up(nodes=nodes, cpus_per_node=cpus_per_node, link=link, **kwargs)


def down() -> list[str]:
    """Stop the cluster and remove its virtual network; serialised like `up` (see _down)."""
    with local.cluster_lock():
        return _down()
