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
