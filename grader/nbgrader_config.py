# nbgrader configuration for the hpclab labs; `hpclab.grading.pipeline.init_course` copies it into a course
# folder (nbgrader reads nbgrader_config.py from the folder it runs in).
c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "hpclab"

# Execution. Lab cells read packed run data and fit a few dozen points: each takes well under a
# second; the reference analysis in a hidden test starts a Python process (about 2 s). 60 s per
# cell leaves room for a loaded grading machine and stops an infinite loop within a minute;
# the cell is then interrupted and the other cells are still graded.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True

c.Execute.kernel_name = "hpclab-grader"      # sandboxed kernel installed by init_course
c.ExecutePreprocessor.kernel_name = "hpclab-grader"

# The boundary (grader/README.md, "The sandbox"). Cells run through hpclab's Execute: the kernel
# in a bubblewrap sandbox as the user hpclab-grader, graded test cells not run in the kernel but
# checked by the grader in a process of its own on the answers the kernel reports.
# A code lab's C files are built and run first, each in a sandbox of its own, and the report
# written into the submission as collected, where its test cells read it (hpclab.grading.codelab).
c.Autograde.autograde_preprocessors = [
    "hpclab.grading.codelab.BuildAndRun",                # code labs only; others pass through
    "hpclab.grading.preprocessors.SandboxExecute",      # in place of nbgrader's Execute
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# Code labs are graded under every installed MPI library; a room short of time can name the
# system's alone (about half the build and run time; bench/codelabs.py measures both):
# c.BuildAndRun.libraries = ["openmpi-system"]
# The sandbox has no network: nbgrader talks to the kernel over Unix sockets.
c.KernelManager.transport = "ipc"

# Limits of one submission's sandbox (the kernel and every process it starts); the grader's
# check of the answers runs under the same limits. A lab's kernel with pandas and numpy uses about
# 150 MB and 20 tasks; its cells take seconds of CPU.
c.SandboxExecute.memory_mb = 2048      # memory cgroup (v1 or v2) when root can make one, else RLIMIT_AS of twice this
c.SandboxExecute.cpu_seconds = 600     # CPU time per process (RLIMIT_CPU): the process is killed past it
c.SandboxExecute.processes = 128       # processes and threads of the sandbox's user (RLIMIT_NPROC): a fork bomb stops here
c.SandboxExecute.file_size_mb = 64     # largest file written (RLIMIT_FSIZE)
c.SandboxExecute.open_files = 256      # open files per process (RLIMIT_NOFILE)
c.SandboxExecute.scratch_mb = 256      # the tmpfs that is HOME and TMPDIR
c.SandboxExecute.wall_seconds = 1800   # one submission, all cells: the kernel is stopped past it

# Student view: a stub that fails loudly until answered.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# A notebook printing without end must not make the graded copy or the feedback huge.
c.LimitOutput.max_lines = 500
c.LimitOutput.max_traceback = 50

# Collecting from an LMS download: downloaded/<lab>/archive/<student-id>.zip, each holding the
# lab folder's content (the notebook and data/). The student id is the zip's name.
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = r".*/extracted/(?P<student_id>[A-Za-z0-9_.-]+)/(?P<file_id>.+)"
# run folders hold extension-less files (stdout, stderr), .json/.txt/.xml/.sh/.yaml ones and
# traces (.mpit) and a few others; a file type missing here is dropped at collection and the run then fails
# labdata.verify ("... was removed after packing")
c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".json", ".txt", ".xml", ".sh", ".yaml", ".mpit",
                                         ".csv", ".log", ".out", ".data", ".c", ""]   # .c: a code lab's file

c.CourseDirectory.max_file_size = 20000   # kB per file copied into a submission (run data included)

# The exchange (release/fetch/submit/collect between instructor and students on one machine or a
# shared JupyterHub file system). Default /usr/local/share/nbgrader/exchange needs a system-wide
# folder; on a laptop it lives next to the course folder. On a JupyterHub, point it at a folder
# every user can reach (see grader/README.md).
import os  # noqa: E402

c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nbgrader-exchange"))
