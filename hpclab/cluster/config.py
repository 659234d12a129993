"""Configuration of the embedded Slurm cluster: layout of the state folder and the config files.

Everything the cluster writes lives below one state folder (hpclab.core.paths.state_dir(), git-ignored),
except what users and daemons other than root must reach:

    state folder (the checkout's build/cluster unless HPCLAB_STATE says otherwise)
      run/       pid files
      log/       one log per daemon
      spool/     slurmctld's saved state
      mariadb/   the accounting database's data directory and socket
    its folder below /var/lib/hpclab (hpclab.core.paths.daemon_state_dir: root's, 0755)
      etc/       slurm.conf and what it includes, which every Slurm client reads (any user's
                 sbatch), and slurmdbd.conf and the database password (0600, root's)
      munge/     munged's key (0400), socket, log, pid and seed, owned by the munge user

    /var/spool/hpclab/<hash>/slurmd-<node>/: slurmd's spool, from which a job's script is executed
                 as its user (a short path: PMIx's sockets live there)

A checkout may sit under a home only root can enter (Debian's /root is 0700): a student's sbatch,
a job running as that student and munged (not root) would then reach nothing below it.

Node lines are the machine's own: CPUs, sockets, cores, threads and memory come from `slurmd -C`,
checked against hwloc, so the cluster never claims cores the machine does not have.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.io import ensure_secret, write_atomic, write_if_changed
from hpclab.core.errors import HpclabError

CLUSTER_NAME = "hpclab"
PARTITION = "debug"
# The virtual nodes' bridge (cluster.vnodes makes it): slurmctld listens on the host's address
# there when the cluster has virtual nodes.
BRIDGE = "hpclab0"
SUBNET = "10.213.0.0/24"  # private, used only on the project's bridge
PREFIX_LEN = 24
CONTROLLER_ADDR = "10.213.0.254"  # the host's address on the bridge

MARKER = "# hpclab-managed"  # first line of every file the project may later replace

# Non-default ports, so the embedded cluster never collides with a site's own Slurm or MariaDB.
PORTS = {"slurmctld": 6917, "slurmd": 6918, "slurmdbd": 6919, "mariadb": 13306}


@dataclass
class NodeHardware:
    """What one Slurm node offers: the numbers of a `NodeName=` line."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mb: int


@dataclass
class Node:
    """One slurmd: its Slurm name, the address slurmctld reaches it at, its hardware and,
    for virtual nodes, the host CPUs it is confined to."""

    name: str
    addr: str
    hardware: NodeHardware
    cpuset: list[int] = field(default_factory=list)
    netns: str = ""  # network namespace name; empty for the single host node


@dataclass
class Layout:
    """Paths below the state folder. One object owns every file name of the cluster."""

    root: Path

    @property
    def daemon_root(self) -> Path:
        """Per-checkout folder for daemons that do not run as root (see the module docstring)."""
        return paths.daemon_state_dir(self.root)

    @property
    def etc(self) -> Path:
        # Slurm's clients read slurm.conf as whichever user runs them: outside the checkout.
        return self.daemon_root / "etc"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def slurmd_spool(self) -> Path:
        # A batch job's script is executed from the spool by the job's own user; see
        # paths.short_spool_dir for why this path is short.
        return paths.short_spool_dir(self.root)

    @property
    def mariadb(self) -> Path:
        return self.root / "mariadb"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        return self.etc / "slurmdbd.conf"

    @property
    def cgroup_conf(self) -> Path:
        return self.etc / "cgroup.conf"

    @property
    def policy_conf(self) -> Path:
        """Who may run what (accounts, QOS, priorities, privacy): empty for one user, written by
        the classroom; slurm.conf includes it."""
        return self.etc / "policy.conf"

    @property
    def job_cgroup_tidy(self) -> Path:
        return self.etc / "tidy-job-cgroups"

    @property
    def munge_dir(self) -> Path:
        # munged is strict about ownership: its key, seed and socket live in a folder it owns.
        return self.daemon_root / "munge"

    @property
    def munge_key(self) -> Path:
        return self.munge_dir / "munge.key"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket"

    @property
    def db_password(self) -> Path:
        return self.etc / "db.password"

    @property
    def nodes_json(self) -> Path:
        return self.etc / "nodes.json"

    def pidfile(self, daemon: str) -> Path:
        return self.run / f"{daemon}.pid"

    def logfile(self, daemon: str) -> Path:
        return self.log / f"{daemon}.log"

    def make_dirs(self) -> None:
        # Every folder on the way to the daemon folder is root's and 0755: munged checks that
        # none is writable by others, and every user's Slurm client must get through.
        for folder in (paths.SYSTEM_STATE_ROOT, self.daemon_root, paths.SPOOL_ROOT, self.slurmd_spool):
            folder.mkdir(mode=0o755, exist_ok=True)
            folder.chmod(0o755)
        for d in (self.etc, self.run, self.log, self.spool, self.mariadb):
            d.mkdir(parents=True, exist_ok=True)
        self.etc.chmod(0o755)


