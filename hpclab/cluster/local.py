"""The embedded Slurm cluster: munged, MariaDB, slurmdbd, slurmctld and slurmd on this machine.

`up` is idempotent (a running cluster is reported and left alone), `down` stops exactly the
daemons whose pid files live in the state folder, and `status` says what runs and where the logs
are. After `up`, the ordinary Slurm commands work through /etc/slurm/slurm.conf when the machine
has no other Slurm configured, and otherwise through `eval "$(hpclab cluster env)"`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.io import ensure_secret, write_if_changed
from hpclab.cluster import config, netns
from hpclab.cluster.config import Layout, Node
from hpclab.cluster.daemons import Daemon, tail
from hpclab.core.errors import HpclabError

SYSTEM_SLURM_CONF = Path("/etc/slurm/slurm.conf")
REQUIRED_PROGRAMS = ["munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sacctmgr", "sinfo"]


# --- environment for Slurm clients ------------------------------------------------------------

def slurm_env(lay: Layout | None = None) -> dict[str, str]:
    """Environment variables that point Slurm commands at the embedded cluster."""
    lay = lay or config.layout()
    return {"SLURM_CONF": str(lay.slurm_conf)}


def _env(lay: Layout) -> dict[str, str]:
    return {**os.environ, **slurm_env(lay)}


def env_script(lay: Layout | None = None) -> str:
    """Shell lines for `eval "$(hpclab cluster env)"`."""
    return "".join(f"export {k}={v}\n" for k, v in slurm_env(lay).items())


# --- daemons -------------------------------------------------------------------------------------

def munge_daemon(lay: Layout) -> Daemon:
    # munged runs as the munge user, so everything it writes lives in the folder that user owns.
    pidfile, logfile = lay.munge_dir / "munged.pid", lay.munge_dir / "munged.log"
    argv = [
        "munged", f"--key-file={lay.munge_key}", f"--socket={lay.munge_socket}",
        f"--pid-file={pidfile}", f"--log-file={logfile}",
        f"--seed-file={lay.munge_dir / 'munged.seed'}", "--num-threads=4",
    ]
    # munged refuses to run as root; setpriv execs it as the munge user without a PAM session.
    prefix = ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups"]
    return Daemon("munged", "munged", argv, pidfile, logfile, prefix=prefix)


def mariadb_daemon(lay: Layout) -> Daemon:
    argv = [
        "mariadbd", "--no-defaults", f"--datadir={lay.mariadb / 'data'}",
        f"--socket={lay.mariadb / 'mysqld.sock'}", f"--port={config.PORTS['mariadb']}",
        "--bind-address=127.0.0.1", f"--pid-file={lay.pidfile('mariadb')}",
        f"--log-error={lay.logfile('mariadb')}", "--user=root", "--skip-name-resolve",
        # Small footprint: the accounting database of one course cluster is tiny.
        "--innodb-buffer-pool-size=64M", "--max-connections=50",
        # slurmdbd needs these InnoDB settings (it warns and may refuse with smaller values).
        "--innodb-log-file-size=64M", "--innodb-lock-wait-timeout=900",
    ]
    return Daemon("mariadb", "mariadbd", argv, lay.pidfile("mariadb"), lay.logfile("mariadb"))


def slurmdbd_daemon(lay: Layout) -> Daemon:
    return Daemon("slurmdbd", "slurmdbd", ["slurmdbd"], lay.pidfile("slurmdbd"), lay.logfile("slurmdbd"),
                  env=slurm_env(lay))


def slurmctld_daemon(lay: Layout) -> Daemon:
    return Daemon("slurmctld", "slurmctld", ["slurmctld", "-f", str(lay.slurm_conf)], lay.pidfile("slurmctld"),
                  lay.logfile("slurmctld"), env=slurm_env(lay))


def slurmd_daemon(lay: Layout, node: Node) -> Daemon:
    prefix: list[str] = []
    if node.netns:
        # A virtual node: its slurmd runs inside the node's namespaces and CPU subset.
        prefix = netns.launch_prefix(lay, node)
    return Daemon(f"slurmd ({node.name})", "slurmd", ["slurmd", "-f", str(lay.slurm_conf), "-N", node.name],
                  lay.run / f"slurmd-{node.name}.pid", lay.log / f"slurmd-{node.name}.log", env=slurm_env(lay),
                  prefix=prefix)


def clear_stale_step_sockets(spool: Path) -> list[str]:
    """Remove the PMIx sockets (and their folders) that killed job steps left in a slurmd spool;
    return their names. Slurm's pmix plugin removes them when a step ends, but not when its
    slurmstepd is killed with its node; job ids repeat after the controller's state is new, and a
    later step with the same id then fails to launch on that node ("Cannot bind() UNIX socket
    .../stepd.slurm.pmix.56.1: Address already in use"). A socket nobody listens on refuses a
    connection: that is the test, so a live step's socket is left alone."""
    removed = []
    for sock in sorted(spool.glob("stepd.slurm.pmix.*")) if spool.is_dir() else []:
        if _listening(sock):
            continue
        sock.unlink(missing_ok=True)
        shutil.rmtree(spool / sock.name.removeprefix("stepd.slurm."), ignore_errors=True)
        removed.append(sock.name)
    return removed


def _listening(sock: Path) -> bool:
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as s:
        s.settimeout(2)
        try:
            s.connect(str(sock))
        except OSError:
            return False
        return True


def daemons(lay: Layout, nodes: list[Node]) -> list[Daemon]:
    """All daemons in start order (stop in reverse)."""
    return [munge_daemon(lay), mariadb_daemon(lay), slurmdbd_daemon(lay), slurmctld_daemon(lay)] + [
        slurmd_daemon(lay, n) for n in nodes
    ]


# --- one `up` or `down` at a time -------------------------------------------------------------

_lock_depth = 0


@contextlib.contextmanager
def cluster_lock(lay: Layout | None = None):
    """Serialise `up` and `down` across processes (two notebooks, a test and a terminal may start
    the cluster at the same moment; two munged started in one second leave one without a pid
    file). Re-entrant within a process, so vnodes.up may call local.up."""
    global _lock_depth
    lay = lay or config.layout()
    if _lock_depth:
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
        return
    lay.root.mkdir(parents=True, exist_ok=True)
    with open(lay.root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _lock_depth = 1
        try:
            yield
        finally:
            _lock_depth = 0
            fcntl.flock(fh, fcntl.LOCK_UN)


# --- a cluster others share -------------------------------------------------------------------

# Set while other processes run jobs on this cluster and expect it as it is (`make test` runs its
# tests two at a time): starting, stopping or reshaping it would cancel their jobs, so it is refused.
SHARED_ENV = "HPCLAB_CLUSTER_SHARED"


def refuse_if_shared(what: str) -> None:
    """Raise instead of `what` (a restart, a stop, other nodes) while HPCLAB_CLUSTER_SHARED is set."""
    if os.environ.get(SHARED_ENV):
        raise HpclabError(
            f"refused to {what}: {SHARED_ENV} is set, so other processes are running jobs on this "
            "cluster, and they would be cancelled",
            "run this alone (make test: add the test to ALONE in tests/conftest.py), or unset "
            f"{SHARED_ENV} when nobody else uses the cluster")


def refuse_policy_change_if_shared(text: str) -> None:
    """refuse_if_shared when `text` would replace the cluster's scheduling policy (apply_policy
    restarts the controller then). A caller that changes other things first (a classroom's
    accounts) asks here before it starts, so a refusal leaves nothing half made."""
    policy = config.layout().policy_conf
    if not (policy.exists() and policy.read_text() == text):
        refuse_if_shared("restart the controller with a new scheduling policy")


# --- up ----------------------------------------------------------------------------------------

def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise HpclabError(
            "the embedded cluster runs its daemons as root, and this process is not root",
            "run 'sudo make cluster-up', or use your site's Slurm with HPCLAB_SITE=<profile>",
        )
    missing = [p for p in REQUIRED_PROGRAMS if not shutil.which(p)]
    if missing:
        raise HpclabError(f"programs missing: {', '.join(missing)}", "run 'make setup' (as root) to install them")
    _check_host_name_resolves()


def _check_host_name_resolves() -> None:
    """MariaDB's set-up and Slurm look the machine's own name up; a system without a line for it
    (a bare debootstrap has no /etc/hosts at all) fails later, deep in a daemon's log."""
    import socket

    name = config.short_hostname()
    try:
        socket.getaddrinfo(name, None)
    except OSError:
        raise HpclabError(f"this machine's host name {name!r} does not resolve to an address",
                          f"add the line '127.0.1.1 {name}' to /etc/hosts (Debian's installer writes one), "
                          "then run 'make cluster-up' again") from None


def _prepare_munge(lay: Layout) -> None:
    import pwd

    munge = pwd.getpwnam("munge")
    # Every folder on the way to munged's own is root's and 0755: munged checks that none of them
    # is writable by others, and clients (jobs of any user) must reach the socket.
    for folder in (paths.SYSTEM_STATE_ROOT, lay.daemon_root):
        folder.mkdir(mode=0o755, exist_ok=True)
        os.chown(folder, 0, 0)
        folder.chmod(0o755)
    lay.munge_dir.mkdir(parents=True, exist_ok=True)
    os.chown(lay.munge_dir, munge.pw_uid, munge.pw_gid)
    lay.munge_dir.chmod(0o755)  # clients must reach the socket; munged checks it is not writable
    # Munge's, 0400 from the first byte: a key readable by others even for a moment is a key
    # anyone on the machine may have copied.
    ensure_secret(lay.munge_key, lambda: os.urandom(1024), mode=0o400, owner=(munge.pw_uid, munge.pw_gid))


def _prepare_mariadb(lay: Layout) -> None:
    data = lay.mariadb / "data"
    if (data / "mysql").is_dir():
        return
    data.mkdir(parents=True, exist_ok=True)
    _run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
          "--auth-root-authentication-method=socket", "--skip-test-db"], "initialise the MariaDB data folder",
         log=lay.logfile("mariadb-install"))


