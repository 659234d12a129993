"""Code labs graded: the student's C files built and run in the grader's sandbox under every
installed MPI library, each check saying what was measured, what was expected and why.

A code lab is data in its lesson (hpclab.course.codelab.CodeLab, found through the lesson
registry): the student's files, the builds, the trials and the lesson's check of a run. Here:

- build: the course's sources of a build are compiled once per library and process, outside
  the sandbox (they are ours), with the kernels' flags; the student's files are compiled and
  linked with the library's mpicc inside a sandbox (hpclab.grading.sandbox: the dedicated user,
  no network but loopback, no Slurm, none of the course's or other students' files, limits);
- run: each trial starts the library's own launcher in a fresh sandbox of the same kind, with at
  most 4 ranks on shared memory (a private /dev/shm); each rank's stdout and stderr go to files
  of their own;
- a run past its time limit is hung: before it is stopped, each rank's stack is sampled with gdb
  from outside the sandbox (measured here: /proc/PID/syscall says only "running" for ranks that
  busy-poll, as Open MPI's and MPICH's do; gdb names the MPI call, the student's line and, from
  the debug information of the student's files, the values of its arguments), and `diagnose`
  turns the ranks' calls into a sentence that names the mistake (every rank sending first, tags
  that do not match, a receive from a rank that never sends, ...);
- a run that fails otherwise is described from its output (the driver's ERROR line, MPI's error
  class, the signal), and the request ledger (src/codelabs/ledger.c) names a request that was
  never completed with the line that started it.

`grade(lab, folder)` returns a Report (its checks, runs and timing); the nbgrader preprocessor
`BuildAndRun` (grader/nbgrader_config.py) grades every submission of a code lab before its
notebook runs and writes the report as `.codelab/<lab>.json` into the submission as collected,
where the lab's graded test cells (`verdict`), run by the grader outside the student's kernel,
read it. The report names the SHA-256 of each file it graded: a report for other sources is
refused. In the student's own notebook `verdict` grades the files then and there.

`python -m hpclab.grading.codelab grade LAB [FOLDER]` prints the feedback; `... run LAB
[--np N] [--library L] [--hang S] -- ARGS` runs the student's program once and prints each
rank's output (or where each rank hung).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.io import write_atomic
from hpclab.core.errors import HpclabError
from hpclab.course import codelab as model
from hpclab.course import lessons
from hpclab.grading import sandbox

# hpclab.site.mpi_libraries (pandas, through site.ompi: half a second) is imported where a library
# is needed, not here: a lab's notebook and the grader's check of its test cells import this
# module and only read a report.

RECORD_DIR = ".codelab"     # in a submission: the grader's report of each code lab, <lab>.json
RECORD_VERSION = 1
MAX_OUTPUT = 4000           # characters kept of each rank's stdout and stderr
# The sandbox of a code lab's build or run: as a notebook's, with room for MPI (a launcher and 4
# ranks with their progress threads: about 40 tasks for Open MPI) and a private /dev/shm.
LIMITS = sandbox.Limits(memory_mb=2048, cpu_seconds=120, processes=256, file_size_mb=256,
                        open_files=1024, wall_seconds=120, scratch_mb=256)
SHM_MB = 512

# Each rank's output to files of its own: the rank number from the launcher's variables (Open
# MPI's, then Hydra's for MPICH and Intel MPI), and exec keeps the program's process name.
RANK_WRAPPER = ('r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}; '
                'exec "$0" "$@" >"rank.$r.out" 2>"rank.$r.err"')


# --- the libraries --------------------------------------------------------------------------------

def libraries(names: list[str] | None = None) -> list:
    """The installed MPI libraries a code lab runs under (hpclab.site.mpi_libraries.MpiLibrary
    records, the system's first), or those named. Raises HpclabError for a name that is not
    installed or has no sandboxed launcher."""
    from hpclab.site import mpi_libraries   # costly: see above

    out = []
    for lib in mpi_libraries.LIBRARIES:
        if names is not None and lib.name not in names:
            continue
        if lib.installed() and lib.sandboxed:
            out.append(lib)
        elif names is not None:
            raise HpclabError(f"MPI library {lib.name} is not installed here, or has no sandboxed launcher",
                              "install the libraries (make mpi-libraries) or leave it out")
    if names is not None:
        for name in names:
            mpi_libraries.get(name)   # an unknown name: did you mean
    if not out:
        raise HpclabError("no MPI library to build a code lab with", "install Open MPI (make setup)")
    return out


def code_lab(lab: str) -> model.CodeLab:
    """The CodeLab of lab `lab` (a folder name under labs/); HpclabError when it is not a code lab."""
    lesson = lessons.lab(lab)
    if lesson.code is None:
        raise HpclabError(f"{lab} is not a code lab", f"code labs: {', '.join(lessons.code_labs())}")
    return lesson.code


def course_source(rel: str) -> Path:
    """A course file named by its path under the repository. A lab's own files (labs/<lab>/...)
    hold the solutions, so the room's course copy that students read has only the labs' drivers
    (hpclab.classroom.install); there the rest are read from the instructors' copy of the labs
    (install.copy_lab_solutions), which the room's grader account reads and students do not."""
    here = paths.repo() / rel
    if here.exists() or not rel.startswith("labs/"):
        return here
    instructors = paths.instructors_labs() / Path(rel).relative_to("labs")
    try:
        return instructors if instructors.exists() else here
    except PermissionError:  # an account outside the instructors' group: say the repository's path
        return here


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sha256_text(text: str) -> str:
    """The SHA-256 of a file's text as grade() records it."""
    return hashlib.sha256(text.encode()).hexdigest()


# --- results ---------------------------------------------------------------------------------------

@dataclass
class Run:
    """One trial run: under which library and build, how it ended (returncode; hung: stopped at
    its limit), each rank's output {rank: (stdout, stderr)}, the stacks of a hung run's ranks
    {rank: gdb's record}, the launcher's own output, and the seconds it took."""

    library: str
    trial: str
    build: str
    np: int
    args: list[str]
    seconds: float
    returncode: int | None
    hung: bool
    ranks: dict[int, tuple[str, str]]
    launcher: str = ""
    stacks: dict[int, dict] = field(default_factory=dict)
    report: dict | None = None

    def outcome(self) -> model.Outcome:
        return model.Outcome(self.library, self.np, self.returncode or 0, self.ranks, self.report)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ranks"] = {str(r): {"stdout": o[-MAX_OUTPUT:], "stderr": e[-MAX_OUTPUT:]} for r, (o, e) in self.ranks.items()}
        d["stacks"] = {str(r): s for r, s in self.stacks.items()}
        d["launcher"] = self.launcher[-MAX_OUTPUT:]
        return d


@dataclass
class Report:
    """A code lab graded: its checks in order, the runs, the SHA-256 of each graded file, the
    libraries and the seconds it took (build and runs)."""

    lab: str
    sources: dict[str, str]
    libraries: list[str]
    checks: list[model.Check]
    runs: list[Run]
    seconds: float
    builds: dict[str, str] = field(default_factory=dict)   # "<library> <build>": the compiler's words

    def part(self, part: str) -> list[model.Check]:
        return [c for c in self.checks if c.part == part]

    def passed(self, part: str | None = None) -> bool:
        checks = self.checks if part is None else self.part(part)
        return bool(checks) and all(c.passed for c in checks)

    def feedback(self, part: str | None = None) -> str:
        """The failed checks' messages (every check of the part when all passed), one per line;
        checks not run are summed up in one line."""
        checks = self.checks if part is None else self.part(part)
        failed = [c for c in checks if not c.passed]
        return "\n".join(messages(failed or checks))

    def as_dict(self) -> dict:
        return {"version": RECORD_VERSION, "lab": self.lab, "sources": self.sources, "libraries": self.libraries,
                "seconds": round(self.seconds, 3), "checks": [c.as_dict() for c in self.checks],
                "runs": [r.as_dict() for r in self.runs], "builds": self.builds}

    @classmethod
    def from_dict(cls, doc: dict) -> "Report":
        if doc.get("version") != RECORD_VERSION:
            raise HpclabError("the code lab's report is of another version", "grade the submission again")
        runs = [Run(**{**r, "ranks": {int(k): (v["stdout"], v["stderr"]) for k, v in r["ranks"].items()},
                       "stacks": {int(k): v for k, v in r["stacks"].items()}}) for r in doc["runs"]]
        return cls(doc["lab"], doc["sources"], doc["libraries"], [model.Check.from_dict(c) for c in doc["checks"]],
                   runs, doc["seconds"], doc.get("builds", {}))


def messages(checks: list[model.Check]) -> list[str]:
    """The checks' messages, those not run summed up in one line per reason; when every check
    passed, one line naming the runs and libraries."""
    if checks and all(c.passed for c in checks):
        libs = list(dict.fromkeys(m.group(1) for c in checks for m in [re.search(r"under ([\w.-]+)", c.what)] if m))
        return [f"all {len(checks)} checks passed, under {', '.join(libs) or 'every library'}"]
    out, skipped = [], {}
    for c in checks:
        if not c.passed and c.why.startswith("not run"):
            skipped.setdefault(c.why, []).append(c.what)
        else:
            out.append(c.message())
    for why, whats in skipped.items():
        out.append(f"{len(whats)} more run(s) {why} ({'; '.join(whats)})")
    return out


# --- building ------------------------------------------------------------------------------------------

_COURSE_LOCK = threading.Lock()
_CACHE_ROOT: Path | None = None
CACHE_VERSION = "1"   # part of every key: a change to how things are built or stored starts afresh


def _cache_root() -> Path:
    """The grading user's cache of course objects and reference runs, kept between processes
    (nbgrader's several processes, one collect after another): <tmp>/hpclab-codelab-<uid>, 0700,
    used only when this user owns it and it is no link; otherwise a folder for this process."""
    global _CACHE_ROOT
    if _CACHE_ROOT is None:
        root = Path(tempfile.gettempdir()) / f"hpclab-codelab-{os.getuid()}"
        try:
            root.mkdir(mode=0o700, exist_ok=True)
            st = root.lstat()
            if root.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise OSError("not ours alone")
            _CACHE_ROOT = root
        except OSError:
            _CACHE_ROOT = Path(tempfile.mkdtemp(prefix="hpclab-codelab-"))
    return _CACHE_ROOT


def _key(*parts) -> str:
    h = hashlib.sha256(CACHE_VERSION.encode())
    for part in parts:
        h.update(b"\0" + (part if isinstance(part, bytes) else str(part).encode()))
    return h.hexdigest()[:32]


def _course_key(lib, build: model.Build) -> str:
    """What the course's objects of a build depend on: the library (its mpicc, as installed),
    the flags and the text of every course source and header."""
    repo = paths.repo()
    mpicc = Path(lib.mpicc)
    texts = [(repo / f).read_bytes() for f in build.course]
    texts += [h.read_bytes() for inc in build.includes for h in sorted((repo / inc).glob("*.h"))]
    return _key(lib.name, mpicc.resolve(), mpicc.stat().st_mtime_ns, model.COURSE_FLAGS, build.course,
                build.includes, *texts)
def _compile_env(lib) -> dict[str, str]:
    return {"PATH": f"{lib.bindir}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", "/tmp"),
            **lib.environment()}