def layout() -> Layout:
    return Layout(paths.state_dir())


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def probe_hardware() -> NodeHardware:
    """The machine's node line, from `slurmd -C` (Slurm's own view), cross-checked with hwloc."""
    out = commands.output(["slurmd", "-C"], "ask slurmd for this machine's node line",
                          "run 'make setup' (as root) to install Slurm, then check its installation")
    fields = dict(re.findall(r"(\w+)=(\S+)", out))
    hw = NodeHardware(
        cpus=int(fields["CPUs"]),
        sockets=int(fields.get("SocketsPerBoard", 1)) * int(fields.get("Boards", 1)),
        cores_per_socket=int(fields["CoresPerSocket"]),
        threads_per_core=int(fields["ThreadsPerCore"]),
        # Leave room for the daemons and the OS; Slurm drains a node that reports less than configured.
        memory_mb=max(256, int(int(fields["RealMemory"]) * 0.9)),
    )
    pus = hwloc_pu_count()
    if pus is not None and pus != hw.cpus:
        raise HpclabError(
            f"slurmd -C reports {hw.cpus} CPUs but hwloc sees {pus} processing units",
            "the container or VM hides CPUs from one of them; check 'lstopo' and 'nproc'",
        )
    return hw


def hwloc_pu_count() -> int | None:
    try:
        out = commands.run(["hwloc-calc", "--number-of", "pu", "all"], "count hwloc's processing units")
    except HpclabError:  # hwloc-calc missing: slurmd's count stands alone
        return None
    return int(out.stdout.strip()) if out is not None and out.returncode == 0 and out.stdout.strip().isdigit() else None


def host_node() -> Node:
    """The single node of the default cluster: this machine, reached on loopback."""
    return Node(name=short_hostname(), addr="127.0.0.1", hardware=probe_hardware())


def save_nodes(lay: Layout, nodes: list[Node]) -> None:
    """Record the cluster's nodes in etc/nodes.json (atomically: `down` and `status` read it)."""
    write_atomic(lay.nodes_json, json.dumps([asdict(n) for n in nodes], indent=1) + "\n", mode=0o644)


def load_nodes(lay: Layout) -> list[Node]:
    # A cluster started before etc/ moved out of the checkout keeps its node list there until its
    # next start: `down` must still find (and stop) its slurmds.
    found = next((p for p in (lay.nodes_json, lay.root / "etc" / "nodes.json") if p.exists()), None)
    if found is None:
        return []
    return [Node(**{**n, "hardware": NodeHardware(**n["hardware"])}) for n in json.loads(found.read_text())]


def db_password(lay: Layout) -> str:
    """A random password for the accounting database, made once and kept: 0600 and its creator's
    (root's) from its first byte, since every user can list etc/."""
    return ensure_secret(lay.db_password, lambda: secrets.token_hex(16), mode=0o600).decode().strip()


