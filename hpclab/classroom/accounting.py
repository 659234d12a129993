"""The room's rules in Slurm: one account for the course, a QOS that bounds each student, fair
share between students, and privacy (a student sees and cancels only their own jobs).

Slurm enforces them only with accounting enforced (AccountingStorageEnforce): a job of a user
with no association to an account is refused at submission. Root keeps the association slurmdbd
gives it when the cluster is registered, so the course's own runs are unaffected. Instructors
are coordinators of the course account: they see and may cancel every student's job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hpclab.cluster import config, local
from hpclab.classroom.layout import SLURM_ACCOUNT, STUDENT_QOS
from hpclab.classroom.record import Record

SERVER_PARTITION = "servers"  # where --spawner slurm puts the students' servers (hub.py)


@dataclass(frozen=True)
class StudentLimits:
    """What one student may hold at a time. The defaults suit a 2-core machine: a course job
    takes both cores, so one running job per student and fair share decide who runs next."""

    running_jobs: int = 1
    queued_jobs: int = 10
    cpus: int = 2
    wall_minutes: int = 10

    def qos_args(self) -> list[str]:
        return [f"MaxJobsPerUser={self.running_jobs}", f"MaxSubmitJobsPerUser={self.queued_jobs}",
                f"MaxTRESPerUser=cpu={self.cpus}", f"MaxWall={self.wall_minutes}",
                # a job over a limit is refused at submission with the reason, not left pending
                "Flags=DenyOnLimit"]


def render_policy(limits: StudentLimits) -> str:
    """The lines slurm.conf includes (policy.conf) while a classroom is up."""
    server_cpus = max(1, (os.cpu_count() or 1) // 4)
    return f"""{config.MARKER}: the scheduling policy of a room, written by 'hpclab classroom up'.
# 'hpclab classroom down' empties it again.
# A job is accepted only for a user associated with an account, within the limits of its QOS
# (QOS {STUDENT_QOS}: {limits.running_jobs} running and {limits.queued_jobs} queued jobs, {limits.cpus} CPUs, {limits.wall_minutes} min each).
AccountingStorageEnforce=associations,limits,qos,safe
# Students see their own jobs, usage and account only; root and coordinators see all.
PrivateData=accounts,jobs,usage,users
# Fair share: the student who used the machine least recently runs next; usage fades with a
# half-life of one hour, the length of a lab.
PriorityType=priority/multifactor
PriorityWeightFairshare=100000
PriorityWeightAge=1000
PriorityWeightQOS=0
PriorityDecayHalfLife=01:00:00
PriorityCalcPeriod=1
PriorityFavorSmall=NO
# The students' JupyterLab servers as Slurm jobs (hpclab classroom up --spawner slurm, hub.py): a
# server mostly waits for its student, so up to 32 share a core, each bounded by its memory, and
# together they hold at most {server_cpus} CPU(s) per node. Measured here: while a server job runs, a
# job of a partition that does not oversubscribe (OverSubscribe=NO, the course's) waits for
# Resources; in a partition with OverSubscribe=FORCE:1 it starts beside the servers.
PartitionName={SERVER_PARTITION} Nodes=ALL Default=NO MaxTime=INFINITE State=UP OverSubscribe=FORCE:32 MaxCPUsPerNode={server_cpus}
"""


NO_POLICY = config.NO_POLICY


def create(rec: Record, students: list[str], instructors: list[str], limits: StudentLimits) -> None:
    """The account, the QOS and every user's association; then the policy that enforces them."""
    if f"qos:{STUDENT_QOS}" not in rec.slurm or not _exists("qos", STUDENT_QOS):
        rec.note("slurm", f"qos:{STUDENT_QOS}")
        if not _exists("qos", STUDENT_QOS):
            local.sacctmgr(["add", "qos", STUDENT_QOS], f"create the QOS {STUDENT_QOS}")
    local.sacctmgr(["modify", "qos", "where", f"name={STUDENT_QOS}", "set", *limits.qos_args()],
                   f"set the limits of the QOS {STUDENT_QOS}")
    if not _exists("account", SLURM_ACCOUNT):
        rec.note("slurm", f"account:{SLURM_ACCOUNT}")
        local.sacctmgr(["add", "account", SLURM_ACCOUNT, f"cluster={config.CLUSTER_NAME}",
                        "description=hpclab course", "organization=hpclab"],
                       f"create the Slurm account {SLURM_ACCOUNT}")
    for user in students:
        _associate(rec, user, [f"qos={STUDENT_QOS}", f"defaultqos={STUDENT_QOS}", "fairshare=1"])
    for user in instructors:
        _associate(rec, user, ["qos=normal", "defaultqos=normal"])
        local.sacctmgr(["add", "coordinator", f"account={SLURM_ACCOUNT}", f"names={user}"],
                       f"make {user} a coordinator of {SLURM_ACCOUNT}")
    local.apply_policy(render_policy(limits))


def _associate(rec: Record, user: str, settings: list[str]) -> None:
    rec.note("slurm", f"user:{user}")
    if not _exists("user", user):
        local.sacctmgr(["add", "user", user, f"account={SLURM_ACCOUNT}", f"defaultaccount={SLURM_ACCOUNT}",
                        f"cluster={config.CLUSTER_NAME}"], f"associate {user} with {SLURM_ACCOUNT}")
    local.sacctmgr(["modify", "user", "where", f"name={user}", f"account={SLURM_ACCOUNT}", "set", *settings],
                   f"set the QOS of {user}")


def remove(rec: Record) -> None:
    """Lift the policy, then remove the users, account and QOS this classroom created."""
    local.apply_policy(NO_POLICY)
    for item in [s for s in rec.slurm if s.startswith("user:")]:
        user = item.split(":", 1)[1]
        if _exists("user", user):
            local.sacctmgr(["delete", "user", user], f"remove {user} from Slurm's accounting")
        rec.forget("slurm", item)
    for kind in ("account", "qos"):
        for item in [s for s in rec.slurm if s.startswith(f"{kind}:")]:
            name = item.split(":", 1)[1]
            if _exists(kind, name):
                local.sacctmgr(["delete", kind, name], f"remove the {kind} {name}")
            rec.forget("slurm", item)


def _exists(kind: str, name: str) -> bool:
    field = {"qos": "name", "account": "account", "user": "user"}[kind]
    out = local.sacctmgr(["-n", "-P", "show", kind, name, f"format={field}"], f"look up the {kind} {name}")
    return name in out.split()


def associations() -> list[tuple[str, str, str]]:
    """(user, account, default QOS) of every association of the course account."""
    out = local.sacctmgr(["-n", "-P", "show", "associations", f"account={SLURM_ACCOUNT}", "format=user,account,defaultqos"],
                         "list the course's associations")
    return [tuple(line.split("|")) for line in out.splitlines() if line.split("|")[0]]