def _course_objects(lib, build: model.Build) -> Path:
    """A folder with the build's course sources compiled by the library's mpicc (kernel flags,
    debug information), from the cache when the same sources were compiled before; HpclabError
    when one does not compile (the course's bug, not the student's)."""
    folder = _cache_root() / f"objects-{lib.name}-{_course_key(lib, build)}"
    with _COURSE_LOCK:
        if folder.is_dir():
            return folder
        work = Path(tempfile.mkdtemp(prefix=".objects-", dir=_cache_root()))
        repo = paths.repo()
        flags = ["-I" + str(repo / inc) for inc in build.includes] + [
            '-DHPCLAB_VERSION="codelab"', f'-DHPCLAB_BUILD_FLAGS="{lib.mpicc} {" ".join(model.COURSE_FLAGS)}"']
        for n, src in enumerate(build.course):
            obj = work / f"course{n}-{Path(src).stem}.o"
            done = commands.run([str(lib.mpicc), *model.COURSE_FLAGS, "-g", *flags, "-c", "-o", str(obj),
                                 str(repo / src)], f"compile {src} with {lib.name}", env=_compile_env(lib),
                                timeout=300)
            if done is None or done.returncode != 0:
                shutil.rmtree(work, ignore_errors=True)
                raise HpclabError(f"the course's {src} does not compile with {lib.name}: "
                                  + ((done.stderr.strip().splitlines() or ["no output"])[-1] if done else "timed out"),
                                  "check the library's installation (make mpi-libraries)")
        try:
            work.rename(folder)   # whole or not at all; another process may have been first
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
        return folder


def _stage(code: model.CodeLab, build: model.Build, files: dict[str, str], objects: Path, into: Path) -> None:
    """The folder copied into the sandbox: the student's files (their text: `files`), the
    headers of the build's include folders and the course's objects."""
    into.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (into / name).write_text(text)
    for inc in build.includes:
        for header in sorted((paths.repo() / inc).glob("*.h")):
            shutil.copy(header, into / header.name)
    for obj in sorted(objects.glob("*.o")):
        shutil.copy(obj, into / obj.name)


class Bench:
    """One library's sandboxed workbench for one build of one set of files: build() compiles
    and links them, run() starts a trial. Use as a context manager (the sandbox's files are
    removed at the end)."""

    def __init__(self, code: model.CodeLab, lib, build: model.Build,
                 files: dict[str, str]):
        self.code, self.lib, self.build_ = code, lib, build
        self.files = files
        self._stage = Path(tempfile.mkdtemp(prefix="hpclab-codelab-stage-"))
        self.work = self._stage / "work"
        self.box = None
        self.binary: Path | None = None
        self.log = ""

    def __enter__(self):
        objects = _course_objects(self.lib, self.build_)
        _stage(self.code, self.build_, self.files, objects, self.work)
        ro = [self.lib.prefix] if not str(self.lib.prefix).startswith("/usr") else []
        if Path("/sys/devices/system").is_dir():
            ro.append(Path("/sys/devices/system"))   # hwloc reads the CPU topology there
        env = {"PATH": f"{self.lib.bindir}:/usr/bin:/bin", "OMP_NUM_THREADS": "1",
               **self.lib.sandboxed_environment()}
        self.box = sandbox.Sandbox(LIMITS, workdir=self.work, ro=tuple(ro), env=env, shm_mb=SHM_MB)
        self.inside = self.box.scratch / "work"   # the sandbox's copy, seen from outside
        return self

    def __exit__(self, *exc):
        if self.box is not None:
            self.box.close()
        shutil.rmtree(self._stage, ignore_errors=True)

    def build(self) -> bool:
        """Compile the student's files and link the program, inside the sandbox (one shell
        there, stopping at the first failure). True when it built; self.log holds the
        compiler's words either way."""
        import shlex   # only here: the build's one command line

        mpicc = str(self.lib.mpicc)
        steps = []
        objs = []
        for name in self.build_.student:
            obj = f"student-{Path(name).stem}.o"
            steps.append([mpicc, *model.STUDENT_FLAGS, "-I.", *self.build_.defines, "-c", "-o", obj, name])
            objs.append(obj)
        course = sorted(p.name for p in self.work.glob("course*.o"))
        steps.append([mpicc, "-o", self.build_.output, *objs, *course, *model.LINK_FLAGS])
        script = " && ".join(shlex.join(step) for step in steps)
        done = self.box.run(["sh", "-c", script], timeout=120)
        self.log = done.stdout + done.stderr
        if done.returncode == 0:
            self.binary = self.inside / self.build_.output
        return done.returncode == 0

    def run(self, trial: model.Trial, hang_seconds: float) -> Run:
        """Run a trial; a run past hang_seconds has its ranks' stacks sampled, then is stopped."""
        for old in self.inside.glob("rank.*"):
            old.unlink()
        report = self.inside / "report.json"
        if report.exists():
            report.unlink()
        args = [a.replace("{report}", "report.json") for a in trial.args]
        argv = [*self.lib.sandboxed_argv(trial.np), "sh", "-c", RANK_WRAPPER, f"./{self.build_.output}", *args]
        log = self.box.scratch / "launcher.log"
        t0 = time.monotonic()
        with open(log, "wb") as out, open(os.devnull, "rb") as nothing:
            proc = self.box.popen(argv, stdin=nothing, stdout=out, stderr=out, start_new_session=True)
            hung = False
            while proc.poll() is None:
                if time.monotonic() - t0 > hang_seconds:
                    hung = True
                    break
                time.sleep(0.01)
            seconds = time.monotonic() - t0
            stacks = {}
            if hung:
                stacks = sample_stacks(proc.pid, self.build_.output, self.inside / self.build_.output)
                _stop(proc, [st["pid"] for st in stacks.values()])
            else:
                seconds = time.monotonic() - t0
        ranks = {}
        for f in sorted(self.inside.glob("rank.*.out")):
            r = int(f.name.split(".")[1])
            err = self.inside / f"rank.{r}.err"
            ranks[r] = (_tail(f), _tail(err) if err.exists() else "")
        doc = None
        if report.is_file():
            try:
                doc = json.loads(report.read_text())
            except ValueError:
                doc = None
        return Run(self.lib.name, trial.name, self.build_.name, trial.np, list(trial.args), seconds,
                   None if hung else proc.returncode, hung, ranks, _tail(log), stacks, doc)