def render_slurm_conf(lay: Layout, nodes: list[Node]) -> str:
    ctl_host = short_hostname()
    ctl_addr = "127.0.0.1"
    node_lines = []
    if any(n.netns for n in nodes):
        # Virtual nodes reach the controller over the project's bridge, not over loopback.
        # (NoCtldInAddrAny would not help: slurmctld then binds what its hostname resolves to,
        # which /etc/hosts maps to 127.0.0.1, out of the nodes' reach.)
        ctl_addr = CONTROLLER_ADDR
    for n in nodes:
        h = n.hardware
        # A virtual node confined to part of the machine: the other CPUs are specialised (kept
        # from jobs), so Slurm binds tasks only to the node's own CPUs (abstract id = machine id).
        spec = sorted(set(range(h.cpus)) - set(n.cpuset)) if n.netns and n.cpuset else []
        node_lines.append(
            f"NodeName={n.name} NodeAddr={n.addr} NodeHostname={n.name} Port={PORTS['slurmd']} "
            f"CPUs={h.cpus} Boards=1 SocketsPerBoard={h.sockets} CoresPerSocket={h.cores_per_socket} "
            f"ThreadsPerCore={h.threads_per_core} RealMemory={h.memory_mb} State=UNKNOWN"
            + (f" CpuSpecList={','.join(map(str, spec))}" if spec else "")
        )
    names = ",".join(n.name for n in nodes)
    if memory_cgroup():
        task_plugins, over_memory_kill = "task/affinity,task/cgroup", ""
        memory_note = ("Memory limits: the memory cgroup (task/cgroup, cgroup.conf ConstrainRAMSpace) stops\n"
                       "# a job the moment it goes over (step state OUT_OF_MEMORY).\n"
                       "# A job's cgroups are tidied before it starts and after it ends: see tidy-job-cgroups.\n"
                       f"Prolog={lay.job_cgroup_tidy}\nEpilog={lay.job_cgroup_tidy}")
    else:
        task_plugins = "task/affinity"
        over_memory_kill = ("# No writable cgroup v1 memory hierarchy here: a step whose sampled size is above its\n"
                            "# job's memory is killed by Slurm's accounting instead (a peak under 1 s can pass).\n"
                            "JobAcctGatherParams=OverMemoryKill\n")
        memory_note = "Memory limits: see JobAcctGatherParams below."
    return f"""{MARKER}: generated by 'hpclab cluster up'; edits are lost at the next 'up'.
# The embedded cluster of the hpclab course. State: {lay.root}
ClusterName={CLUSTER_NAME}
SlurmctldHost={ctl_host}({ctl_addr})
SlurmctldPort={PORTS['slurmctld']}
SlurmdPort={PORTS['slurmd']}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: a job Slurm requeues (node failure, failed launch) may start again only after its
# old launch credential expired: 31 s here instead of Slurm's default 121 s. Launches on this
# machine take milliseconds, far below the 30 s a credential stays valid.
AuthInfo=socket={lay.munge_socket},cred_expire=30
CredType=cred/munge

StateSaveLocation={lay.spool}/slurmctld
SlurmdSpoolDir={lay.slurmd_spool}/slurmd-%n
SlurmctldPidFile={lay.pidfile('slurmctld')}
SlurmdPidFile={lay.run}/slurmd-%n.pid
SlurmctldLogFile={lay.logfile('slurmctld')}
SlurmdLogFile={lay.log}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info

# Processes are tracked through /proc (no freezer cgroup needed), tasks bound with
# sched_setaffinity (task/affinity), which is what makes --cpu-bind work.
# {memory_note}
ProctrackType=proctrack/linuxproc
TaskPlugin={task_plugins}
MpiDefault=pmix
# srun listens for its tasks on ports of this range, above Linux's ephemeral range (32768-60999),
# so that no other program's outgoing connection can land on srun's socket.
SrunPortRange=61000-61999
LaunchParameters=use_interactive_step

# Scheduling: consumable cores and memory, so jobs share a node core by core and MB by MB (a job
# that asks for no memory gets DefMemPerCPU per CPU: the node's memory shared out over its CPUs);
# the builtin scheduler starts a job the moment it is submitted, which keeps a trivial job's
# turnaround well under a second.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU={def_mem_per_cpu(nodes)}
SchedulerType=sched/builtin
# batch_sched_delay defaults to 3 s, which a student sees as a job that waits for nothing.
# sched_interval: a full scheduling pass every 5 s (default 60), so a job that no event wakes
# (one slurmctld recovered as pending after a crash, see docs/faults.md) starts within 5 s. It
# comes before sched_min_interval because sched/builtin reads the first "interval=" it finds.
SchedulerParameters=batch_sched_delay=0,sched_interval=5,sched_min_interval=0
ReturnToService=2
MinJobAge=300
KillWait=5
InactiveLimit=0
MessageTimeout=10
SlurmdTimeout=120
Waittime=0

AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost={ctl_addr}
AccountingStoragePort={PORTS['slurmdbd']}
# For the slurmdbd connection Slurm takes the munge socket from this option, not from AuthInfo.
AccountingStoragePass={lay.munge_socket}
# Each step's resident size is sampled every second (sacct's MaxRSS).
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
{over_memory_kill}JobCompType=jobcomp/none

{chr(10).join(node_lines)}
PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO

# Accounting enforcement, QOS, fair share and privacy for a room of students (hpclab classroom).
Include {lay.policy_conf}
"""


