"""JupyterHub for the room: start it (idempotent), stop it with every server it started, say
whether it runs. Interface used by room.py:

    HubSettings(bind_ip, port, ssl_cert, ssl_key, spawner, mem_limit_gb, cpu_limit, idle_timeout_s)
    start(lay, rec, settings) -> str     start (idempotent) and return the hub's URL
    stop(lay, rec) -> bool               stop what start started; True if it ran
    status(lay) -> list[str]             lines for `hpclab classroom status`

The hub runs as root from the classroom's venv (JupyterHub, pinned in pyproject's `classroom`
extra), with configurable-http-proxy from npm (pinned below) in lay.root/node. Its state lives in
lay.hub (root, 0700): the database, the cookie secret and the proxy's token (0600), the rendered
config (hub_config.py), its log and pid files. What the spawners do is in spawn.py; the limits
each local server gets are in limits.py.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import sqlite3
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from hpclab.cluster import local
from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.core.io import ensure_secret, write_atomic
from hpclab.classroom import accounting, grading_room, hub_config, limits
from hpclab.classroom.layout import INSTRUCTORS_GROUP, SLURM_ACCOUNT, STUDENTS_GROUP, ClassroomLayout
from hpclab.classroom.record import Record

CHP_VERSION = "5.1.0"  # configurable-http-proxy from npm (checked with JupyterHub 6.1.1 here)
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
SERVER_PARTITION = accounting.SERVER_PARTITION
SERVER_QOS = "hpclab-server"


@dataclass(frozen=True)
class HubSettings:
    bind_ip: str = "127.0.0.1"
    port: int = 8000
    ssl_cert: Path | None = None
    ssl_key: Path | None = None
    spawner: str = "local"  # or "slurm" (batchspawner)
    mem_limit_gb: float = 1.0
    cpu_limit: float = 1.0
    idle_timeout_s: int = 3600
    recording: Path | None = None  # room mode: the recording the students' notebooks read (HPCLAB_RECORDED)

    def check(self) -> None:
        """Raise HpclabError for settings the hub cannot start with."""
        try:
            ipaddress.ip_address(self.bind_ip)
        except ValueError:
            raise HpclabError(f"--bind {self.bind_ip!r} is not an IP address",
                              "give 127.0.0.1 (this machine only) or the room's LAN address, e.g. 192.168.1.10") from None
        if not 1 <= self.port <= 65535 or self.port in (hub_config.HUB_API_PORT, hub_config.PROXY_API_PORT):
            raise HpclabError(f"--port {self.port}: not a free port for the hub",
                              f"choose 1-65535 other than {hub_config.HUB_API_PORT} and {hub_config.PROXY_API_PORT} "
                              "(the hub's and the proxy's APIs)")
        if (self.ssl_cert is None) != (self.ssl_key is None):
            raise HpclabError("a TLS certificate needs its key and a key its certificate",
                              "give both --ssl-cert and --ssl-key, or neither (plain HTTP on 127.0.0.1)")
        for what, path in (("certificate", self.ssl_cert), ("key", self.ssl_key)):
            if path is not None and not Path(path).is_file():
                raise HpclabError(f"the TLS {what} {path} does not exist", f"give the path of the PEM {what} file")
        if self.spawner not in ("local", "slurm"):
            raise HpclabError(f"--spawner {self.spawner!r}: unknown", "choose local or slurm")
        if self.mem_limit_gb <= 0 or self.cpu_limit <= 0:
            raise HpclabError(f"a server's limits must be positive (memory {self.mem_limit_gb} GB, "
                              f"{self.cpu_limit} CPUs)", "give a memory limit in GB and a CPU share above 0")
        if self.idle_timeout_s < 60:
            raise HpclabError(f"idle timeout {self.idle_timeout_s} s is too short for a student to read a cell",
                              "give at least 60 s")

    def url(self) -> str:
        host = f"[{self.bind_ip}]" if ":" in self.bind_ip else self.bind_ip
        return f"{'https' if self.ssl_cert else 'http'}://{host}:{self.port}/"


def files(lay: ClassroomLayout) -> hub_config.HubFiles:
    return hub_config.HubFiles(lay.hub)


def _state_file(lay: ClassroomLayout) -> Path:
    return lay.hub / "hub.json"


# --- the proxy ------------------------------------------------------------------------------

def ensure_proxy(lay: ClassroomLayout, rec: Record) -> Path:
    """configurable-http-proxy CHP_VERSION in lay.root/node (npm, once); its command."""
    cmd = hub_config.proxy_command(lay)
    package = lay.root / "node" / "node_modules" / "configurable-http-proxy" / "package.json"
    if cmd.exists() and package.is_file() and json.loads(package.read_text()).get("version") == CHP_VERSION:
        return cmd
    folder = lay.root / "node"
    rec.note("folders", str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    log = lay.root / "install.log"
    r = commands.run(["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--omit=dev",
                      f"configurable-http-proxy@{CHP_VERSION}"], "install configurable-http-proxy with npm",
                     timeout=300)
    with open(log, "a") as out:
        out.write(f"\n$ npm install configurable-http-proxy@{CHP_VERSION}\n{r.stdout if r else ''}{r.stderr if r else ''}")
    if r is None or r.returncode != 0 or not cmd.exists():
        raise HpclabError(f"installing configurable-http-proxy {CHP_VERSION} with npm failed",
                          f"read {log}; the npm registry must be reachable for the first 'up' (nodejs and npm "
                          "come from 'make setup')")
    return cmd


# --- secrets ----------------------------------------------------------------------------------

def _ensure_private_folder(lay: ClassroomLayout, rec: Record) -> None:
    rec.note("folders", str(lay.hub))
    lay.hub.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(lay.hub, 0, 0)
    lay.hub.chmod(0o700)


def _ensure_secret(path: Path, nbytes: int = 32) -> None:
    """A random hex secret, root's and 0600 from its first byte; kept across restarts (the cookie
    secret keeps students logged in when the hub restarts)."""
    ensure_secret(path, lambda: os.urandom(nbytes).hex() + "\n", mode=0o600, owner=(0, 0))


# --- the servers partition and QOS (--spawner slurm) ------------------------------------------

def ensure_server_qos(rec: Record, students: list[str]) -> None:
    """A QOS of its own for the students' server jobs: one server each, no wall-time limit of a
    lab job; the students' job QOS keeps counting only their lab jobs."""
    out = local.sacctmgr(["-n", "-P", "show", "qos", SERVER_QOS, "format=name"], f"look up the QOS {SERVER_QOS}")
    if SERVER_QOS not in out.split():
        rec.note("slurm", f"qos:{SERVER_QOS}")
        local.sacctmgr(["add", "qos", SERVER_QOS], f"create the QOS {SERVER_QOS}")
    local.sacctmgr(["modify", "qos", "where", f"name={SERVER_QOS}", "set", "MaxJobsPerUser=1",
                    "MaxSubmitJobsPerUser=1", "Flags=DenyOnLimit"], f"set the limits of the QOS {SERVER_QOS}")
    for user in students:
        local.sacctmgr(["modify", "user", "where", f"name={user}", f"account={SLURM_ACCOUNT}", "set",
                        f"qos+={SERVER_QOS}"], f"allow {user} the QOS {SERVER_QOS}")