def _tail(path: Path) -> str:
    data = path.read_bytes()[-4 * MAX_OUTPUT:]
    return data.decode("utf-8", "replace")[-MAX_OUTPUT:]


def _stop(proc, ranks: list[int] = (), seconds: float = 5.0) -> None:
    """Stop a sandbox and everything in it (its PID namespace ends with its first process), and
    wait (at most `seconds`) until the ranks' processes `ranks` are gone: the kernel kills the
    namespace's other processes as its first one exits, a moment after the launcher is reaped,
    and a spinning rank must not burn a core after its run is over."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + seconds
    while any(Path(f"/proc/{pid}").exists() for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.01)


# --- where a hung rank is ------------------------------------------------------------------------

def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return kids


def rank_processes(root: int, name: str) -> dict[int, int]:
    """{rank: pid} of the processes called `name` below process `root` (pids as seen from
    here); the rank from the launcher's variables in the process's environment."""
    kids, todo, found = _children(), [root], {}
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != name[:15]:
                continue
            env = dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().decode(
                "utf-8", "replace").split("\0") if "=" in kv)
        except OSError:
            continue
        rank = next((env[k] for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK") if k in env), None)
        if rank is not None and rank.isdigit():
            found[int(rank)] = pid
    return found


# Run inside gdb (its Python): the frames of the stopped process, and for the innermost call of
# an MPI function made from code with debug information, the call as written and the values of
# its arguments in the caller's frame. One JSON line, after a marker.
GDB_SCRIPT = r'''
import gdb, json, os, re
MPI = re.compile(r"^P?MPI_[A-Z][A-Za-z0-9_]*$")
CALL = re.compile(r"\b(P?MPI_[A-Z][A-Za-z0-9_]*)\s*\(")

def source_lines(path):
    pid = gdb.selected_inferior().pid
    for p in (f"/proc/{pid}/root{path}", path):
        try:
            with open(p, errors="replace") as fh:
                return fh.read().splitlines()
        except OSError:
            pass
    return None

def call_at(lines, line, name):
    """The text of the call of `name` (or the last MPI call) ending at or before `line`, and its arguments."""
    for start in range(line - 1, max(-1, line - 9), -1):
        hits = [m for m in CALL.finditer(lines[start])]
        if not hits:
            continue
        hit = next((m for m in hits if m.group(1).lstrip("P") == name), hits[-1])
        text = "\n".join(lines[start:min(len(lines), line + 8)])[hit.start():]
        depth, args, cur, out = 0, [], "", ""
        for ch in text[len(hit.group(1)):]:
            out += ch
            if ch == "(":
                depth += 1
                if depth == 1:
                    continue
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    args.append(cur.strip())
                    break
            if depth == 1 and ch == ",":
                args.append(cur.strip())
                cur = ""
            elif depth >= 1:
                cur += ch
        return hit.group(1) + re.sub(r"\s+", " ", out), [a for a in args if a]
    return None, []

frames, objs = [], []
try:
    f = gdb.newest_frame()
except gdb.error:
    f = None
while f is not None and len(frames) < 80:
    try:
        sal = f.find_sal()
        sym = sal.symtab
        frames.append({"function": f.name(), "file": sym.filename if sym else None,
                       "path": sym.fullname() if sym else None, "line": sal.line if sym else 0,
                       "object": gdb.solib_name(f.pc())})
        objs.append(f)
        f = f.older()
    except gdb.error:
        break

call = None
for i, fr in enumerate(frames[:-1]):
    caller = frames[i + 1]
    if fr["function"] and MPI.match(fr["function"]) and caller["path"] and not caller["file"].endswith("ledger.c"):
        name = fr["function"].lstrip("P")
        lines = source_lines(caller["path"])
        text, args = call_at(lines, caller["line"], name) if lines else (None, [])
        values = []
        try:
            objs[i + 1].select()
            for a in args:
                try:
                    v = gdb.parse_and_eval(a)
                    code = v.type.strip_typedefs().code
                    values.append(int(v) if code in (gdb.TYPE_CODE_INT, gdb.TYPE_CODE_ENUM, gdb.TYPE_CODE_BOOL,
                                                     gdb.TYPE_CODE_CHAR) else None)
                except (gdb.error, OverflowError, ValueError):
                    values.append(None)
        except gdb.error:
            values = [None] * len(args)
        call = {"function": name, "file": caller["file"], "line": caller["line"], "caller": caller["function"],
                "text": text, "args": args, "values": values, "frame": i}
        break
print("@@hpclab-stack@@ " + json.dumps({"frames": frames, "call": call}))
'''

_GDB_FILE: Path | None = None


def _gdb_script() -> Path:
    global _GDB_FILE
    if _GDB_FILE is None or not _GDB_FILE.exists():
        _GDB_FILE = _cache_root() / "stack.py"
        _GDB_FILE.write_text(GDB_SCRIPT)
    return _GDB_FILE


def stack(pid: int, exe: Path | None = None) -> dict:
    """Where process `pid` is: {"frames": [{function, file, line, object}], "call": {function,
    file, line, caller, text, args, values} or None}, sampled with gdb (attached for a moment,
    from outside the sandbox's PID namespace); {"error": why} when gdb cannot tell.

    exe: the program's file as seen from here. gdb reads the program and its libraries from
    this side (sysroot /: the sandbox binds them read-only at the same paths): through
    /proc/PID/root it may not, when the sandbox is an unprivileged user namespace (measured:
    "could not open as an executable file: Operation not permitted", and no frames)."""
    argv = ["gdb", "-nx", "-batch", "-iex", "set sysroot /", "-x", str(_gdb_script()), f"--pid={pid}"]
    done = commands.run([*argv, str(exe)] if exe is not None and exe.is_file() else argv,
                        "sample a hung rank's stack", timeout=30,
                        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"})
    if done is None:
        return {"error": "gdb did not answer within 30 s"}
    line = next((l for l in done.stdout.splitlines() if l.startswith("@@hpclab-stack@@ ")), None)
    doc = json.loads(line.split(" ", 1)[1]) if line else {}
    if not any(f.get("function") for f in doc.get("frames") or []):
        why = " ".join(l for l in done.stderr.strip().splitlines() if "PID namespaces" not in l)[-300:]
        return {"error": f"gdb could not read the stack ({why or 'no output'}); /proc says {_proc_state(pid)}"}
    return doc


def _proc_state(pid: int) -> str:
    """What /proc says of a process (its system call, or "running"), for when gdb cannot help."""
    try:
        return "system call: " + Path(f"/proc/{pid}/syscall").read_text().split()[0]
    except (OSError, IndexError):
        return "process gone"


def sample_stacks(root: int, name: str, exe: Path | None = None) -> dict[int, dict]:
    """{rank: stack} of every rank called `name` below process `root`, sampled in parallel
    (exe: the program's file, as for `stack`); each stack also holds the rank's "pid", as seen
    from here."""
    procs = rank_processes(root, name)
    if not shutil.which("gdb"):
        return {r: {"error": "gdb is not installed (make setup installs it); /proc says " + _proc_state(p), "pid": p}
                for r, p in sorted(procs.items())}
    with ThreadPoolExecutor(max_workers=max(1, len(procs))) as pool:
        stacks = dict(zip(procs, pool.map(lambda pid: stack(pid, exe), procs.values())))
    return {r: {**stacks[r], "pid": procs[r]} for r in sorted(stacks)}


# --- why a run failed ------------------------------------------------------------------------

SEND_CALLS = {"MPI_Send", "MPI_Ssend", "MPI_Rsend", "MPI_Bsend"}
RECV_CALLS = {"MPI_Recv", "MPI_Probe", "MPI_Mprobe"}
WAIT_CALLS = {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome"}
COLLECTIVES = {"MPI_Barrier", "MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Gather", "MPI_Allgather",
               "MPI_Scatter", "MPI_Alltoall", "MPI_Gatherv", "MPI_Scatterv", "MPI_Allgatherv", "MPI_Cart_create",
               "MPI_Comm_split", "MPI_Comm_dup", "MPI_Finalize"}


@dataclass(frozen=True)
class Blocked:
    """One hung rank's MPI call as the diagnosis reads it: kind ("send", "recv", "sendrecv",
    "wait", "collective", "other", "none"), the peers and tags it names (None: unknown or a
    wildcard), where it is, and the call as written."""

    rank: int
    function: str | None
    kind: str
    dest: int | None = None
    send_tag: int | None = None
    source: int | None = None
    recv_tag: int | None = None
    where: str = ""
    text: str = ""


# The arguments whose values tell a mistake (counts, ranks, tags), by position; handles such as
# a communicator are integers in MPICH and say nothing.
_INT_ARGS = {**{f: (1, 3, 4) for f in ("MPI_Send", "MPI_Ssend", "MPI_Rsend", "MPI_Bsend", "MPI_Isend", "MPI_Issend",
                                      "MPI_Recv", "MPI_Irecv")},
             "MPI_Sendrecv": (1, 3, 4, 6, 8, 9), "MPI_Probe": (0, 1), "MPI_Waitall": (0,), "MPI_Waitany": (0,),
             "MPI_Waitsome": (0,)}


def _with_values(call: dict) -> str:
    """The call as written, each count, rank or tag that is an expression followed by its value
    ("MPI_Send(mine, count = 131072, MPI_DOUBLE, partner = 1, 0, comm)")."""
    args, vals = call.get("args") or [], call.get("values") or []
    if not call.get("text") or not args:
        return call.get("text") or ""
    show = _INT_ARGS.get(call["function"], ())
    shown = [f"{a} = {v}" if i in show and v is not None and not re.fullmatch(r"-?\d+", a) else a
             for i, (a, v) in enumerate(zip(args, vals + [None] * (len(args) - len(vals))))]
    return f"{call['function']}({', '.join(shown)})"


def _value(call: dict, i: int) -> int | None:
    vals = call.get("values") or []
    return vals[i] if i < len(vals) else None


def blocked(rank: int, st: dict) -> Blocked:
    """The MPI call a hung rank was in, from its stack sample."""
    call = st.get("call")
    if "error" in st or not (call or any(f.get("function") for f in st.get("frames") or [])):
        return Blocked(rank, None, "unknown", where=st.get("error", "no stack"))
    if not call:
        frames = st.get("frames") or []
        mine = next((f for f in frames if f.get("file")), None)
        where = f"in {mine['function']}() at {mine['file']}:{mine['line']}" if mine else (
            f"in {frames[0]['function']}" if frames and frames[0].get("function") else st.get("error", "somewhere unknown"))
        mpi = next((f["function"] for f in frames if f.get("function") and re.match(r"^P?MPI_", f["function"])), None)
        return Blocked(rank, mpi.lstrip("P") if mpi else None, "other" if mpi else "none", where=where)
    fn = call["function"]
    where = f"{call['file']}:{call['line']}" + (f" in {call['caller']}()" if call.get("caller") else "")
    text = _with_values(call) or fn
    if fn in SEND_CALLS:
        return Blocked(rank, fn, "send", dest=_value(call, 3), send_tag=_value(call, 4), where=where, text=text)
    if fn == "MPI_Recv":
        return Blocked(rank, fn, "recv", source=_value(call, 3), recv_tag=_value(call, 4), where=where, text=text)
    if fn in ("MPI_Probe", "MPI_Mprobe"):
        return Blocked(rank, fn, "recv", source=_value(call, 0), recv_tag=_value(call, 1), where=where, text=text)
    if fn == "MPI_Sendrecv":
        return Blocked(rank, fn, "sendrecv", dest=_value(call, 3), send_tag=_value(call, 4), source=_value(call, 8),
                       recv_tag=_value(call, 9), where=where, text=text)
    if fn in WAIT_CALLS:
        return Blocked(rank, fn, "wait", where=where, text=text)
    if fn in COLLECTIVES:
        return Blocked(rank, fn, "collective", where=where, text=text)
    return Blocked(rank, fn, "other", where=where, text=text)


def _tag(t: int | None) -> str:
    return "an unknown tag" if t is None else ("any tag" if t < 0 else f"tag {t}")


def diagnose(stacks: dict[int, dict], np: int, seconds: float) -> str:
    """Why a hung run hung, in words: each rank's call and where, then the likely mistake."""
    ranks = {r: blocked(r, st) for r, st in stacks.items()}
    lines = []
    for r in range(np):
        b = ranks.get(r)
        if b is None:
            lines.append(f"rank {r}: not found (it had ended, or never started)")
        elif b.kind == "unknown":
            lines.append(f"rank {r}: where it was is unknown: {b.where}")
        elif b.kind == "none":
            lines.append(f"rank {r}: in no MPI call, {b.where}")
        else:
            lines.append(f"rank {r}: in {b.function}, {b.text} at {b.where}" if b.text and b.text != b.function
                         else f"rank {r}: in {b.function}, {b.where}")
    found = list(ranks.values())
    kinds = {b.kind for b in found}
    why = ""
    sends = [b for b in found if b.kind == "send"]
    recvs = [b for b in found if b.kind in ("recv", "sendrecv")]
    if found and kinds == {"send"}:
        rule = ("MPI_Ssend returns only once the matching receive is posted" if all(b.function == "MPI_Ssend" for b in sends)
                else "above the eager limit MPI_Send returns only once the matching receive is posted")
        why = (f"every rank is in a blocking send and none has posted its receive: {rule}, so they all wait "
               "for each other (a deadlock: both ranks send first). Let one side receive first, or use "
               "MPI_Sendrecv, or MPI_Irecv + MPI_Isend + MPI_Waitall.")
    for b in recvs:   # a partner that cannot send, whatever the others do
        if why or b.source is None:
            continue
        if b.source == b.rank:
            why = f"rank {b.rank} waits to receive from itself (source {b.source}): a wrong partner or neighbour."
        elif b.source >= np:
            why = f"rank {b.rank} waits for rank {b.source}, which does not exist ({np} ranks): a wrong partner."
    if not why and found and kinds <= {"recv"} and all(b.function == "MPI_Recv" for b in found) and len(found) > 1:
        why = ("every rank waits in MPI_Recv and none sends: both ranks receive first (a deadlock at any size). "
               "Let one side send first, or use MPI_Sendrecv or non-blocking calls. (Or a small message went out "
               "earlier with another tag than the receive's, or to another rank, and waits unmatched: compare each "
               "receive's source and tag with the matching send's.)")
    for b in recvs:
        if why:
            break
        if b.source is not None and 0 <= b.source < np:
            peer = ranks.get(b.source)
            if peer is not None and peer.kind in ("send", "sendrecv") and peer.dest == b.rank \
                    and None not in (peer.send_tag, b.recv_tag) and b.recv_tag >= 0 and peer.send_tag != b.recv_tag:
                why = (f"rank {b.rank} waits for {_tag(b.recv_tag)} from rank {b.source}, while rank {b.source} sends "
                       f"to it with {_tag(peer.send_tag)}: the tags do not match, so the message is never received.")
            elif peer is not None and peer.kind in ("send", "sendrecv") and peer.dest is not None and peer.dest != b.rank:
                why = (f"rank {b.rank} waits for rank {b.source}, but rank {b.source} sends to rank {peer.dest}: "
                       "a wrong partner (destination or source).")
            elif peer is not None and peer.kind in ("recv", "sendrecv") and peer.source == b.rank and b.kind == "recv" \
                    and peer.kind == "recv":
                why = (f"ranks {b.rank} and {b.source} each wait to receive from the other and neither sends: "
                       "a receive posted before the matching send on both sides.")
            elif peer is not None and peer.kind in ("collective", "wait", "none", "other"):
                why = (f"rank {b.rank} waits for {_tag(b.recv_tag)} from rank {b.source}, which is already in "
                       f"{peer.function or 'other code'}: no send with that source and tag was made or it went "
                       "elsewhere; check the receive's source and tag against the matching send.")
    if not why and "wait" in kinds:
        w = next(b for b in found if b.kind == "wait")
        why = (f"rank {w.rank} waits in {w.function} at {w.where} for a request that never completes: a receive "
               "that no send matches (check each MPI_Irecv's source and tag against the neighbour's MPI_Isend: "
               "a message to the upper neighbour travels up) or a send to a rank that never receives it.")
    if not why and "collective" in kinds and len(kinds) > 1:
        c = next(b for b in found if b.kind == "collective")
        o = next(b for b in found if b.kind != "collective")
        why = (f"rank {c.rank} has moved on to {c.function} while rank {o.rank} is still "
               f"{'in ' + o.function if o.function else 'outside MPI'}: the ranks do not make the same calls "
               "(a message one of them waits for never came).")
    if not why and "unknown" in kinds:
        why = ("the ranks' stacks could not be read, so the grader cannot say which call they waited in; "
               "run it yourself with `python -m hpclab.grading.codelab run` to see.")
    if not why and kinds == {"none"}:
        why = "no rank was in an MPI call: the program loops (an endless loop in the code)."
    if not why and sends and recvs:
        why = ("some ranks wait in sends and others in receives that do not match them: check the partners "
               "and tags of each pair.")
    if not why:
        why = "the ranks wait for each other in the calls above."
    return f"hung: stopped after {seconds:.0f} s. " + "; ".join(lines) + ". " + why


SIGNALS = {int(s): s.name for s in signal.Signals}
MPI_ERRORS = [
    (r"TRUNCATE|truncat", "a message longer than its receive buffer (MPI_ERR_TRUNCATE): the receive's count "
                          "or datatype does not match the send's (a type or count mismatch)"),
    (r"MPI_ERR_RANK|[Ii]nvalid rank", "a destination or source rank that does not exist (MPI_ERR_RANK): a wrong partner"),
    (r"MPI_ERR_TAG|[Ii]nvalid tag", "an invalid tag (MPI_ERR_TAG)"),
    (r"MPI_ERR_COUNT|[Ii]nvalid count", "a negative or invalid count (MPI_ERR_COUNT)"),
    (r"MPI_ERR_TYPE|[Ii]nvalid datatype", "an invalid datatype (MPI_ERR_TYPE)"),
    (r"MPI_ERR_BUFFER|[Ii]nvalid buffer", "an invalid buffer (MPI_ERR_BUFFER)"),
    (r"MPI_ERR_REQUEST|[Ii]nvalid request", "an invalid request (MPI_ERR_REQUEST): a request used twice or never started"),
    (r"MPI_ERR_COMM|[Ii]nvalid communicator|[Nn]ull communicator", "an invalid communicator (MPI_ERR_COMM)"),
    (r"MPI_ERR_DIMS|[Ii]nvalid dim", "invalid dimensions for the process grid (MPI_ERR_DIMS)"),
    (r"MPI_ERR_ARG|[Ii]nvalid argument", "an invalid argument (MPI_ERR_ARG)"),
]
# Open MPI's error classes (mpi.h; 4.1 and 5.0 alike): its fatal error handler ends the rank with
# the error's class as exit code, and mpirun returns it
OMPI_ERROR_CLASSES = {1: "MPI_ERR_BUFFER", 2: "MPI_ERR_COUNT", 3: "MPI_ERR_TYPE", 4: "MPI_ERR_TAG", 5: "MPI_ERR_COMM",
                      6: "MPI_ERR_RANK", 7: "MPI_ERR_REQUEST", 12: "MPI_ERR_DIMS", 13: "MPI_ERR_ARG",
                      15: "MPI_ERR_TRUNCATE"}
# 4.1's mpirun loses the ranks' error message now and then, aggregated or not: all it prints is this
# (seen once, a seeded mistake's MPI_ERR_TYPE, in one of the full `make test` runs of 2026-12-07)
OMPI41_LOST_HELP = re.compile(r"ORTE_ERROR_LOG: .* in file \S*show_help\.c")


def _error_class_of_lost_message(text: str, returncode: int | None) -> str | None:
    """The error class name an Open MPI 4.1 run's exit code gives when mpirun lost the message."""
    if returncode and OMPI41_LOST_HELP.search(text):
        return OMPI_ERROR_CLASSES.get(returncode)
    return None


CRASHES = [
    (r"Segmentation fault|SIGSEGV|signal 11", "a rank crashed with a segmentation fault: it touched memory outside "
                                             "its buffers (an index, count, stride or extent too large?)"),
]


def failure(run: Run, binary: Path | None) -> str:
    """Why a completed run failed, in words: the program's ERROR lines, the request ledger
    (its call sites as file:line), MPI's error class, the signal that ended it."""
    text = "\n".join(o + "\n" + e for o, e in run.ranks.values()) + "\n" + run.launcher
    parts = []
    errors: dict[str, list[str]] = {}   # the same error of several ranks: said once, naming them
    for line in text.splitlines():
        m = re.match(r"\s*ERROR: rank (\d+), (.*)$", line)
        if m:
            errors.setdefault(re.sub(r"\brank \d+'s value", "the partner's value", m.group(2)), []).append(m.group(1))
        elif line.strip().startswith("ERROR"):
            errors.setdefault(line.strip()[len("ERROR"):].lstrip(": "), [])
    parts += [f"ERROR (rank{'s' if len(r) > 1 else ''} {', '.join(dict.fromkeys(r))}): {e}" if r else f"ERROR: {e}"
              for e, r in list(errors.items())[:2]]
    ledger = [l.strip() for l in text.splitlines() if "codelab-ledger:" in l or "request(s) never completed" in l]
    if ledger and not errors:
        parts += list(dict.fromkeys(l.split("codelab-ledger: ", 1)[-1] for l in ledger))[:2]
    call = re.search(r"error occurred in (MPI_\w+)|Fatal error in (?:internal_|P?MPI_)(\w+)", text)
    for pattern, words in MPI_ERRORS:
        if re.search(pattern, text):
            parts.append("MPI reported " + words)
            break
    else:
        lost = _error_class_of_lost_message(text, run.returncode)
        words = next((w for pattern, w in MPI_ERRORS if lost and re.search(pattern, lost)), None)
        if words:
            parts.append(f"MPI reported {words} (from the exit code, {run.returncode}: Open MPI's mpirun "
                         "lost the ranks' message, and its error handler ends a rank with the error's class)")
    parts += [words for pattern, words in CRASHES if re.search(pattern, text)][:1]
    if call:
        name = call.group(1) or "MPI_" + call.group(2)
        parts.append(f"the call that failed: {name}")
        if re.search(r"MPI_COMM_NULL|[Nn]ull communicator", text):
            parts.append("(a call on MPI_COMM_NULL: MPI_Cart_create gives it to a rank outside the grid, e.g. "
                         "when the dims were not filled in by MPI_Dims_create)")
    if run.returncode and run.returncode < 0:
        parts.append(f"a rank was killed by {SIGNALS.get(-run.returncode, -run.returncode)}")
    if not parts:
        tail = [l for l in text.strip().splitlines() if l.strip()][-3:]
        parts.append(f"exit code {run.returncode}" + (": " + " | ".join(tail) if tail else ""))
    return _resolve_sites(" ".join(parts), binary)


def _resolve_sites(text: str, binary: Path | None) -> str:
    """"<program>+0x1a2b" call sites (the ledger's) as file:line, with addr2line on the program."""
    sites = re.findall(r"(\S+)\+0x([0-9a-f]+)", text)
    if not sites or binary is None or not binary.is_file() or not shutil.which("addr2line"):
        return text
    addrs = sorted({a for obj, a in sites if Path(obj).name == binary.name})
    if not addrs:
        return text
    done = commands.run(["addr2line", "-e", str(binary), *[f"0x{a}" for a in addrs]], "name a call site", timeout=20)
    if done is None or done.returncode != 0:
        return text
    names = dict(zip(addrs, done.stdout.splitlines()))
    for obj, a in sites:
        if a in names and not names[a].startswith("??"):
            text = text.replace(f"{obj}+0x{a}", Path(names[a].split(" ")[0]).name)
    return text


# --- grading --------------------------------------------------------------------------------------------

_REFERENCE_RUNS: dict[str, Run] = {}


def _student_files(code: model.CodeLab, folder: Path) -> dict[str, str]:
    files = {}
    for name in code.files:
        path = folder / name
        if not path.is_file():
            raise HpclabError(f"{path} is missing", f"the lab's file is {name}: keep its name")
        files[name] = path.read_text(errors="replace")
    return files


def _reference_files(build: model.Build) -> dict[str, str]:
    return {name: model.reference_text(course_source(ref).read_text())
            for name, ref in zip(build.student, build.reference)}


def _reference_run(code: model.CodeLab, lib, trial: model.Trial) -> Run:
    """The reference build's run of a trial under a library: run once, then from the cache (its
    key: the course's objects, the reference files and the trial)."""
    build = code.build(trial.build)
    refs = _reference_files(build)
    key = _key(code.lab, _course_key(lib, build), sorted(refs.items()), repr(trial), model.STUDENT_FLAGS)
    path = _cache_root() / f"reference-{lib.name}-{key}.json"
    if key not in _REFERENCE_RUNS and path.is_file():
        doc = json.loads(path.read_text())
        _REFERENCE_RUNS[key] = Run(**{**doc, "ranks": {int(k): (v["stdout"], v["stderr"]) for k, v in doc["ranks"].items()},
                                      "stacks": {}})
    if key not in _REFERENCE_RUNS:
        with Bench(code, lib, build, refs) as bench:
            if not bench.build():
                raise HpclabError(f"the reference of {code.lab} does not build with {lib.name}: {bench.log[-300:]}",
                                  "check the lab's reference files")
            run = bench.run(trial, code.hang_seconds)
        if run.hung or run.returncode:
            raise HpclabError(f"the reference of {code.lab} failed its trial {trial.name!r} under {lib.name}: "
                              + (diagnose(run.stacks, run.np, run.seconds) if run.hung else failure(run, None)),
                              "the course's reference must pass every trial")
        _REFERENCE_RUNS[key] = run
        write_atomic(path, json.dumps(run.as_dict()), mode=0o600)
    return _REFERENCE_RUNS[key]


def warm(lab: str, names: list[str] | None = None) -> int:
    """Fill this user's cache for code lab `lab` before any submission arrives: the course's
    objects of every build and the reference's run of every compared trial, under every library
    grade() uses (or those `names`d), as grade() would make them for its first submission. Run at
    release, so that a room's autograde starts warm and a reference that fails its trials is
    found before students submit (HpclabError, as grade() raises it). Returns the reference
    runs now cached."""
    code = code_lab(lab)
    cached = 0
    for n, lib in enumerate(libraries(names)):
        mine = [t for t in code.trials if n == 0 or t.everywhere]
        for build_name in dict.fromkeys(t.build for t in mine):
            _course_objects(lib, code.build(build_name))
        for trial in (t for t in mine if t.compare):
            _reference_run(code, lib, trial)
            cached += 1
    return cached


def _build_check(part_names, lib, build, log) -> list[model.Check]:
    errors = [l for l in log.splitlines() if "error" in l.lower()][:6] or log.strip().splitlines()[-6:]
    return [model.Check(part, f"build ({build.name}) with {lib.name}'s mpicc", False, measured="compiler errors",
                        expected="a program", tolerance="none",
                        why="the file does not compile: " + " | ".join(errors)) for part in part_names]


def grade(lab: str, folder: str | Path = ".", names: list[str] | None = None,
          files: dict[str, str] | None = None) -> Report:
    """Build and run the student's files of code lab `lab` in `folder` (or their text `files`)
    under every installed library (or those `names`d), in the sandbox; check every trial.

    Libraries run one after another, the system's first, which runs every trial; the others run
    the trials marked `everywhere`. Once a part has failed a check under one library, the others
    do not run the trials that grade only failed parts (their checks say so), since that part is
    wrong either way; a part that passed is still tried under them (parts are graded apart:
    a ping-pong's timing mistake costs no payload points). Within a library a hung trial skips
    that library's remaining trials of the same part. Returns the
    Report; raises HpclabError for the course's problems (a reference that fails, a missing file)."""
    code = code_lab(lab)
    folder = Path(folder)
    files = dict(files) if files is not None else _student_files(code, folder)
    sources = {n: sha256_text(t) for n, t in files.items()}
    libs = libraries(names)
    t0 = time.monotonic()
    checks: list[model.Check] = []
    runs: list[Run] = []
    builds: dict[str, str] = {}
    failed: dict[str, str] = {}   # part: the library under which it first failed
    for n, lib in enumerate(libs):
        mine = [t for t in code.trials if n == 0 or t.everywhere]
        spared = [t for t in mine if all(p in failed for p in (t.part, *t.also))]
        for trial in spared:
            checks.append(model.Check(trial.part, f"{trial.name} under {lib.name}", False, why=(
                f"not run: the code already failed under {failed[trial.part]} (above)")))
        mine = [t for t in mine if t not in spared]
        before = len(checks)
        for build_name in dict.fromkeys(t.build for t in mine):
            build = code.build(build_name)
            trials = [t for t in mine if t.build == build_name]
            # the reference runs first: one sandbox at a time per process (a sandbox's cgroup is
            # named after the process)
            refs = {t: _reference_run(code, lib, t).outcome() for t in trials if t.compare}
            with Bench(code, lib, build, {n: files[n] for n in build.student}) as bench:
                ok = bench.build()
                builds[f"{lib.name} {build_name}"] = bench.log[-MAX_OUTPUT:]
                if not ok:
                    checks += _build_check(list(dict.fromkeys(t.part for t in trials)), lib, build, bench.log)
                    continue
                hung_parts: set[str] = set()
                for trial in trials:
                    what = f"{trial.name} under {lib.name}"
                    parts = (trial.part, *trial.also)
                    if trial.part in hung_parts:
                        checks += [model.Check(p, what, False, why="not run: an earlier run of this part hung")
                                   for p in parts]
                        continue
                    run = bench.run(trial, code.hang_seconds)
                    runs.append(run)
                    if run.hung:
                        hung_parts.add(trial.part)
                        why = diagnose(run.stacks, run.np, run.seconds)
                        checks += [model.Check(p, what, False, measured=f"no end after {run.seconds:.0f} s",
                                               expected="the program ends", tolerance=f"{code.hang_seconds:g} s",
                                               why=why) for p in parts]
                        continue
                    if run.returncode != 0:
                        why = failure(run, bench.binary)
                        checks += [model.Check(p, what, False, measured=f"exit code {run.returncode}",
                                               expected="exit code 0", tolerance="none", why=why) for p in parts]
                        continue
                    leaks = [l.split("codelab-ledger: ", 1)[1].rstrip("; ") for o, e in run.ranks.values()
                             for l in e.splitlines() if l.startswith("codelab-ledger: ")]
                    if leaks:
                        checks.append(model.Check(trial.part, f"requests, {what}", False,
                                                  measured=_resolve_sites("; ".join(leaks), bench.binary),
                                                  expected="every request completed (MPI_Wait/MPI_Waitall)",
                                                  tolerance="none", why=(
                            "a request was never completed (a request leaked): until a wait completes it, its "
                            "send buffer may not be reused and its receive buffer may not hold the data yet; "
                            "wait for every MPI_Isend and MPI_Irecv (MPI_Waitall) before the buffers are used")))
                    checks += code.check(trial, run.outcome(), refs.get(trial))
        for c in checks[before:]:
            if not c.passed:
                failed.setdefault(c.part, lib.name)
    return Report(lab, sources, [lib.name for lib in libs], checks, runs, time.monotonic() - t0, builds)


# --- the record in a submission, and the verdict of a test cell -----------------------------------

def record_path(folder: str | Path, lab: str) -> Path:
    return Path(folder) / RECORD_DIR / f"{lab}.json"


def write_record(folder: str | Path, report: Report) -> Path:
    path = record_path(folder, report.lab)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(report.as_dict(), indent=1))
    return path


