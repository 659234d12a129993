"""Live progress of submitted jobs: a widget bar in a notebook, a text bar in a terminal.

`JobProgress(total)` picks tqdm's notebook bar when running inside a Jupyter kernel with
ipywidgets available, and the plain tqdm bar otherwise (on stderr). The bar counts finished jobs
(n of m done) and its elapsed time, and its postfix says how many are pending, running and done
and on which nodes the jobs run.
"""

from __future__ import annotations

import os
import sys
import time


def in_notebook() -> bool:
    """True inside a Jupyter kernel where ipywidgets can render."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
            return False
        import ipywidgets  # noqa: F401
    except Exception:  # IPython or ipywidgets missing, or a shell that cannot tell
        return False
    return True


class JobProgress:
    """A progress bar over `total` jobs; disabled (all methods no-ops) when enabled is False."""

    def __init__(self, total: int, desc: str = "jobs", enabled: bool = True):
        self.bar = None
        self.total, self.desc, self.states, self.nodes = total, desc, [], []
        self.started = time.monotonic()
        # Executed headless for the course report (no one watches, widgets are not saved): one
        # plain line per sweep at the end instead of a bar.
        self.plain = enabled and bool(os.environ.get("HPCLAB_HEADLESS"))
        if not enabled or self.plain:
            return
        if in_notebook():
            from tqdm.notebook import tqdm
        else:
            from tqdm import tqdm
        self.bar = tqdm(total=total, desc=desc, unit="job", file=sys.stderr, leave=True)

    def update(self, states: list[str], nodes: list[str] | None = None) -> None:
        """Show the current state of every job (state names) and, if given, each job's nodes
        (Slurm node lists, "" while none is allocated)."""
        self.states = list(states)
        self.nodes = [n for n in dict.fromkeys(nodes or []) if n]
        if self.bar is None:
            return
        done = sum(s in ("completed", "failed", "timeout", "cancelled") for s in states)
        self.bar.set_postfix_str(self.summary(), refresh=False)
        self.bar.update(done - self.bar.n)

    def summary(self) -> str:
        """State counts and node lists, e.g. 'running 1, pending 2 | nodes: vn[0-1]'."""
        counts = {st: self.states.count(st) for st in dict.fromkeys(self.states)}
        text = ", ".join(f"{k} {v}" for k, v in counts.items())
        if self.nodes:
            shown = ", ".join(self.nodes[:4]) + (f" and {len(self.nodes) - 4} more" if len(self.nodes) > 4 else "")
            text += f" | nodes: {shown}"
        return text

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.plain and self.states:
            done = sum(st in ("completed", "failed", "timeout", "cancelled") for st in self.states)
            print(f"{self.desc}: {done} of {self.total} job(s) done in "
                  f"{time.monotonic() - self.started:.1f} s ({self.summary()})", flush=True)
