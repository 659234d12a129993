"""Talking to Slurm: submit (sbatch), ask job states (squeue, then sacct), cancel (scancel).

Every command runs with the cluster's environment: `hpclab.cluster.slurm_env()` (SLURM_CONF of
the embedded cluster) added to os.environ, unless HPCLAB_SITE names another site, in which case
the ordinary environment is used.

Output format: on this installation (Slurm 22.05.8, Debian) `squeue --json` and `sacct --json`
do work, through the openapi/v0.0.38 and openapi/dbv0.0.38 plugins. Their layout is tied to
the plugin version, though (22.05 prints "job_state": "RUNNING", 23.02's data_parser prints a
list, and a site without the plugins prints nothing), while `--parsable2 --noheader` with an
explicit `--format`/`--format=` field list reads the same on every Slurm release a course
cluster is likely to run. So this module parses the '|'-separated form only.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from hpclab import cluster
from hpclab.core import commands
from hpclab.core.errors import HpclabError

# Slurm state names -> the run folder's vocabulary (status.json "state").
STATE_MAP = {
    "PENDING": "pending", "CONFIGURING": "pending", "REQUEUED": "pending", "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending", "RESV_DEL_HOLD": "pending", "SUSPENDED": "running",
    "RUNNING": "running", "COMPLETING": "running", "STAGE_OUT": "running", "SIGNALING": "running",
    "RESIZING": "running", "STOPPED": "running",
    "COMPLETED": "completed",
    "FAILED": "failed", "NODE_FAIL": "failed", "BOOT_FAIL": "failed", "OUT_OF_MEMORY": "failed",
    "DEADLINE": "timeout", "TIMEOUT": "timeout", "PREEMPTED": "cancelled", "CANCELLED": "cancelled",
    "REVOKED": "cancelled", "SPECIAL_EXIT": "failed",
}
TERMINAL = {"completed", "failed", "timeout", "cancelled"}


@dataclass
class JobInfo:
    """What Slurm says about one job: state (run-folder vocabulary), slurm_state (raw),
    exit_code (of the batch script, None while running), reason, elapsed (Slurm string),
    nodes (Slurm's node list, e.g. "vn[0-1]"; empty until nodes are allocated)."""

    job_id: str
    state: str
    slurm_state: str
    exit_code: int | None = None
    reason: str = ""
    elapsed: str = ""
    nodes: str = ""
    restarts: int | None = None  # Slurm's Restarts count (scontrol), None when not asked
    source: str = "squeue"  # where the answer came from: squeue, sacct or scontrol

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    def describe(self) -> str:
        """Slurm's state in words, e.g. 'pending (Slurm: PENDING, reason launch failed requeued
        held)' or 'running on vm (Slurm: RUNNING)'."""
        where = f" on {self.nodes}" if self.nodes and self.state == "running" else ""
        why = f", reason {self.reason}" if self.reason else ""
        again = f", restarted {self.restarts} time(s)" if self.restarts else ""
        return f"{self.state}{where} (Slurm: {self.slurm_state}{why}{again})"


# Slurm's reason for a job it requeued and held because its launch failed (for example a node
# that still ran the job's previous instance after a controller crash: "Duplicate jobid").
HELD_AFTER_FAILED_LAUNCH = "launch failed requeued held"


class AccountingUnavailable(HpclabError):
    """sacct cannot reach the accounting database (slurmdbd or MariaDB down): jobs still run and
    their state comes from squeue/scontrol."""


def slurm_env() -> dict[str, str]:
    """os.environ plus the embedded cluster's variables (SLURM_CONF) when the site is local."""
    env = dict(os.environ)
    if os.environ.get("HPCLAB_SITE", "local") == "local" and "SLURM_CONF" not in os.environ:
        env.update(cluster.slurm_env())
    return env


def run_slurm(argv: list[str], what: str, check: bool = True) -> str:
    """Run a Slurm client command; return stdout. Raises HpclabError saying `what` failed, with
    Slurm's own message, when the command is missing or (if check) exits non-zero."""
    res = commands.run(argv, what, env=slurm_env(), timeout=60)
    if res is None:
        raise HpclabError(f"cannot {what}: {argv[0]} did not answer within 60 s",
                          "is the cluster up? try `hpclab cluster status`")
    if check and res.returncode != 0:
        msg = " ".join(res.stderr.strip().splitlines()[-2:]) or f"exit code {res.returncode}"
        hint = "is the cluster up? run `hpclab cluster up` (local site) or check `sinfo`"
        if "invalid account" in msg.lower() or "qos" in msg.lower():
            # Accounting is enforced (a site, or the classroom): the user has no such association.
            hint = ("check your Slurm associations with `sacctmgr show assoc user=$USER` and the site "
                    "profile's account and qos (HPCLAB_SITE)")
        raise HpclabError(f"cannot {what}: {' '.join(argv[:2])} said: {msg}", hint)
    return res.stdout


def sbatch(script: Path, cwd: Path | None = None) -> str:
    """Submit a batch script with `sbatch --parsable`; return the job id (a string of digits)."""
    out = run_slurm(["sbatch", "--parsable", str(script)], what=f"submit {script}")
    job_id = out.strip().split(";")[0]  # --parsable prints "id" or "id;cluster"
    if not job_id.isdigit():
        raise HpclabError(f"sbatch returned no job id for {script} (output: {out.strip()!r})",
                          "submit it by hand with `sbatch` to see what Slurm says")
    return job_id


def scancel(job_ids: list[str]) -> None:
    """Cancel jobs; jobs that already ended are not an error."""
    if job_ids:
        run_slurm(["scancel", *job_ids], what="cancel jobs", check=False)


def _exit_code(text: str) -> int | None:
    # sacct prints "code:signal"; a signal-killed script counts as 128 + signal, like a shell.
    if not text:
        return None
    code, _, sig = text.partition(":")
    try:
        code_i, sig_i = int(code), int(sig or 0)
    except ValueError:
        return None
    return 128 + sig_i if sig_i and not code_i else code_i


def _node_list(text: str) -> str:
    """Slurm's node list, or "" where it says none is allocated ("(null)", "None assigned")."""
    text = text.strip()
    return "" if text in ("", "(null)", "None", "None assigned") else text


def job_states(job_ids: list[str]) -> dict[str, JobInfo]:
    """Current state of each job id. Jobs squeue still knows come from squeue; the rest (ended)
    from sacct, whose record keeps the exit code. A job neither knows is reported "pending" (it
    can take a moment to reach the accounting database)."""
    ids = [str(j) for j in job_ids]
    infos: dict[str, JobInfo] = {}
    if not ids:
        return infos
    out = run_slurm(["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}",
                     "--format=%i|%T|%r|%M|%N"], what="ask squeue for job states", check=False)
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0] in ids:
            st = parts[1].split()[0] if parts[1] else "PENDING"
            infos[parts[0]] = JobInfo(parts[0], STATE_MAP.get(st, "running"), st,
                                      reason=_reason(parts[2]), elapsed=parts[3],
                                      nodes=_node_list(parts[4]))
    # squeue keeps finished jobs for MinJobAge but without exit codes: ask sacct for all that
    # are not pending/running. Without accounting (slurmdbd or its database down), scontrol
    # still has the exit code of a job that ended less than MinJobAge seconds ago.
    rest = [j for j in ids if j not in infos or infos[j].done]
    in_queue = set(infos)
    if rest:
        try:
            acct = sacct(rest)
        except AccountingUnavailable:
            acct = {}
        for j in rest:
            rec = acct.get(j)
            if rec is not None and (rec.done or j not in in_queue):
                infos[j] = rec
                if not rec.done and scontrol_job(j) is None:
                    # The accounting still has it pending or running, but the controller does
                    # not know it: slurmctld restarted from a state saved before it recorded
                    # the job, and will never tell the accounting that it ended.
                    infos[j] = JobInfo(j, "pending", "UNKNOWN", reason="slurmctld does not know this job")
            elif j in infos:  # squeue says done; sacct has no record yet, or one that lags behind
                # (still PENDING or RUNNING there): never take such a record for a requeue
                infos[j] = scontrol_job(j) or JobInfo(j, "running", infos[j].slurm_state,
                                                      reason="waiting for accounting")
            else:
                infos[j] = scontrol_job(j) or JobInfo(j, "pending", "UNKNOWN", reason="not yet visible")
    return infos