def read_record(folder: str | Path, lab: str) -> Report | None:
    path = record_path(folder, lab)
    if not path.is_file():
        return None
    return Report.from_dict(json.loads(path.read_text()))


_GRADED: dict[tuple, Report] = {}


def report(folder: str | Path, lab: str) -> Report:
    """The report of the code lab `lab` for the files in `folder`: the grader's record when the
    grader made one (it must name these very files), else graded now (once per process and
    set of files). In the grader's check (inside the sandbox, where nothing can be built) a
    missing record is an error that says so."""
    folder = Path(folder)
    rec = read_record(folder, lab)
    if rec is not None:
        # the record names the files it graded: checked without the lesson registry (a check
        # of test cells should not import every lesson)
        mine = {n: sha256(folder / n) if (folder / n).is_file() else None for n in rec.sources}
        if rec.lab != lab or mine != rec.sources:
            raise AssertionError(f"the grader's report of {lab} is for other sources than your "
                                 f"{', '.join(rec.sources)} (SHA-256 differ): it does not count")
        return rec
    code = code_lab(lab)
    files = _student_files(code, folder)
    sources = {n: sha256_text(t) for n, t in files.items()}
    if os.environ.get("HPCLAB_IN_SANDBOX"):
        raise AssertionError(f"{', '.join(code.files)} was not built by the grader (no {RECORD_DIR}/{lab}.json): "
                             "code labs are autograded with `hpclab grade autograde`, which builds them first")
    key = (lab, str(folder.resolve()), tuple(sorted(sources.items())))
    if key not in _GRADED:
        _GRADED[key] = grade(lab, folder, files=files)
    return _GRADED[key]


