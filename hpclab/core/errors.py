"""The one exception type a student or instructor is meant to read.

Every error the package raises on purpose is an HpclabError: it says what happened and what to
do next. The command line prints it without a traceback; notebooks show it as a short message.
"""


class HpclabError(Exception):
    """An error with a message a person can act on.

    what: one sentence, what went wrong (with the offending value).
    hint: what to do about it (a command to run, a value to change, a file to read).
    """

    def __init__(self, what: str, hint: str = ""):
        self.what = what
        self.hint = hint
        super().__init__(what if not hint else f"{what}\n  what to do: {hint}")

    def one_line(self) -> str:
        """The error on one line, for a command's stderr: `what (hint)`."""
        return self.what + (f" ({self.hint})" if self.hint else "")

    def _render_traceback_(self):
        # IPython calls this instead of printing a traceback: students see the message only.
        return [f"hpclab error: {self}"]


# --- failures of Slurm jobs, by what the caller does about them ---------------------------------
# Raised by hpclab.jobs.experiment with the same message and hint as a plain HpclabError; a caller
# that must tell them apart uses isinstance, never the message's words.


class SubmissionRefused(HpclabError):
    """Slurm refused to take a job (sbatch failed: a QOS or account limit, a bad request, the
    controller down). Nothing ran; the run folder is marked failed."""


class JobFailed(HpclabError):
    """One or more runs did not complete. Raised as this class when the runs failed for
    different reasons or for none of the ones below (the program's own exit code, a crash);
    as a subclass when every run failed the same way.

    runs: the runs that did not complete; failures: one JobFailed per run, each of the class
    that names its own cause and with that run's part of the message."""

    def __init__(self, what: str, hint: str = "", runs: list | None = None, failures: list | None = None):
        super().__init__(what, hint)
        self.runs = list(runs or [])
        self.failures = list(failures or [])


class OutOfMemory(JobFailed):
    """Slurm (or the kernel's OOM killer inside the job's cgroup) stopped the job at its memory limit."""


class TcpUnpaired(JobFailed):
    """Open MPI's TCP transport found no pair of interfaces to connect two ranks ("Unable to find
    reachable pairing"): a host with IPv6 beside IPv4 and no interface named (open-mpi/ompi#14079)."""


class TimedOut(JobFailed):
    """The job took longer than it was given: Slurm's time limit (state timeout)."""


class GaveUpWaiting(TimedOut):
    """hpclab stopped waiting (the timeout of experiment.wait) and cancelled the job; Slurm itself
    did not fail it."""


class Cancelled(JobFailed):
    """The job was cancelled (scancel, by hpclab or someone else) before it completed."""


class NodeDrained(JobFailed):
    """No node could ever start the job: every node of its partition was drained, and hpclab
    cancelled it (on the embedded cluster; a site's admins resume their nodes)."""


class JobLost(JobFailed):
    """Slurm lost the job or its node: a node failed under it, or Slurm requeued it or forgot it
    (a controller restart), and it did not complete in the end."""