MEMORY_CGROUP = Path("/sys/fs/cgroup/memory")


def memory_cgroup() -> bool:
    """Does this machine offer a writable cgroup v1 memory hierarchy, which Slurm 22.05's
    task/cgroup (cgroup/v1) can use to enforce memory limits? (A cgroup v2 machine, as most
    laptops are, would need slurmd under systemd's delegation; there the accounting-based kill
    is used.)"""
    import os

    return (MEMORY_CGROUP / "memory.limit_in_bytes").is_file() and os.access(MEMORY_CGROUP, os.W_OK)


def cgroup_version() -> str:
    """Which cgroup interface this machine mounts at /sys/fs/cgroup: "v2" (the unified hierarchy,
    Debian 11 on by default under systemd), "v1" (one hierarchy per controller, as on this
    course's VMs and in containers that keep them), read from the file system type."""
    try:
        return "v2" if _fstype(MEMORY_CGROUP.parent) == "cgroup2" else "v1"
    except OSError:
        return "v1"


def _fstype(path: Path) -> str:
    """The file system type mounted at path ("cgroup2", "tmpfs", ...), from /proc/self/mounts."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and str(path).startswith(parts[1]) and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


def slurm_version() -> tuple[int, int]:
    """The installed Slurm's (major, minor), from `slurmd -V` ("slurm-wlm 24.11.5" -> (24, 11)).
    Raises HpclabError when slurmd is missing or prints no version."""
    done = commands.run(["slurmd", "-V"], "ask slurmd for its version")
    out = done.stdout if done is not None else ""
    m = re.search(r"(\d+)\.(\d+)", out)
    if not m:
        raise HpclabError(f"'slurmd -V' printed no version: {out.strip()[:80]!r}", "check the Slurm installation")
    return int(m.group(1)), int(m.group(2))


def memory_enforcement() -> str:
    """One sentence for a lesson: how the local cluster stops a job that uses more memory than it
    asked for on this machine (cgroup v1 memory controller, or Slurm's sampling), with the
    cgroup version this machine has."""
    if memory_cgroup():
        return (f"This machine mounts cgroup {cgroup_version()} with a writable memory hierarchy: the local "
                "cluster's task/cgroup plugin (cgroup/v1) stops a job step the moment its processes cross the "
                "job's limit (the step's state: OUT_OF_MEMORY).")
    return (f"This machine mounts cgroup {cgroup_version()} without a memory hierarchy the local cluster may use: "
            "Slurm samples each step's memory every second and kills a step over its limit "
            "(JobAcctGatherParams=OverMemoryKill).")


def render_cgroup_conf() -> str:
    """cgroup.conf: memory only (cores are bound by task/affinity; virtual nodes keep their own
    cpuset cgroups). Each slurmd gets its own /sys/fs/cgroup/memory/slurm_<node> hierarchy."""
    swap = (MEMORY_CGROUP / "memory.memsw.limit_in_bytes").is_file()
    return f"""{MARKER}: generated by 'hpclab cluster up'.
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
CgroupAutomount=no
ConstrainCores=no
ConstrainDevices=no
ConstrainRAMSpace=yes
{"ConstrainSwapSpace=yes" + chr(10) + "AllowedSwapSpace=0" if swap else "ConstrainSwapSpace=no"}
"""


def render_job_cgroup_tidy() -> str:
    """The Prolog and Epilog of the embedded cluster (slurmd runs it as root on the job's node).

    Slurm 22.05's cgroup/v1 leaves a job's memory cgroup behind when its batch step is cancelled
    or its slurmstepd is killed (seen in one `make test`: six of the cancelled jobs left their
    slurm_<node>/uid_0/job_N behind).
    Job ids start again at 1 in every new cluster state (another checkout, a reset), and the
    node names (vm, node1, ...) are the same, so a later job N met the old job_N with the old
    limits in it: task/cgroup could not set the new ones, the launch failed ("Slurmd could not
    execve job") and Slurm drained the node, which stopped every later job. Before a job starts
    and after it ends, this removes what is left of that job's cgroups on the node. rmdir
    refuses a cgroup that still holds a process, so a live step is never touched. It always
    exits 0: a failing Prolog or Epilog drains the node too."""
    return f"""#!/bin/sh
{MARKER}: generated by 'hpclab cluster up' (config.render_job_cgroup_tidy says why).
for job in {MEMORY_CGROUP.parent}/*/slurm_"$SLURMD_NODENAME"/uid_*/job_"$SLURM_JOB_ID"; do
    [ -d "$job" ] && find "$job" -depth -type d -exec rmdir {{}} + 2>/dev/null
done
exit 0
"""


def def_mem_per_cpu(nodes: list[Node]) -> int:
    """DefMemPerCPU (MB): the smallest node's memory over its CPUs, so that a node full of
    one-CPU jobs that ask for no memory still fits."""
    return max(1, min(n.hardware.memory_mb // max(1, n.hardware.cpus) for n in nodes)) if nodes else 1


def render_slurmdbd_conf(lay: Layout) -> str:
    return f"""{MARKER}: generated by 'hpclab cluster up'.
AuthType=auth/munge
AuthInfo=socket={lay.munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={PORTS['slurmdbd']}
SlurmUser=root
LogFile={lay.logfile('slurmdbd')}
PidFile={lay.pidfile('slurmdbd')}
DebugLevel=info
StorageType=accounting_storage/mysql
# 127.0.0.1, not localhost: with 'localhost' the MariaDB client library ignores the port and
# looks for the default Unix socket, which our private server does not use.
StorageHost=127.0.0.1
StoragePort={PORTS['mariadb']}
StorageUser=slurm
StoragePass={db_password(lay)}
StorageLoc=slurm_acct_db
"""


def write_configs(lay: Layout, nodes: list[Node]) -> None:
    lay.make_dirs()
    write_if_changed(lay.slurm_conf, render_slurm_conf(lay, nodes))
    if memory_cgroup():
        write_if_changed(lay.cgroup_conf, render_cgroup_conf())
        write_if_changed(lay.job_cgroup_tidy, render_job_cgroup_tidy(), mode=0o755)
    else:
        lay.cgroup_conf.unlink(missing_ok=True)
        lay.job_cgroup_tidy.unlink(missing_ok=True)
    # slurmdbd refuses a config that others can read: it holds the database password.
    write_if_changed(lay.slurmdbd_conf, render_slurmdbd_conf(lay), mode=0o600)
    if not lay.policy_conf.exists():
        write_atomic(lay.policy_conf, NO_POLICY)
    save_nodes(lay, nodes)


NO_POLICY = (f"{MARKER}: the scheduling policy, included by slurm.conf.\n"
             "# Empty: one user, no limits. 'hpclab classroom up' writes a room's policy here.\n")