def verdict(folder: str | Path, lab: str, part: str) -> str:
    """A graded test cell's check of one part: raises AssertionError with every failed check's
    message (measured, expected, tolerance, why); returns the passed checks, one per line."""
    rep = report(folder, lab)
    checks = rep.part(part)
    if not checks:
        raise AssertionError(f"no check of part {part!r} in the report of {lab}")
    failed = [c for c in checks if not c.passed]
    if failed:
        raise AssertionError("\n" + "\n".join(messages(failed)))
    return "\n".join(messages(checks))


# --- trying it out (the notebook, the command line) ------------------------------------------------

def _not_built(log: str, b: model.Build, lib) -> HpclabError:
    """Why a build in the sandbox failed: the compiler's last lines, or the sandbox's own failure
    (bubblewrap refused a user namespace: a chroot, a kernel or AppArmor setting), which no
    change of the student's code fixes."""
    lines = log.strip().splitlines()
    refused = [line for line in lines if line.startswith(("bwrap:", "setpriv:"))]
    if refused:
        return HpclabError(f"the grader's sandbox could not start, so nothing was compiled: {refused[0]}",
                           "run where user namespaces are allowed (not inside a chroot; on Ubuntu, "
                           "sysctl kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)")
    return HpclabError(f"{', '.join(b.student)} does not compile with {lib.name}: " + " | ".join(lines[-4:]),
                       "fix the compiler's first error")


