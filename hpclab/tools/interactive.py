"""Interactive MPI from a notebook: ipyparallel engines that are the ranks of one Slurm job.

    from hpclab.tools.interactive import MPIEngines
    engines = MPIEngines(ranks=2).start()     # controller here, engines = one Slurm job
    %%px                                      # every cell now runs on all ranks (mpi4py)
    ...
    engines.stop()                            # or `with MPIEngines(2) as engines:`

The controller runs in the notebook's kernel host, listening on the address the partition's
nodes reach it by (controller_address); the engines are started by one batch job
whose `srun --mpi=<site's PMI>` makes every `ipengine --mpi` a rank of the same MPI_COMM_WORLD,
and `--mpi` makes each engine ask the controller for the id equal to its rank (checked after
start). The engines' job script comes from the one builder (hpclab.jobs.templates.render_engines,
slurm-templates/engines.sh.j2). The session's files (engine job script, Slurm output,
ipyparallel profile) live in its RunFolder of kind "session", runs/_interactive/<id>/, never reused. The engines' job ends when `stop()` runs, when the
`with` block ends, or when the kernel exits or restarts (atexit); as a last resort it carries a
Slurm time limit.

`execute(code, timeout)` runs code on every rank but gives up after `timeout` seconds: a
deadlocked MPI call cannot be interrupted from Python, so the engines are then restarted (job
cancelled, a new one started) and the outcome says what each rank printed before it got stuck.
"""

from __future__ import annotations

import atexit
import socket
import sys
import textwrap
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core.errors import HpclabError
from hpclab.jobs import templates
from hpclab.runs.folder import RunFolder
from hpclab.site import profile as site_mod
from hpclab.site import slurm

# How long a cancelled engine job may take to leave squeue (Slurm's KillWait is a few seconds).
STOP_TIMEOUT = 60.0
_LIVE: "weakref.WeakSet[MPIEngines]" = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    # A kernel restart or shutdown ends the process normally: no engine job may outlive it.
    for engines in list(_LIVE):
        try:
            engines.stop(wait=True)
        except Exception as exc:  # at exit there is nobody left to raise to
            print(f"hpclab: could not stop engines job {engines.job_id}: {exc}", file=sys.stderr)


atexit.register(_stop_all_at_exit)