def _check_server_partition() -> None:
    out = commands.run(["sinfo", "-h", "-p", SERVER_PARTITION, "-o", "%P"], "list the servers partition",
                       env={**os.environ, **local.slurm_env()}, timeout=20)
    if out is None or out.returncode != 0 or not out.stdout.strip():
        raise HpclabError(f"the cluster has no partition {SERVER_PARTITION!r} for the students' servers",
                          "it is part of the classroom's policy.conf (accounting.render_policy); run "
                          "'hpclab classroom up --spawner slurm' again")


# --- start ------------------------------------------------------------------------------------

def _pid(path: Path, marker: bytes) -> int | None:
    """The pid in `path` if that process lives and its command line holds `marker` (a pid file
    left by a hub that died may name an unrelated process by now)."""
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _alive(pid, marker) else None


def _alive(pid: int, marker: bytes) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        zombie = ") Z " in Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return marker in cmdline and not zombie


def running_pid(lay: ClassroomLayout) -> int | None:
    """The hub's pid if it runs."""
    return _pid(files(lay).pid, b"jupyterhub")


def _get(url: str, timeout: float = 2.0) -> int | None:
    """HTTP status of GET `url` (certificates not checked: this is a liveness probe), or None."""
    ctx = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return None


def _tail(path: Path, n: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _members(group: str) -> list[str]:
    import grp

    try:
        return sorted(grp.getgrnam(group).gr_mem)
    except KeyError:
        return []


def start(lay: ClassroomLayout, rec: Record, settings: HubSettings) -> str:
    """Start the room's hub and return its public URL. A hub running with the same settings is left
    alone; one running with other settings is stopped and started with these. Raises
    HpclabError with the log's last lines when it does not answer within START_TIMEOUT_S."""
    settings.check()
    if os.geteuid() != 0:
        raise HpclabError("the hub logs students in with PAM and starts servers as them: it needs root",
                          "run 'sudo .venv/bin/hpclab classroom up'")
    f = files(lay)
    if running_pid(lay) is not None:
        state = _read_state(lay)
        if state.get("settings") == _settings_dict(settings):
            return state.get("url", settings.url())
        # `up` asked for another hub (spawner, address, limits): servers stop, files stay
        stop(lay, rec)
    # a hub that was killed (kill -9, OOM) left its services running: they go before the new hub
    # starts its own; the students' servers stay, and the new hub finds them in its database
    orphans = _stop_orphaned_services()
    jupyterhub = lay.venv / "bin" / "jupyterhub"
    if not jupyterhub.exists():
        raise HpclabError(f"JupyterHub is not installed in the classroom's venv ({jupyterhub} is missing)",
                          "run 'hpclab classroom up' (it installs the classroom extra into that venv)")
    _ensure_private_folder(lay, rec)
    ensure_proxy(lay, rec)
    _ensure_secret(f.cookie_secret)
    _ensure_secret(f.proxy_token)
    _ensure_secret(f.prestart_token)
    # the database holds every user's tokens: root's and 0600 (SQLite keeps the mode it finds)
    os.close(os.open(f.db, os.O_WRONLY | os.O_CREAT, 0o600))
    f.db.chmod(0o600)
    partition = qos = ""
    if settings.spawner == "slurm":
        _check_server_partition()
        ensure_server_qos(rec, _members(STUDENTS_GROUP))
        partition, qos = SERVER_PARTITION, SERVER_QOS
    services, roles = grading_room.hub_services(lay)
    text = hub_config.render(lay, settings, slurm_conf=local.slurm_env()["SLURM_CONF"],
                             instructors=_members(INSTRUCTORS_GROUP), services=services, roles=roles,
                             server_partition=partition, server_qos=qos, students=_members(STUDENTS_GROUP))
    write_atomic(f.config, text, mode=0o600)
    env = {"PATH": f"{lay.venv / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root", "LANG": "C.UTF-8", **local.slurm_env()}
    t0 = time.monotonic()
    # created 0600: the hub logs users' names and server URLs
    with open(os.open(f.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a") as log:
        log.write(f"\n--- hpclab classroom: starting the hub ({time.strftime('%Y-%m-%d %H:%M:%S')}); "
                  f"server limits {limits.describe()}\n")
        if orphans:
            log.write(f"--- hpclab classroom: stopped {len(orphans)} service process(es) a killed hub left: "
                      f"{' '.join(map(str, orphans))}\n")
        log.flush()
        os.chmod(f.log, 0o600)
        proc = subprocess.Popen([str(jupyterhub), "-f", str(f.config)], cwd=lay.hub, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_interrupt_signals_as_default)
    url = settings.url()
    hub_api = f"http://127.0.0.1:{hub_config.HUB_API_PORT}/hub/api/"
    deadline = t0 + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise HpclabError(f"the hub stopped while starting (exit {proc.returncode})",
                              f"read {f.log}:\n{_tail(f.log)}")
        if _get(hub_api) == 200 and _get(url + "hub/login") == 200:
            break
        if time.monotonic() > deadline:
            proc.terminate()
            raise HpclabError(f"the hub did not answer on {url} within {START_TIMEOUT_S:.0f} s",
                              f"read {f.log}:\n{_tail(f.log)}")
        time.sleep(0.25)
    write_atomic(f.pid, f"{proc.pid}\n", mode=0o600)
    _write_state(lay, {"url": url, "pid": proc.pid, "settings": _settings_dict(settings),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "start_s": round(time.monotonic() - t0, 2),
                       "limits": limits.mode()})
    return url


def _interrupt_signals_as_default() -> None:
    """In the hub's process before it runs JupyterHub: SIGINT and SIGQUIT do what they do by default.
    A hub started from a shell's background job (nohup, a CI runner, `make ... &`) inherits them
    ignored, and so do the services it starts first; JupyterHub stops a service or a server with
    SIGINT and waits 30 s before SIGTERM, so every stop of such a hub outlasted STOP_TIMEOUT_S
    and ended in SIGKILL (62 s instead of 4 in make test)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _settings_dict(settings: HubSettings) -> dict:
    return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()}


def _read_state(lay: ClassroomLayout) -> dict:
    try:
        return json.loads(_state_file(lay).read_text())
    except (OSError, ValueError):
        return {}


def _write_state(lay: ClassroomLayout, state: dict) -> None:
    write_atomic(_state_file(lay), json.dumps(state, indent=1) + "\n", mode=0o600)


# --- stop ---------------------------------------------------------------------------------------

def orphaned_services() -> list[int]:
    """The processes of hub-managed services (the idle culler, the formgrader) that a hub killed
    without its shutdown left behind: JupyterHub starts each in a session of its own, so they
    outlive it, and a new hub would start a second culler and a formgrader that cannot bind its
    port. Found by their environment: JUPYTERHUB_SERVICE_NAME set and JUPYTERHUB_API_URL on this
    room's hub API port (students' servers have no service name)."""
    api = f"127.0.0.1:{hub_config.HUB_API_PORT}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(v.startswith(b"JUPYTERHUB_SERVICE_NAME=") for v in env) and \
                any(v.startswith(b"JUPYTERHUB_API_URL=") and api in v for v in env) and not _hub_child(entry):
            found.append(int(entry.name))
    return found


def _hub_child(proc: Path) -> bool:
    """Is this process's parent a live jupyterhub (then it is a running hub's service)?"""
    try:
        ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return _alive(ppid, b"jupyterhub")


def _stop_orphaned_services() -> list[int]:
    """Stop orphaned_services() (TERM, then KILL after 5 s); return their pids."""
    pids = orphaned_services()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
            time.sleep(0.1)
    return pids


def _wait_gone(pid: int, marker: bytes, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid, marker):
            return True
        time.sleep(0.1)
    return not _alive(pid, marker)


def stop(lay: ClassroomLayout, rec: Record) -> bool:
    """Stop the hub; it stops every student's server and the proxy itself (cleanup_servers,
    cleanup_proxy). Whatever is left afterwards (a hub killed earlier) goes too: the proxy by its
    pid file, each server's cgroup with its processes, the server jobs in Slurm. True if the hub ran."""
    f = files(lay)
    pid = running_pid(lay)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, b"jupyterhub", STOP_TIMEOUT_S):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, b"jupyterhub", 5)
    proxy = _pid(f.proxy_pid, b"configurable-http-proxy")
    if proxy is not None:
        os.kill(proxy, signal.SIGTERM)
        _wait_gone(proxy, b"configurable-http-proxy", 5)
    _stop_orphaned_services()
    for cg in limits.existing():
        cg.remove()
    limits.remove_parents()
    if _read_state(lay).get("settings", {}).get("spawner") == "slurm":
        commands.run(["scancel", f"--name={hub_config.SERVER_JOB_NAME}"], "cancel the students' server jobs",
                     env={**os.environ, **local.slurm_env()}, timeout=20)
    for p in (f.pid, f.proxy_pid):
        p.unlink(missing_ok=True)
    return pid is not None


# --- status -------------------------------------------------------------------------------------

def running_servers(lay: ClassroomLayout) -> int:
    """How many students' servers the hub's database lists as running (0 without a database)."""
    db = files(lay).db
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2) as con:
            return con.execute("select count(*) from spawners where server_id is not null").fetchone()[0]
    except sqlite3.Error:
        return 0


def status(lay: ClassroomLayout) -> list[str]:
    if lay.hub.exists() and not os.access(lay.hub, os.R_OK | os.X_OK):
        return [f"hub: its folder {lay.hub} is root's only: run 'sudo hpclab classroom status' to see it"]
    pid = running_pid(lay)
    state = _read_state(lay)
    if pid is None:
        return [f"hub: not running ({'log: ' + str(files(lay).log) if files(lay).log.exists() else 'never started'})"]
    spawner = state.get("settings", {}).get("spawner", "?")
    return [f"hub: running (pid {pid}) at {state.get('url', '?')}, spawner {spawner}, "
            f"{running_servers(lay)} servers running",
            f"server limits: {limits.describe() if spawner == 'local' else 'Slurm (the servers partition, task/cgroup)'}",
            f"hub log: {files(lay).log}"]