def try_run(lab: str, folder: str | Path = ".", np: int = 2, args: list[str] | tuple[str, ...] = (),
            library: str | None = None, hang_seconds: float | None = None, build: str = "student",
            files: dict[str, str] | None = None) -> Run:
    """Build the student's files in `folder` (or `files`) and run the program once, in the
    sandbox: `np` ranks, arguments `args`, under `library` (default: the system's). Returns
    the Run (each rank's output; for a hung run, the stacks); HpclabError when it does not build."""
    code = code_lab(lab)
    b = code.build(build)
    files = dict(files) if files is not None else _student_files(code, Path(folder))
    lib = libraries([library] if library else None)[0]
    trial = model.Trial(next(iter(code.parts)), "try", np, tuple(args), build=build)
    with Bench(code, lib, b, {n: files[n] for n in b.student}) as bench:
        if not bench.build():
            raise _not_built(bench.log, b, lib)
        return bench.run(trial, hang_seconds or code.hang_seconds)


def sweep(lab: str, values, args, np: int = 2, library: str | None = None, hang_seconds: float = 3.0,
          files: dict[str, str] | None = None, folder: str | Path = ".", build: str = "student",
          stop_at_hang: bool = True) -> list[dict]:
    """Run the lab's program once per value (args(value) gives its arguments), built once, in
    the sandbox, until the first run that hangs (or through all, stop_at_hang=False). Returns
    one row per run: value, library, completed (bool), hung (bool), seconds, and for a hung run
    where each rank was (the diagnosis)."""
    code = code_lab(lab)
    b = code.build(build)
    files = dict(files) if files is not None else _student_files(code, Path(folder))
    lib = libraries([library] if library else None)[0]
    rows = []
    with Bench(code, lib, b, {n: files[n] for n in b.student}) as bench:
        if not bench.build():
            raise _not_built(bench.log, b, lib)
        for value in values:
            trial = model.Trial(next(iter(code.parts)), f"value {value}", np, tuple(args(value)), build=build)
            run = bench.run(trial, hang_seconds)
            rows.append({"value": value, "library": lib.name, "completed": not run.hung and run.returncode == 0,
                         "hung": run.hung, "seconds": round(run.seconds, 3),
                         "where": diagnose(run.stacks, run.np, run.seconds) if run.hung else ""})
            if run.hung and stop_at_hang:
                break
    return rows