@dataclass
class Outcome:
    """What `MPIEngines.execute` saw. finished: every rank ran the code to its end within the
    timeout; seconds: wall time waited; stdout: {rank: text printed}; error: first error raised
    on an engine (None if none); restarted: the engines were restarted because the code did not
    finish; old_job/new_job: Slurm job ids before and after the restart."""

    finished: bool
    seconds: float
    stdout: dict[int, str] = field(default_factory=dict)
    error: str | None = None
    restarted: bool = False
    old_job: str | None = None
    new_job: str | None = None

    def __str__(self) -> str:
        if self.finished:
            head = f"finished on every rank in {self.seconds:.2f} s"
        else:
            head = f"NOT finished after {self.seconds:.1f} s (still blocked)"
        lines = [head]
        for rank in sorted(self.stdout):
            text = self.stdout[rank].rstrip() or "(nothing printed)"
            lines.append(f"  rank {rank}: " + text.replace("\n", f"\n  rank {rank}: "))
        if self.error:
            lines.append(f"  error: {self.error}")
        if self.restarted:
            lines.append(f"  engines restarted: job {self.old_job} cancelled, new job {self.new_job}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):  # IPython display
        p.text(str(self))


class MPIEngines:
    """An ipyparallel cluster whose engines are the MPI ranks of one Slurm job.

    ranks: number of engines = MPI ranks (>= 1, at most the partition's cores);
    site / partition: the site profile (default $HPCLAB_SITE or local) and partition;
    time: Slurm time limit of the engines' job (a backstop if the kernel is killed);
    mca: Open MPI MCA selections exported as OMPI_MCA_<name> (e.g. {"btl": "self,vader"});
    start_timeout: seconds to wait for the engines once their job runs (queue time not counted
    while Slurm reports the job pending, up to queue_timeout seconds).
    """

    def __init__(self, ranks: int = 2, site: str | None = None, partition: str | None = None,
                 time: str = "00:30:00", mca: dict[str, str] | None = None,
                 start_timeout: float = 90.0, queue_timeout: float = 300.0):
        if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
            raise HpclabError(f"ranks must be a whole number >= 1, got {ranks!r}",
                              "ask for e.g. MPIEngines(ranks=2)")
        self.site = site_mod.load_site(site)
        part = self.site.partition(partition)
        if part.nodes and part.cores_per_node and ranks > part.nodes * part.cores_per_node:
            raise HpclabError(
                f"{ranks} ranks do not fit in partition {part.name!r} "
                f"({part.nodes} node(s) x {part.cores_per_node} cores)",
                f"ask for at most {part.nodes * part.cores_per_node} ranks")
        self.ranks = ranks
        self.partition = part.name
        self.time = time
        self.mca = dict(mca or {})
        self.start_timeout = start_timeout
        self.queue_timeout = queue_timeout
        self.cluster = None
        self.client = None
        self.view = None
        self.session_dir: Path | None = None
        self.job_id: str | None = None
        self.jobs: list[str] = []  # every engine job this object submitted (restarts included)

    # --- files ---------------------------------------------------------------------------------

    @property
    def job_script(self) -> Path | None:
        """The batch script of the current (last submitted) engines' job."""
        return RunFolder(self.session_dir).engines_script(len(self.jobs)) if self.jobs else None

    @property
    def job_log(self) -> Path | None:
        """Slurm's output file of the current engines' job (what the engines logged)."""
        return self._log(len(self.jobs)) if self.jobs else None

    def _log(self, n: int) -> Path:
        return RunFolder(self.session_dir).engines_log(n)

    def render_job(self, n: int) -> str:
        """The engines' batch script (job number n of this session), as a person reads it,
        from the one builder (hpclab.jobs.templates.render_engines, slurm-templates/engines.sh.j2)."""
        return templates.render_engines(
            self.site, ranks=self.ranks, folder=self.session_dir, log=self._log(n), time=self.time,
            engine_argv=[sys.executable, "-m", "ipyparallel.engine", "--mpi"],
            partition=self.partition, mca=self.mca)

    # --- starting ------------------------------------------------------------------------------

    def _new_cluster(self):
        import ipyparallel as ipp
        from traitlets.config import Config

        n = len(self.jobs) + 1
        script = self.render_job(n)
        cfg = Config()
        # ipyparallel fills the template with str.format: double the braces of the bash text.
        cfg.SlurmEngineSetLauncher.batch_template = script.replace("{", "{{").replace("}", "}}")
        cfg.SlurmEngineSetLauncher.batch_file_name = str(RunFolder(self.session_dir).engines_script(n))
        env = slurm.slurm_env()
        extra = {k: env[k] for k in ("SLURM_CONF",) if k in env}
        cfg.SlurmEngineSetLauncher.environment = extra
        ip = controller_address(self.partition)
        profile = RunFolder(self.session_dir).ipython_profile
        profile.mkdir(exist_ok=True)
        return ipp.Cluster(
            engines="slurm", n=self.ranks, config=cfg, profile_dir=str(profile),
            cluster_id=f"{self.session_dir.name}-{n}",
            controller_ip=ip, controller_location="" if ip != "*" else socket.getfqdn(),
            engine_timeout=int(self.start_timeout), shutdown_atexit=True, log_level=30)

    def start(self) -> "MPIEngines":
        """Start the controller and submit the engines' job; wait until every rank registered
        with engine id == MPI rank. Returns self; `view` is a blocking DirectView on all engines,
        activated for %px / %%px. Raises HpclabError (with the job's log) if the job fails or
        the engines do not come up in time; nothing is left running then."""
        if self.cluster is not None:
            return self
        if self.session_dir is None:
            self.session_dir = RunFolder.create_kind("session").path
        self.cluster = self._new_cluster()
        _LIVE.add(self)
        try:
            self.cluster.start_controller_sync()
            self.cluster.start_engines_sync(self.ranks)
            self.job_id = self._engine_job_id()
            self.jobs.append(self.job_id)
            self.client = self.cluster.connect_client_sync()
            self._wait_for_engines()
            self._check_ids()
        except BaseException:
            self.stop(wait=True)
            raise
        self.view = self.client[:]
        self.view.block = True
        if _in_ipython():
            self.view.activate()  # registers %px, %%px, %autopx for this view
        return self

    def _engine_job_id(self) -> str:
        [engine_set] = self.cluster.engines.values()
        return str(engine_set.job_id)

    def _wait_for_engines(self) -> None:
        log = self._log(len(self.jobs))
        t0 = time.monotonic()
        deadline = None
        told = False
        while len(self.client.ids) < self.ranks:
            info = slurm.job_states([self.job_id]).get(self.job_id)
            now = time.monotonic()
            if info is not None and info.done:
                raise HpclabError(
                    f"the engines' job {self.job_id} ended ({info.slurm_state}, exit code "
                    f"{info.exit_code}) before all {self.ranks} engines registered; its log "
                    f"({log}) ends with:\n{_tail(log)}",
                    "it was cancelled from outside (scancel, or the cluster restarted): start again"
                    if info.state == "cancelled" else
                    "fix what the log says (site profile, MPI launcher) and start again")
            if info is not None and info.state == "pending":
                if not told and now > t0 + 5:
                    # news, not an error: on stdout (a notebook shows stderr as a failure, and
                    # a shared cluster's queue is no fault of the learner's)
                    print(f"engines job {self.job_id} is waiting in the queue ({info.reason or 'pending'}): "
                          "other jobs hold the cores", flush=True)
                    told = True
                if now > t0 + self.queue_timeout:
                    raise HpclabError(
                        f"the engines' job {self.job_id} waited {self.queue_timeout:.0f} s in the "
                        f"queue ({info.reason or 'pending'}); it was cancelled",
                        "wait for other jobs to end (squeue) or ask for fewer ranks")
            else:
                deadline = deadline or now + self.start_timeout
                if now > deadline:
                    raise HpclabError(
                        f"only {len(self.client.ids)} of {self.ranks} engines registered within "
                        f"{self.start_timeout:.0f} s of job {self.job_id} starting; its log ({log}) "
                        f"ends with:\n{_tail(log)}",
                        "check the log; on a real site the compute nodes must reach this host")
            time.sleep(0.3)

    def _check_ids(self) -> None:
        ranks = self.client[:].apply_sync(_rank_and_host)
        got = {eid: r for eid, (r, _host) in zip(self.client.ids, ranks)}
        wrong = {eid: r for eid, r in got.items() if eid != r}
        if wrong or sorted(got) != list(range(self.ranks)):
            raise HpclabError(f"engine ids do not match MPI ranks (engine id: rank = {got})",
                              "the engines must be started with 'ipengine --mpi' under one srun")

    # --- stopping ------------------------------------------------------------------------------

    def stop(self, wait: bool = True) -> None:
        """Stop the engines (scancel their job) and the controller. wait: block until Slurm no
        longer lists the job as pending or running (at most STOP_TIMEOUT s). Safe to call twice."""
        cluster, self.cluster = self.cluster, None
        if self.client is not None:
            try:
                self.client.close()
            except Exception:
                pass  # a half-closed client does not keep the job alive
            self.client = None
        self.view = None
        if cluster is not None:
            try:
                cluster.stop_engines_sync()
            except Exception:
                pass  # scancel below is the one that matters
            try:
                cluster.stop_controller_sync()
            except Exception:
                pass
        if self.job_id:
            slurm.scancel([self.job_id])  # also when ipyparallel's own scancel failed
            if wait:
                self._wait_gone(self.job_id)
        _LIVE.discard(self)

    def _wait_gone(self, job_id: str) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            info = slurm.job_states([job_id]).get(job_id)
            if info is None or info.done:
                return
            time.sleep(0.3)
        raise HpclabError(f"the engines' job {job_id} is still listed by Slurm {STOP_TIMEOUT:.0f} s "
                          "after it was cancelled", f"check with `squeue -j {job_id}`; `scancel {job_id}`")

    def restart(self) -> "MPIEngines":
        """Cancel the engines' job and start a new controller and engines (same session folder).
        Returns self with a new client and view (re-activated for %px)."""
        self.stop(wait=True)
        return self.start()

    def __enter__(self) -> "MPIEngines":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop(wait=True)

    def __repr__(self) -> str:
        state = f"running as job {self.job_id}" if self.cluster else "stopped"
        return f"<MPIEngines {self.ranks} ranks on {self.site.name}/{self.partition}, {state}>"

    # --- running code ------------------------------------------------------------------------------

    def hosts(self) -> dict[int, str]:
        """{rank: host name} of the running engines, as MPI reports it."""
        if self.client is None:
            raise HpclabError("the engines are not running", "call start() first")
        return {r: h for r, h in self.client[:].apply_sync(_rank_and_host)}

    def execute(self, code: str, timeout: float) -> Outcome:
        """Run `code` on every rank; wait at most `timeout` seconds.

        Returns an Outcome. If the code did not finish (e.g. a deadlock), what each rank printed
        so far is kept, then the engines are restarted so the next cell finds healthy ranks."""
        if self.client is None:
            raise HpclabError("the engines are not running", "call start() first")
        code = textwrap.dedent(code)
        t0 = time.monotonic()
        ar = self.client[:].execute(code, block=False, silent=False)
        done = ar.wait(timeout)
        seconds = time.monotonic() - t0
        if done:
            ar.wait_for_output(10)  # printed text can arrive after the result
        stdout = {eid: out for eid, out in zip(self.client.ids, ar.stdout)}
        if done:
            error = None
            try:
                ar.get()
            except Exception as exc:  # the engines' error, shown as the outcome
                error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            return Outcome(True, seconds, stdout, error)
        old = self.job_id
        self.restart()
        return Outcome(False, seconds, stdout, None, True, old, self.job_id)


def controller_address(partition: str) -> str:
    """The address the controller listens on so the partition's nodes reach it: 127.0.0.1 when
    the nodes are this machine (the local cluster's single node), else this host's address on the
    route to the first node (e.g. the bridge of the local virtual nodes, or the cluster network
    of a login node); "*" (every interface) when that cannot be worked out."""
    out = slurm.run_slurm(["sinfo", "--noheader", "--Node", f"--partition={partition}", "--format=%o"],
                          what="ask sinfo for node addresses", check=False)
    addrs = [a.strip() for a in out.split() if a.strip()]
    if not addrs:
        return "*"
    try:
        node_ip = socket.gethostbyname(addrs[0])
    except OSError:
        return "*"
    if node_ip.startswith("127.") or node_ip in _own_addresses():
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((node_ip, 9))  # no packet is sent: this only asks the routing table
            return s.getsockname()[0]
        except OSError:
            return "*"


def _own_addresses() -> set[str]:
    try:
        return set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        return set()


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def _rank_and_host():
    # Runs on an engine: what MPI says about this process.
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank(), MPI.Get_processor_name()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "  (no log written)"
    return "\n".join("  " + line for line in text[-lines:]) or "  (empty)"


def job_in_queue(job_id: str) -> bool:
    """True while Slurm lists job `job_id` as pending or running (squeue, then sacct)."""
    info = slurm.job_states([str(job_id)]).get(str(job_id))
    return info is not None and not info.done


# --- what the notebook measures on the engines ----------------------------------------------------
