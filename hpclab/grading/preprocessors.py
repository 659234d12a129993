"""The nbgrader preprocessors of hpclab that grader/nbgrader_config.py names by dotted path:
`SandboxExecute`, nbgrader's Execute with the kernel in hpclab's sandbox and the graded test
cells not run there but checked outside it (hpclab.grading.answers).

Only nbgrader imports this module. It imports nbgrader, which takes seconds, so that
hpclab.grading.answers, imported by every student's kernel and by the grader's check, need not.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_code_cell, new_output
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer

from hpclab.grading import answers, sandbox

_DEFAULTS = sandbox.Limits()
_DIED = "the kernel died (a resource limit of the sandbox?)"


class SandboxExecute(Execute):
    """nbgrader's Execute, with the kernel in hpclab's sandbox and test cells checked outside it
    (see hpclab.grading.answers)."""

    memory_mb = Integer(_DEFAULTS.memory_mb, help="memory of a submission's sandbox (MiB)").tag(config=True)
    cpu_seconds = Integer(_DEFAULTS.cpu_seconds, help="CPU seconds per process").tag(config=True)
    processes = Integer(_DEFAULTS.processes, help="tasks of the sandbox user (RLIMIT_NPROC)").tag(config=True)
    file_size_mb = Integer(_DEFAULTS.file_size_mb, help="largest file written (MiB)").tag(config=True)
    open_files = Integer(_DEFAULTS.open_files, help="open files per process").tag(config=True)
    wall_seconds = Integer(_DEFAULTS.wall_seconds, help="wall-clock bound per submission (s)").tag(config=True)
    scratch_mb = Integer(_DEFAULTS.scratch_mb, help="tmpfs HOME/TMPDIR (MiB)").tag(config=True)
    unconfined = Bool(False, help="run the kernel without a sandbox (the instructor's own "
                                  "notebooks only)").tag(config=True)

    def limits(self) -> sandbox.Limits:
        """The sandbox's limits as configured (c.SandboxExecute.*)."""
        return sandbox.Limits(**{f.name: getattr(self, f.name) for f in dataclasses.fields(sandbox.Limits)})

    def preprocess(self, nb, resources, km=None):
        os.environ[sandbox.ENV] = self.limits().to_env(self.unconfined)
        self._answers, self._dead = {}, None
        nb, resources = super().preprocess(nb, resources, km=km)
        tests = [c for c in nb.cells if answers.test_cell(c)]
        if tests:
            results = self._check(tests, resources)
            for cell in tests:
                answers.apply(cell, results[cell.metadata["nbgrader"]["grade_id"]])
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        self._check_assign_resources(resources)
        if self._dead and cell.cell_type == "code":
            if not answers.test_cell(cell):
                cell.outputs = [new_output("error", ename="KernelDied", evalue=self._dead,
                                           traceback=[f"not run: {self._dead}"])]
            return cell, self.resources
        if answers.test_cell(cell):
            # not run in the kernel: only the values of the names it reads are asked for
            gid = cell.metadata["nbgrader"]["grade_id"]
            try:
                names = answers.free_names(cell.source)
            except SyntaxError:
                names = []
            probe = new_code_cell(answers.probe_code(names))
            try:
                self.execute_cell(probe, index, store_history=False)
            except DeadKernelError:
                self._dead = _DIED
            self.nb.cells[index] = cell      # nbclient stores the cell it ran at its index
            self._answers[gid] = answers.read_record(probe.outputs)
            cell.outputs = []
            return cell, self.resources
        try:
            cell = self.execute_cell(cell, index, store_history=True)
        except DeadKernelError:
            self._dead = _DIED
            cell.outputs.append(new_output("error", ename="KernelDied", evalue=self._dead,
                                           traceback=[f"KernelDied: {self._dead}"]))
        return cell, self.resources

    def _submission(self, resources) -> Path:
        nbg = resources.get("nbgrader", {})
        coursedir = CourseDirectory(config=self.config)
        path = Path(coursedir.format_path(coursedir.submitted_directory, nbg.get("student", "."),
                                          nbg.get("assignment", "."))).resolve()
        if not path.is_dir():
            path = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        return path

    def _check(self, tests, resources) -> dict:
        lab_dir = self._submission(resources)
        cells = [dict(self._answers.get(c.metadata["nbgrader"]["grade_id"],
                                        {"values": {}, "skipped": {}, "problem": "the cell was not reached"}),
                      id=c.metadata["nbgrader"]["grade_id"], source=c.source) for c in tests]
        results = answers.check(cells, lab_dir, self.limits(), self.unconfined)
        return {r["id"]: r for r in results}