def own_runs(lab: str, builds: tuple[str, ...], args, rounds: int, folder: str | Path = ".",
             library: str | None = None, files: dict[str, str] | None = None, until=None,
             hang_seconds: float | None = None) -> dict:
    """A student's own timing runs of a code lab: each build in `builds` (names) run once per
    round with the same `args`, up to `rounds` rounds, in the sandbox under `library` (default:
    the system's); within a round the builds run in turn, the order reversed every other round
    (A B, B A: a slow drift of the machine weighs on both sides alike). until(record) -> bool,
    asked after each round, ends the runs early (an adaptive stopping rule); hang_seconds: a
    run's limit (default five times the lab's: a timing run is longer than a trial). Each run is kept
    with the SHA-256 of every source that built it (the student's files by name, the course's
    by path), so its numbers are refused for any other file (`check_own_runs`).

    Returns {"lab", "library", "args", "runs": [{"build", "round", "sources", "seconds",
    "report"}]}; HpclabError when a build fails, or a run fails or hangs (with why)."""
    code = code_lab(lab)
    files = dict(files) if files is not None else _student_files(code, Path(folder))
    runs: list[dict] = []
    doc = {"lab": lab, "library": None, "args": list(args), "runs": runs}
    for k in range(rounds):
        if k and until is not None and until(doc):
            break
        for name in (builds if k % 2 == 0 else tuple(reversed(builds))):
            b = code.build(name)
            run = try_run(lab, np=2, args=args, library=library, build=name, files=files,
                          hang_seconds=hang_seconds or 5 * code.hang_seconds)
            if run.hung or run.returncode != 0 or run.report is None:
                raise HpclabError(f"{lab}: the {name} program's run {k + 1} failed: " + describe(run)[-600:],
                                  "fix what the grader's checks say first, then measure again")
            sources = {n: sha256_text(files[n]) for n in b.student}
            sources.update({rel: sha256(course_source(rel)) for rel in b.course})
            runs.append({"build": name, "round": k, "sources": sources, "seconds": round(run.seconds, 3),
                         "report": run.report})
            doc["library"] = run.library
    return doc