def _reason(text: str) -> str:
    """Slurm's reason text with 'None' as '' and scontrol's underscores as spaces."""
    text = text.strip()
    return "" if text in ("None", "(null)") else text.replace("_", " ")


def scontrol_job(job_id: str) -> JobInfo | None:
    """A recently ended job from `scontrol show job` (kept for MinJobAge seconds): used when
    accounting has no record, as on clusters without slurmdbd. None if Slurm forgot the job."""
    out = run_slurm(["scontrol", "show", "job", "--oneliner", str(job_id)], what="ask scontrol", check=False)
    fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
    st = fields.get("JobState")
    if not st:
        return None
    restarts = fields.get("Restarts", "")
    return JobInfo(str(job_id), STATE_MAP.get(st, "failed"), st, _exit_code(fields.get("ExitCode", "")),
                   _reason(fields.get("Reason", "")), fields.get("RunTime", ""),
                   _node_list(fields.get("NodeList", "")),
                   restarts=int(restarts) if restarts.isdigit() else None, source="scontrol")


def node_trouble(nodelist: str) -> dict[str, str]:
    """Nodes of `nodelist` (a Slurm host list such as 'node[1-2]') that are down, drained,
    failing or not responding, with Slurm's state and reason, e.g. {'node2': 'down* (Not
    responding)'}; {} when all are well or Slurm does not say."""
    if not nodelist:
        return {}
    out = run_slurm(["sinfo", "--noheader", "--Node", f"--nodes={nodelist}", "--format=%N|%T|%E"],
                    what="ask sinfo about the job's nodes", check=False)
    bad = {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3:
            continue
        name, state, why = parts
        if state.endswith("*") or any(w in state for w in ("down", "drain", "fail", "unknown")):
            bad[name] = state + (f" ({why})" if why and why != "none" else "")
    return bad


def node_events(nodelist: str, since: str) -> dict[str, str]:
    """Nodes of `nodelist` that the accounting recorded as down, drained or failing at some time
    after `since` (Slurm's time format, e.g. '2026-11-26T05:27:40'), with the state, reason and
    when: {'node2': 'down* (Not responding) from 05:30:22 to 05:30:26'}. A node that failed and
    came back (ReturnToService re-admits a slurmd that registers again) is no longer in sinfo's
    trouble by the time a job's requeue is seen; `sacctmgr show event` keeps the record. {} when
    there is none or accounting is unavailable."""
    if not nodelist or not shutil.which("sacctmgr"):
        return {}
    res = commands.run(["sacctmgr", "--noheader", "--parsable2", "show", "event", f"nodes={nodelist}",
                        f"start={since}", "format=NodeName,TimeStart,TimeEnd,State,Reason"],
                       "ask sacctmgr for node events", env=slurm_env(), timeout=60)
    if res is None or res.returncode != 0:
        return {}
    seen = {}
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5 or not parts[0]:
            continue  # cluster-wide events (TRES registrations) name no node
        name, start, end, state, why = parts
        state = state.lower()
        if state.endswith("*") or any(w in state for w in ("down", "drain", "fail")):
            until = "" if end in ("", "Unknown") else f" to {end.split('T')[-1]}"
            seen[name] = state + (f" ({why})" if why else "") + f" from {start.split('T')[-1]}{until}"
    return seen


def drained_partition(job_id: str) -> dict[str, str]:
    """If every node of the pending job's partition is drained (or draining), those nodes with
    Slurm's reason, e.g. {'vm': 'drained (batch job complete failure)'}; else {}. A drained node
    stays so until someone resumes it, so such a job would wait for ever."""
    part = run_slurm(["squeue", "--noheader", f"--jobs={job_id}", "--format=%P"],
                     what="ask squeue for the job's partition", check=False).strip()
    if not part:
        return {}
    out = run_slurm(["sinfo", "--noheader", "--Node", f"--partition={part}", "--format=%N|%T|%E"],
                    what="ask sinfo about the partition's nodes", check=False)
    nodes = {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            name, state, why = parts
            nodes[name] = state + (f" ({why})" if why and why != "none" else "")
    if nodes and all("drain" in state for state in nodes.values()):
        return nodes
    return {}


SACCT_FIELDS = ["JobIDRaw", "JobName", "State", "ExitCode", "Reason", "Elapsed", "Start", "End",
                "NodeList", "NNodes", "NTasks", "AllocCPUS", "Partition", "Timelimit", "ReqMem", "MaxRSS",
                "TotalCPU", "UserCPU"]  # each step's CPU time and its user part: the job's own in its noise watch


def mem_mb(text: str) -> float | None:
    """Slurm's memory text ('2000M', '1.50G', '512K', '1024', '2000Mn') in MB (1024-based, as Slurm
    counts); None for '' or unreadable text."""
    text = (text or "").strip().rstrip("nc")  # 22.05 ReqMem: 2000Mn per node, 1000Mc per CPU
    if not text:
        return None
    units = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}
    scale = units.get(text[-1].upper())
    try:
        return float(text[:-1]) * scale if scale else float(text) / 2 ** 20  # bare number: bytes
    except ValueError:
        return None


def sacct_records(job_ids: list[str]) -> list[dict[str, str]]:
    """Raw sacct records (job and its steps) as dicts keyed by SACCT_FIELDS. Raises
    AccountingUnavailable when sacct cannot reach the accounting database."""
    if not shutil.which("sacct"):
        raise AccountingUnavailable("sacct is not installed here", "job states come from squeue and scontrol")
    res = commands.run(["sacct", "--parsable2", "--noheader", f"--jobs={','.join(job_ids)}",
                        f"--format={','.join(SACCT_FIELDS)}"], "ask sacct", env=slurm_env(), timeout=60)
    if res is None:
        raise AccountingUnavailable("sacct did not answer within 60 s",
                                    "job states come from squeue and scontrol")
    if res.returncode != 0:
        msg = " ".join(res.stderr.strip().splitlines()[-2:]) or f"exit code {res.returncode}"
        raise AccountingUnavailable(f"accounting (sacct) is unavailable: {msg}",
                                    "jobs still run; `hpclab cluster up` restarts slurmdbd and its database")
    out = res.stdout
    rows = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) == len(SACCT_FIELDS):
            rows.append(dict(zip(SACCT_FIELDS, parts)))
    return rows


def sacct(job_ids: list[str]) -> dict[str, JobInfo]:
    """Final (or current) state of jobs from accounting, one JobInfo per job (steps skipped)."""
    infos = {}
    for rec in sacct_records(job_ids):
        jid = rec["JobIDRaw"]
        if "." in jid or jid not in job_ids:
            continue
        st = rec["State"].split()[0] if rec["State"] else "PENDING"  # "CANCELLED by 0"
        infos[jid] = JobInfo(jid, STATE_MAP.get(st, "failed"), st, _exit_code(rec["ExitCode"]),
                             _reason(rec["Reason"]), rec["Elapsed"], _node_list(rec["NodeList"]),
                             source="sacct")
    return infos