def _wait(check, what: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise HpclabError(f"timed out after {timeout:.0f} s waiting for {what}", f"read the log: {log}\n{tail(log, 8)}")


def _mariadb_sql(lay: Layout, sql: str) -> commands.Completed:
    argv = ["mariadb", "--no-defaults", "-S", str(lay.mariadb / "mysqld.sock"), "-u", "root", "-e", sql]
    done = commands.run(argv, "talk to the cluster's MariaDB", timeout=30)
    return done or commands.Completed(argv, 124, "", "mariadb did not answer within 30 s")


def _prepare_database(lay: Layout) -> None:
    pw = config.db_password(lay)
    sql = (
        "CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
        f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{pw}';"
        f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{pw}';"
        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
    )
    r = _mariadb_sql(lay, sql)
    if r.returncode != 0:
        raise HpclabError(f"could not create the accounting database: {r.stderr.strip()}",
                          f"read {lay.logfile('mariadb')}")


def _sacctmgr(lay: Layout, args: list[str], timeout: float = 20) -> commands.Completed | None:
    """sacctmgr ARGS, or None when it does not answer within `timeout` s (slurmdbd hung or its
    database unreachable: sacctmgr then waits for its connection to time out)."""
    return commands.run(["sacctmgr", *args], "ask sacctmgr", env=_env(lay), timeout=timeout)


def sacctmgr(args: list[str], what: str, timeout: float = 20) -> str:
    """Administer the embedded cluster's accounting (accounts, users, QOS): sacctmgr -i ARGS;
    its output, or HpclabError saying we could not `what`."""
    lay = config.layout()
    return commands.output(["sacctmgr", "-i", *args], what,
                           f"is the cluster up ('hpclab cluster status')? read {lay.logfile('slurmdbd')}",
                           env=_env(lay), timeout=timeout)


def _sacctmgr_ok(lay: Layout) -> bool:
    r = _sacctmgr(lay, ["-n", "-P", "show", "cluster", "format=cluster"])
    return r is not None and r.returncode == 0


def _register_cluster(lay: Layout) -> None:
    r = _sacctmgr(lay, ["-n", "-P", "show", "cluster", "format=cluster"])
    if r is not None and config.CLUSTER_NAME in r.stdout.split():
        return
    r = _sacctmgr(lay, ["-i", "add", "cluster", config.CLUSTER_NAME])
    if r is None:
        raise HpclabError("sacctmgr did not answer within 20 s while registering the cluster",
                          f"slurmdbd or its database hangs: read {lay.logfile('slurmdbd')} and "
                          f"{lay.logfile('mariadb')}, then run 'hpclab cluster up' again")
    if r.returncode != 0 and "already exists" not in (r.stdout + r.stderr):
        raise HpclabError(f"sacctmgr could not register the cluster: {(r.stdout + r.stderr).strip()}",
                          f"read {lay.logfile('slurmdbd')}")


def node_states(lay: Layout | None = None) -> dict[str, str]:
    """Slurm's state of every node, e.g. {'vm': 'idle'}; empty if slurmctld does not answer."""
    lay = lay or config.layout()
    r = commands.run(["sinfo", "-h", "-N", "-o", "%N %T"], "ask sinfo", env=_env(lay), timeout=15)
    if r is None or r.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in r.stdout.splitlines() if line.strip())