def check_own_runs(doc: dict, folder: str | Path, files: tuple[str, ...], build: str = "student") -> None:
    """Raises AssertionError (a graded test's failure) unless every run in `doc` (own_runs'
    record) of the build `build` names each of the student's `files` among its sources, built
    from the very file in `folder` (its SHA-256)."""
    folder = Path(folder)
    runs = [r for r in doc.get("runs", []) if r.get("build") == build]
    if not runs:
        raise AssertionError(f"no run of your program ({build}) in the record: measure first")
    for run in runs:
        for name in files:
            mine = folder / name
            sha = (run.get("sources") or {}).get(name)
            if not mine.is_file() or sha is None or sha256(mine) != sha:
                raise AssertionError(f"run {int(run.get('round', 0)) + 1} of your program was measured with another "
                                     f"{name} than the one you submit (SHA-256 differ, or none kept): measure again "
                                     "with this file")


def describe(run: Run) -> str:
    """A run in words: each rank's output, or where each rank hung, or why it failed."""
    if run.hung:
        return diagnose(run.stacks, run.np, run.seconds)
    head = f"{run.library}, {run.np} ranks, {' '.join(run.args)}: exit code {run.returncode} after {run.seconds:.2f} s"
    body = "\n".join(f"rank {r}: {out.strip()}" + (f"\n  stderr: {err.strip()[-500:]}" if err.strip() else "")
                     for r, (out, err) in sorted(run.ranks.items()))
    why = "" if run.returncode == 0 else "\n" + failure(run, None)
    return f"{head}\n{body}{why}"


def starter_files(lab: str) -> dict[str, str]:
    """The student's files as released (the starter code), from the course's lab folder."""
    code = code_lab(lab)
    return {n: model.released(course_source(f"labs/{lab}/{n}").read_text()) for n in code.files}


# --- the nbgrader preprocessor ------------------------------------------------------------------------

def _preprocessor_class():
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import NbGraderPreprocessor   # enabled by default, as nbgrader's own
    from traitlets import List, Unicode

    class BuildAndRun(NbGraderPreprocessor):
        """Before a code lab's notebook runs (grader/nbgrader_config.py): build and run the
        submission's files in the sandbox and write the report into the submission as collected,
        where the graded test cells read it. A report already there (made by anyone) is removed
        first: only the one made now counts. Other labs pass through untouched."""

        libraries = List(Unicode(), default_value=[],
                         help="the MPI libraries to grade under (default: every installed one); a room "
                              "short of time may grade under the system's alone").tag(config=True)

        def preprocess(self, nb, resources):
            nbg = resources.get("nbgrader", {})
            lab = nbg.get("assignment")
            if not lab or lab not in lessons.code_labs():
                return nb, resources
            coursedir = CourseDirectory(config=self.config)
            folder = Path(coursedir.format_path(coursedir.submitted_directory, nbg.get("student", "."), lab)).resolve()
            path = record_path(folder, lab)
            if path.parent.is_symlink() or path.is_symlink():
                path.unlink() if path.is_symlink() else path.parent.unlink()
            elif path.parent.exists():
                shutil.rmtree(path.parent)
            try:
                rep = grade(lab, folder, list(self.libraries) or None)
            except HpclabError as exc:
                self.log.warning("code lab %s of %s not graded: %s", lab, nbg.get("student"), exc.one_line())
                return nb, resources
            write_record(folder, rep)
            self.log.info("code lab %s of %s: %d of %d checks passed in %.1f s", lab, nbg.get("student"),
                          sum(c.passed for c in rep.checks), len(rep.checks), rep.seconds)
            return nb, resources

    return BuildAndRun


def __getattr__(name):
    # nbgrader imports the preprocessor by name; nbconvert and nbgrader only then
    if name == "BuildAndRun":
        cls = _preprocessor_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


# --- the command line ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m hpclab.grading.codelab", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grade", help="build, run and check a code lab's files; print the feedback")
    g.add_argument("lab")
    g.add_argument("folder", nargs="?", default=".")
    g.add_argument("--library", action="append", help="only this MPI library (repeatable)")
    g.add_argument("--json", help="also write the report to this file")
    r = sub.add_parser("run", help="build the lab's files and run the program once; print each rank's output")
    r.add_argument("lab")
    r.add_argument("--folder", default=".")
    r.add_argument("--np", type=int, default=2)
    r.add_argument("--library")
    r.add_argument("--hang", type=float, help="seconds before the run counts as hung")
    r.add_argument("--build", default="student")
    r.add_argument("args", nargs="*")
    # the program's arguments after "--" (they start with "--" themselves): argparse's
    # subcommands refuse them, so they are split off first
    argv = list(sys.argv[1:] if argv is None else argv)
    program = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    a = p.parse_args(argv)
    if a.cmd == "run":
        a.args = [*a.args, *program]
    try:
        if a.cmd == "grade":
            rep = grade(a.lab, a.folder, a.library)
            if a.json:
                Path(a.json).write_text(json.dumps(rep.as_dict(), indent=1))
            for part, words in code_lab(a.lab).parts.items():
                print(f"[{'pass' if rep.passed(part) else 'FAIL'}] {words}")
                print("  " + rep.feedback(part).replace("\n", "\n  "))
            print(f"graded in {rep.seconds:.1f} s under {', '.join(rep.libraries)}")
            return 0 if rep.passed() else 1
        run = try_run(a.lab, a.folder, a.np, a.args, a.library, a.hang, a.build)
        print(describe(run))
        return 0 if run.returncode == 0 and not run.hung else 1
    except HpclabError as exc:
        print(f"hpclab: {exc.one_line()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
