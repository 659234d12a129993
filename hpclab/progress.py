"""Live progress of submitted jobs: a widget bar in a notebook, a text bar in a terminal.

`JobProgress(total)` picks tqdm's notebook bar when running inside a Jupyter kernel with
ipywidgets available, and the plain tqdm bar otherwise (on stderr). The bar counts finished jobs
and shows how many are pending, running and done in its postfix.
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
        self.total, self.desc, self.states = total, desc, []
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

    def update(self, states: list[str]) -> None:
        """Show the current state of every job (a list of state names)."""
        self.states = list(states)
        if self.bar is None:
            return
        done = sum(s in ("completed", "failed", "timeout", "cancelled") for s in states)
        counts = {s: states.count(s) for s in dict.fromkeys(states)}
        self.bar.set_postfix_str(", ".join(f"{k} {v}" for k, v in counts.items()), refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.plain and self.states:
            counts = {st: self.states.count(st) for st in dict.fromkeys(self.states)}
            done = sum(st in ("completed", "failed", "timeout", "cancelled") for st in self.states)
            print(f"{self.desc}: {done} of {self.total} job(s) done in {time.monotonic() - self.started:.1f} s ("
                  + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")", flush=True)