def _nodes_ready(lay: Layout, names: list[str]) -> bool:
    states = node_states(lay)
    for name in names:
        state = states.get(name, "").rstrip("*~#!%$@^-")
        if state in ("drained", "draining", "down", "drain", "fail"):
            # A node left down by an earlier crash: Slurm keeps the reason; resume it.
            commands.run(["scontrol", "update", f"nodename={name}", "state=resume"], "resume a node",
                         env=_env(lay), timeout=15)
            return False
        if state not in ("idle", "mixed", "allocated", "completing"):
            return False
    return True


def _virtual_nodes_intact(nodes: list[Node]) -> bool:
    """Are these virtual nodes' namespaces and cgroups still there (only daemons died), so that
    `up` can start the missing slurmd in them?"""
    if not nodes or not all(n.netns for n in nodes):
        return False
    return all((netns.NETNS_DIR / n.netns).exists() and netns.cgroup_dir(n.netns).is_dir() for n in nodes)


def _check_ports_free(lay: Layout) -> None:
    """Refuse to start beside another cluster (a second clone, a site Slurm) that holds our ports."""
    import socket as so

    ours = {d.program for d in daemons(lay, config.load_nodes(lay)) if d.running()}
    owners = {"slurmctld": "slurmctld", "slurmd": "slurmd", "slurmdbd": "slurmdbd", "mariadb": "mariadbd"}
    for name, port in config.PORTS.items():
        if owners[name] in ours:
            continue
        with so.socket(so.AF_INET, so.SOCK_STREAM) as s:
            s.setsockopt(so.SOL_SOCKET, so.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                other = os.path.realpath(SYSTEM_SLURM_CONF) if SYSTEM_SLURM_CONF.is_symlink() else "unknown"
                raise HpclabError(
                    f"port {port} ({name}) is already in use by another process (another hpclab cluster? its config: {other})",
                    "stop the other cluster ('hpclab cluster down' in its checkout) or free the port, then run 'up' again",
                )


def _link_system_conf(lay: Layout) -> str:
    """Make plain `sinfo` work in a new shell, unless another Slurm owns /etc/slurm/slurm.conf."""
    conf = SYSTEM_SLURM_CONF
    ours = conf.is_symlink() or (conf.exists() and conf.read_text(errors="replace").startswith(config.MARKER))
    if conf.exists() and not ours:
        return f'another Slurm is configured in {conf}; use: eval "$(hpclab cluster env)"'
    conf.parent.mkdir(parents=True, exist_ok=True)
    if conf.is_symlink() or conf.exists():
        conf.unlink()
    conf.symlink_to(lay.slurm_conf)
    return f"{conf} -> {lay.slurm_conf}: sinfo, sbatch, squeue and sacct work in any shell"


@dataclass
class UpReport:
    already_running: bool
    seconds: float
    nodes: list[str]
    client_config: str


def up(nodes: list[Node] | None = None, timeout: float = 60.0) -> UpReport:
    """Start the embedded cluster (idempotent) and wait until every node is idle; see _up."""
    with cluster_lock():
        return _up(nodes, timeout)


def _up(nodes: list[Node] | None = None, timeout: float = 60.0) -> UpReport:
    """Start the embedded cluster (idempotent) and wait until every node is idle.

    nodes: the Slurm nodes; default is this machine as one node. Returns what was done and how long
    it took (seconds).
    """
    t0 = time.monotonic()
    check_prerequisites()
    lay = config.layout()
    lay.make_dirs()
    current = config.load_nodes(lay)
    if current and all(d.running() for d in daemons(lay, current)) and _nodes_ready(lay, [n.name for n in current]):
        if nodes is None or [n.name for n in nodes] == [n.name for n in current]:
            release_held_jobs(lay)
            return UpReport(True, time.monotonic() - t0, [n.name for n in current], _link_system_conf(lay))
        raise HpclabError(
            f"the cluster is running with other nodes ({', '.join(n.name for n in current)})",
            "stop it first with 'hpclab cluster down', then start it with the nodes you want",
        )
    refuse_if_shared("start or restart the cluster's daemons")
    # Without an explicit node list the cluster is this machine as one node, unless virtual nodes
    # run and one of their daemons died (a node failure): then the same nodes come back.
    if nodes is None and _virtual_nodes_intact(current):
        nodes = current
    nodes = nodes or [config.host_node()]
    if current and [n.name for n in current] != [n.name for n in nodes]:
        for d in daemons(lay, current):  # leftovers of another layout (e.g. after a crash)
            d.stop()

    _check_ports_free(lay)
    config.write_configs(lay, nodes)
    _prepare_munge(lay)
    munge_daemon(lay).start()
    _prepare_mariadb(lay)
    mariadb_daemon(lay).start(timeout=60)
    _wait(lambda: _mariadb_sql(lay, "SELECT 1").returncode == 0, "MariaDB to accept connections", 60,
          lay.logfile("mariadb"))
    _prepare_database(lay)
    slurmdbd_daemon(lay).start()
    _wait(lambda: _sacctmgr_ok(lay), "slurmdbd to answer (sacctmgr)", 60, lay.logfile("slurmdbd"))
    _register_cluster(lay)
    # slurmctld gone while a slurmd still runs: the controller crashed (or was killed) under
    # running jobs. It recovers from its last state save, which may be up to 5 s old.
    crashed = (not slurmctld_daemon(lay).running() and any(slurmd_daemon(lay, n).running() for n in nodes)
               and not _stopped_cleanly(lay))
    slurmctld_daemon(lay).start()
    for n in nodes:
        slurmd = slurmd_daemon(lay, n)
        if not slurmd.running():
            clear_stale_step_sockets(lay.slurmd_spool / f"slurmd-{n.name}")
        slurmd.start()
    _wait(lambda: _nodes_ready(lay, [n.name for n in nodes]), "the nodes to become idle in sinfo", timeout,
          lay.logfile("slurmctld"))
    _kick_scheduler(lay)
    if crashed:
        _settle_after_crash(lay, [n.name for n in nodes])
    else:
        release_held_jobs(lay)
    return UpReport(False, time.monotonic() - t0, [n.name for n in nodes], _link_system_conf(lay))


def apply_policy(text: str, timeout: float = 60.0) -> bool:
    """Make `text` the cluster's scheduling policy (policy.conf, included by slurm.conf); True if
    it changed. A running controller is restarted, since Slurm reads PriorityType and
    AccountingStorageEnforce only at start: it saves its state on SIGTERM and recovers every
    queued and running job, and the slurmds keep running their jobs meanwhile."""
    with cluster_lock():
        lay = config.layout()
        lay.make_dirs()
        refuse_policy_change_if_shared(text)
        if not write_if_changed(lay.policy_conf, text):
            return False
        ctld = slurmctld_daemon(lay)
        if ctld.running():
            ctld.stop()
            ctld.start()
            names = [n.name for n in config.load_nodes(lay)]
            _wait(lambda: _nodes_ready(lay, names), "the nodes to answer the restarted controller", timeout,
                  lay.logfile("slurmctld"))
            # The slurmds read the new file too (Slurm compares every daemon's slurm.conf digest).
            commands.run(["scontrol", "reconfigure"], "tell the daemons to re-read slurm.conf", env=_env(lay),
                         timeout=20)
            _kick_scheduler(lay)
        return True


# Slurm's reason for a job it requeued and held because the launch failed on a node that still
# ran the job ("Duplicate jobid", the node drained): see docs/faults.md.
HELD_AFTER_FAILED_LAUNCH = "launch failed requeued held"
CRASH_SETTLE_SECONDS = 10.0


def release_held_jobs(lay: Layout) -> list[str]:
    """Release the jobs Slurm holds after a failed launch (reason 'launch failed requeued held');
    return their ids. Jobs a user held on purpose (other reasons) stay held."""
    r = commands.run(["squeue", "-h", "-t", "PD", "-o", "%i|%r"], "ask squeue", env=_env(lay), timeout=15)
    if r is None:
        return []
    held = [line.split("|", 1)[0] for line in r.stdout.splitlines()
            if "|" in line and line.split("|", 1)[1].replace("_", " ").strip() == HELD_AFTER_FAILED_LAUNCH]
    for job in held:
        commands.run(["scontrol", "release", job], "release a held job", env=_env(lay), timeout=15)
    return held


def _stopped_cleanly(lay: Layout) -> bool:
    """Did the last slurmctld end by SIGTERM (state saved), not by a crash or kill -9?"""
    last = tail(lay.logfile("slurmctld"), 30).splitlines()
    starts = [i for i, line in enumerate(last) if "slurmctld version" in line]
    after = last[starts[-1]:] if starts else last
    return any("Saving all slurm state" in line for line in after)


def _kick_scheduler(lay: Layout) -> None:
    """Make slurmctld run its scheduler now. A freshly started slurmctld runs its first full
    scheduling pass only after 60 s unless an event (a submission, a node or partition update)
    asks for one, and it reads SchedulerParameters' sched_interval only in that pass; a job it
    recovered as pending would wait that long. Setting the partition UP (it is UP) is such an
    event and changes nothing."""
    commands.run(["scontrol", "update", f"partitionname={config.PARTITION}", "state=up"],
                 "reopen the partition", env=_env(lay), timeout=15)


def _settle_after_crash(lay: Layout, names: list[str]) -> None:
    """After a controller crash, slurmctld may have recovered a running job as pending (its
    last state save predates the start). When the node registers with that job, slurmctld kills
    it there ('Registered PENDING') and starts it again; if the new launch reaches the node
    before the old instance is gone, the node is drained ('Duplicate jobid') and the job requeued
    and held. For a few seconds after the restart, resume such nodes and release such jobs, so
    the job runs again instead of waiting forever."""
    deadline = time.monotonic() + CRASH_SETTLE_SECONDS
    while time.monotonic() < deadline:
        _nodes_ready(lay, names)  # resumes drained nodes
        release_held_jobs(lay)
        _kick_scheduler(lay)  # a job killed on its node as 'Registered PENDING' starts again now
        time.sleep(1.0)
    _nodes_ready(lay, names)
    release_held_jobs(lay)


# --- down ----------------------------------------------------------------------------------------

def down() -> list[str]:
    """Stop every daemon the project started (by pid file), newest first; return their names."""
    with cluster_lock():
        return _down()


def _down() -> list[str]:
    refuse_if_shared("stop the cluster")
    lay = config.layout()
    nodes = config.load_nodes(lay)
    all_daemons = daemons(lay, nodes)
    if slurmctld_daemon(lay).running():
        # Cancel running jobs so that no job step outlives its slurmd.
        commands.run(["scancel", "--full", f"--partition={config.PARTITION}"], "cancel the jobs",
                     env=_env(lay), timeout=20)
    stopped = [d.name for d in reversed(all_daemons) if d.stop()]
    if SYSTEM_SLURM_CONF.is_symlink() and os.readlink(SYSTEM_SLURM_CONF) == str(lay.slurm_conf):
        pass  # the link stays: it points at a config that `up` will start again
    return stopped


# --- status --------------------------------------------------------------------------------------

@dataclass
class DaemonStatus:
    name: str
    pid: int | None
    log: Path


@dataclass
class Status:
    state_dir: Path
    daemon_dir: Path
    daemons: list[DaemonStatus]
    nodes: dict[str, str]
    partitions: str
    slurm_conf: Path

    @property
    def running(self) -> bool:
        return bool(self.daemons) and all(d.pid for d in self.daemons)

    def render(self) -> str:
        lines = [f"hpclab local cluster  (state: {self.state_dir})",
                 f"  munged's folder (outside the checkout, reachable by the munge user): {self.daemon_dir}", ""]
        width = max(len(d.name) for d in self.daemons)
        for d in self.daemons:
            state = f"running  pid {d.pid}" if d.pid else "stopped"
            lines.append(f"  {d.name:<{width}}  {state:<18} log: {d.log}")
        lines.append("")
        if self.nodes:
            lines.append("  nodes:      " + ", ".join(f"{n} ({s})" for n, s in self.nodes.items()))
        if self.partitions:
            lines.append("  partitions: " + self.partitions)
        lines.append(f"  config:     {self.slurm_conf}")
        if not self.running:
            lines.append("\n  The cluster is not (fully) running: start it with 'hpclab cluster up'.")
        return "\n".join(lines)


def status() -> Status:
    lay = config.layout()
    nodes = config.load_nodes(lay) or [Node(config.short_hostname(), "127.0.0.1", None)]  # type: ignore[arg-type]
    ds = [DaemonStatus(d.name, d.pid(), d.logfile) for d in daemons(lay, nodes)]
    partitions = ""
    if slurmctld_daemon(lay).running():
        r = commands.run(["sinfo", "-h", "-o", "%P %a %D %C"], "ask sinfo", env=_env(lay), timeout=15)
        if r is not None and r.returncode == 0 and r.stdout.strip():
            p = r.stdout.split()
            partitions = f"{p[0]} ({p[1]}, {p[2]} node(s), CPUs alloc/idle/other/total {p[3]})"
    nodes_state = node_states(lay) if slurmctld_daemon(lay).running() else {}
    return Status(lay.root, lay.daemon_root, ds, nodes_state, partitions, lay.slurm_conf)


def _run(argv: list[str], what: str, log: Path) -> None:
    r = commands.run(argv, what, timeout=None, log=log)
    if r.returncode != 0:
        raise HpclabError(f"could not {what} (exit {r.returncode})", f"read {log}\n{tail(log, 8)}")
