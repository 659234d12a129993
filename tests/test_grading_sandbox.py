"""The grading sandbox (hpclab.grading.sandbox) and the check of answers outside the kernel
(hpclab.grading.answers), measured on this machine: who the sandboxed process is as seen from outside,
what it can reach, its limits, the unprivileged mode, the refusal without a sandbox, and the
check that a patched kernel cannot sway. No Slurm job is involved."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclab.course import lessons
from hpclab.grading import answers, pipeline, sandbox
from hpclab.core.errors import HpclabError
from hpclab.core import paths

root_only = pytest.mark.skipif(os.geteuid() != 0 or sandbox.mode() != "root",
                               reason="the dedicated user's sandbox is made by root")


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


@root_only
def test_sandboxed_process_is_the_grader_user_seen_from_outside(tmp_path):
    """Seen from outside (/proc/<pid>/status), is the sandboxed command the dedicated user, with
    no capability, no new privileges, in PID, network and user namespaces of its own?"""
    uid, gid = sandbox.ensure_grader_user()
    assert uid != 0 and gid != 0
    with sandbox.Sandbox(sandbox.Limits(), workdir=tmp_path) as box:
        proc = box.popen(["sleep", "30"])
        try:
            for _ in range(100):
                sleepers = [p for p in _descendants(proc.pid)
                            if Path(f"/proc/{p}/comm").read_text().strip() == "sleep"]
                if sleepers:
                    break
                time.sleep(0.05)
            pid = sleepers[0]
            status = dict(line.split(":\t", 1) for line in
                          Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
            assert status["Uid"].split() == [str(uid)] * 4
            assert status["Gid"].split() == [str(gid)] * 4
            assert status["Groups"].strip() in ("", str(gid))
            assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == 0
            assert status["NoNewPrivs"].strip() == "1"
            for ns in ("pid", "net", "user", "ipc", "uts", "mnt"):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
        finally:
            proc.kill()
            proc.wait()


@root_only
def test_sandbox_reaches_nothing_outside(tmp_path):
    """Inside, does a process fail to signal a root process outside, to connect to the cluster's
    ports, to read /etc/shadow, Slurm's and munge's files or the folder next to its own, and to
    write anywhere but its scratch and its copy (which leaves the original unchanged)?"""
    sleeper = subprocess.Popen(["sleep", "60"])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "data.txt").write_text("mine")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "secret.txt").write_text("theirs")
    from hpclab.core import paths
    script = f"""
import os, signal, socket, json
res = {{}}
try:
    os.kill({sleeper.pid}, signal.SIGTERM); res["kill"] = "sent"
except OSError as e:
    res["kill"] = e.strerror
res["connect"] = []
for port in (6917, 6918, 6919, 13306):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close(); res["connect"].append("connected")
    except OSError as e:
        res["connect"].append(e.strerror)
res["read"] = []
for path in ("/etc/shadow", "/etc/slurm/slurm.conf", "{paths.state_dir()}/etc/slurm.conf",
             "{paths.daemon_state_dir()}/munge/munge.key", "{tmp_path}/other/secret.txt",
             "{paths.repo()}/labs/lab-transports/lab-transports.ipynb"):
    try:
        open(path, "rb").read(1); res["read"].append(path)
    except OSError:
        pass
res["write"] = []
for path in ("{tmp_path}/other/x", "{tmp_path}/x", "{sys.prefix}/x.pth", "/etc/x", "/var/tmp/x"):
    try:
        open(path, "w").write("x"); res["write"].append(path)
    except OSError:
        pass
open("/tmp/scratch.txt", "w").write("ok")
open("data.txt", "a").write(" and more")
res["own"] = open("data.txt").read()
print(json.dumps(res))
"""
    try:
        with sandbox.Sandbox(sandbox.Limits(), workdir=tmp_path / "mine") as box:
            out = box.run([sys.executable, "-I", "-c", script], timeout=60)
        assert out.returncode == 0, out.stderr
        res = json.loads(out.stdout)
        assert res["kill"] in ("No such process", "Operation not permitted")
        assert sleeper.poll() is None                       # still alive
        assert res["connect"] == ["Connection refused"] * 4  # a loopback of its own, nobody listens
        assert res["read"] == [] and res["write"] == []
        assert res["own"] == "mine and more"                 # its copy is writable ...
        assert (tmp_path / "mine" / "data.txt").read_text() == "mine"   # ... the original is not
        assert sorted(p.name for p in tmp_path.rglob("*")) == ["data.txt", "mine", "other", "secret.txt"]
    finally:
        sleeper.kill()
        sleeper.wait()


@root_only
def test_limits_stop_memory_processes_files_and_time(tmp_path):
    """Do the limits hold: memory (cgroup or address space), processes, file size, open files,
    and the wall-clock bound?"""
    limits = sandbox.Limits(memory_mb=256, processes=32, file_size_mb=1, open_files=64,
                            wall_seconds=3)
    script = """
import os, json
res = {}
try:
    b = bytearray(512 << 20); b[::4096] = b"1" * len(range(0, 512 << 20, 4096)); res["mem"] = "got"
except MemoryError:
    res["mem"] = "MemoryError"
n = 0
kids = []
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            import time; time.sleep(1); os._exit(0)
        kids.append(pid)
except OSError:
    pass
for k in kids:
    os.waitpid(k, 0)
res["forks"] = len(kids)
try:
    open("/tmp/big", "wb").write(b"x" * (2 << 20)); res["fsize"] = "written"
except OSError as e:
    res["fsize"] = e.strerror
fds = []
try:
    for _ in range(100):
        fds.append(open("/dev/null"))
except OSError:
    pass
res["files"] = len(fds)
print(json.dumps(res), flush=True)
"""
    with sandbox.Sandbox(limits) as box:
        out = box.run([sys.executable, "-I", "-c", script], timeout=60)
        group = box.group
    res = json.loads(out.stdout.splitlines()[0]) if out.stdout.strip() else None
    if group is not None:        # cgroup: the kernel's OOM killer ends the process
        assert res is None or res["mem"] == "MemoryError", out
    else:
        assert res["mem"] == "MemoryError"
    if res is not None:
        assert res["forks"] < 32 and res["fsize"] == "File too large" and res["files"] < 64
    # without the memory bomb, to see the other limits when the cgroup killed the first run
    with sandbox.Sandbox(limits) as box:
        out = box.run([sys.executable, "-I", "-c", script.replace("512 << 20", "1 << 20")], timeout=60)
    res = json.loads(out.stdout)
    assert res["forks"] < 32 and res["fsize"] == "File too large" and res["files"] < 64
    # the wall-clock bound
    t0 = time.monotonic()
    with sandbox.Sandbox(limits) as box:
        out = box.run(["sleep", "30"])
    assert out.returncode == -signal.SIGKILL and time.monotonic() - t0 < 15
    assert "wall-clock" in out.stderr


@root_only
def test_memory_cgroup_is_made_and_removed():
    """As root with a memory controller, is the sandbox's cgroup made with the memory bound and
    removed afterwards?"""
    limits = sandbox.Limits(memory_mb=300)
    with sandbox.Sandbox(limits) as box:
        group = box.group
        if group is None:
            pytest.skip("no writable memory cgroup on this machine (RLIMIT_AS stands in)")
        limit_file = group / ("memory.max" if (group / "memory.max").exists() else "memory.limit_in_bytes")
        assert int(limit_file.read_text()) == 300 << 20
        proc = box.popen(["sleep", "30"])
        try:
            for _ in range(100):
                inside = set(_descendants(proc.pid))
                if any(Path(f"/proc/{p}/comm").read_text().strip() == "sleep" for p in inside):
                    break
                time.sleep(0.05)
            members = {int(p) for p in (group / "cgroup.procs").read_text().split()}
            assert inside and inside <= members      # every process of the sandbox is in it
        finally:
            proc.kill()
            proc.wait()
    assert not group.exists()


@root_only
def test_grader_user_is_made_once():
    """Is the dedicated user a system user without login shell or home, made idempotently?"""
    import pwd

    first, second = sandbox.ensure_grader_user(), sandbox.ensure_grader_user()
    assert first == second
    pw = pwd.getpwnam(sandbox.GRADER_USER)
    assert pw.pw_shell.endswith("nologin") and pw.pw_dir == "/nonexistent" and pw.pw_uid < 1000


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to an unprivileged user with setpriv")
def test_unprivileged_mode_works_as_a_plain_user():
    """Run by an unprivileged user (nobody, via setpriv), does bubblewrap's user-namespace mode
    give the command no network, its own PID namespace, its own uid mapped, and nothing of the
    host's files but the binds?"""
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="hpclab-test-"))   # nobody reaches it
    scratch.chmod(0o755)
    os.chown(scratch, 65534, 65534)
    try:
        _unprivileged(scratch)
    finally:
        shutil.rmtree(scratch)


def _unprivileged(scratch):
    argv = sandbox.bwrap_argv(["/bin/sh", "-c", "id -u; cat /proc/self/uid_map; ls /; "
                               "cat /etc/shadow 2>&1; cat /sys/class/net/*/operstate 2>/dev/null | wc -l; echo $$"],
                              scratch, [], "/tmp", sandbox.Limits(), None, roots=[])
    # as a plain user the identity files are the user's, written where it can
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    probe = subprocess.run([*drop, "bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unprivileged user namespaces are not allowed here: {probe.stderr.decode().strip()}")
    out = subprocess.run([*drop, *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == "65534"
    # one uid mapped (bwrap maps it through an intermediate namespace where the user is 0)
    inside, outside, count = lines[1].split()
    assert inside == "65534" and outside in ("0", "65534") and count == "1"
    assert "work" not in lines and "root" not in lines and "var" not in lines
    assert "No such file" in out.stdout
    assert lines[-2] in ("1", "2")          # pid 1 or 2: a PID namespace of its own


def test_autograde_refuses_without_a_sandbox(tmp_path, monkeypatch):
    """Where no sandbox can be made, does autograde refuse untrusted submissions with one line
    that says why and what to do, before running anything?"""
    course = pipeline.init_course(tmp_path / "course", ["lab-transports"])
    monkeypatch.setattr(sandbox, "mode", lambda: None)
    monkeypatch.setattr(sandbox, "why_not", lambda: "no user namespaces here")
    with pytest.raises(HpclabError, match="refusing to autograde untrusted notebooks without a sandbox: "
                                          "no user namespaces here") as err:
        pipeline.autograde(course, "lab-transports")
    assert "--unconfined" in err.value.hint
    assert not (course / "logs").exists()      # nbgrader never ran


def test_old_course_config_is_refused(tmp_path):
    """Does a course whose nbgrader_config.py predates the sandbox get a clear error?"""
    course = pipeline.init_course(tmp_path / "course", ["lab-transports"])
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    with pytest.raises(HpclabError, match=f"does not run cells through {re.escape(pipeline.SANDBOX_EXECUTE)}"):
        pipeline.autograde(course, "lab-transports")


def test_the_config_names_the_preprocessor_nbgrader_can_import():
    """Does the dotted path the course's nbgrader_config.py must name lead nbgrader (traitlets'
    import_item) to a subclass of its Execute, and does grader/nbgrader_config.py name it?"""
    from nbgrader.preprocessors import Execute
    from traitlets.utils.importstring import import_item

    assert issubclass(import_item(pipeline.SANDBOX_EXECUTE), Execute)
    assert f'"{pipeline.SANDBOX_EXECUTE}"' in (pipeline._grader_dir() / "nbgrader_config.py").read_text()


def test_a_kernel_imports_the_answers_without_nbgrader():
    """Does importing hpclab.grading.answers, as every probe in a student's kernel and the
    grader's check do, leave nbgrader, nbconvert and nbclient unimported (seconds saved)?"""
    code = ("import sys, hpclab.grading.answers\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'nbgrader', 'nbconvert', 'nbclient'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_why_not_names_the_fix(monkeypatch):
    """Does the refusal name bubblewrap when it is missing?"""
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert sandbox.mode() is None
    assert "bubblewrap" in sandbox.why_not()


# --- answers: read from the kernel, checked outside ---------------------------------------------

def test_free_names_are_the_answers_a_test_reads():
    """Are a test cell's answers the names it reads and never binds (builtins and LAB aside)?"""
    src = ('"""doc"""\nassert set(latency_us) == {"shm"}\nfrom hpclab.grading import references\n'
           'ref = references.reference("lab-transports", LAB)\nfor role in ("shm",):\n'
           '    assert abs(latency_us[role] - ref["latency_us"][role]) <= 0.02 * x[role]\n')
    assert answers.free_names(src) == ["latency_us", "x"]


def test_only_plain_values_leave_the_kernel():
    """Are numbers, strings, lists and dicts passed on, numpy scalars as numbers, and objects
    that could compare equal to anything (str subclasses, custom classes) refused?"""
    import numpy as np

    class Anything(str):
        def __eq__(self, other):
            return True
        __hash__ = str.__hash__

    assert answers._plain({"a": np.float64(1.5), "b": [1, (2, "x")], 3: True}) == \
        {"a": 1.5, "b": [1, [2, "x"]], "3": True}
    for bad in (Anything("tcp"), object(), {"k": Anything("v")}, np.arange(3)):
        with pytest.raises(TypeError):
            answers._plain(bad)


def test_a_record_is_read_only_when_there_is_exactly_one(capsys):
    """Is a probe's record read when it is the only one, and refused when repeated or malformed?"""
    answers.emit(["x", "y", "z"], {"x": 1.0, "z": object()})
    text = capsys.readouterr().out
    rec = answers.read_record([{"output_type": "stream", "name": "stdout", "text": text}])
    assert rec["values"] == {"x": 1.0}
    assert rec["skipped"]["y"] == "not defined in your notebook" and "plain" in rec["skipped"]["z"]
    twice = answers.read_record([{"output_type": "stream", "name": "stdout", "text": text + text}])
    assert twice["values"] == {} and "no answers" in twice["problem"]
    bad = answers.read_record([{"output_type": "stream", "name": "stdout", "text": answers.MARK + "{nope\n"}])
    assert bad["values"] == {} and "malformed" in bad["problem"]


def test_check_decides_on_the_answers_alone(tmp_path):
    """Run by the grader in a fresh process, does a test pass on right answers, fail on wrong or
    missing ones with the reason, whatever the kernel had patched (nothing of it comes along)?"""
    src = ('"""Is x within 2 % of 10?"""\nimport math\n'
           'assert abs(x - 10) <= 0.2 and not math.isclose(x, 11), "x is off"\n')
    cells = [{"id": "right", "source": src, "values": {"x": 10.1}, "skipped": {}},
             {"id": "wrong", "source": src, "values": {"x": 0.0}, "skipped": {}},
             {"id": "absent", "source": src, "values": {}, "skipped": {"x": "not a plain value (a Foo)"}}]
    results = {r["id"]: r for r in answers.check(cells, tmp_path, sandbox.Limits(), unconfined=True)}
    assert results["right"]["passed"]
    assert not results["wrong"]["passed"] and results["wrong"]["evalue"] == "x is off"
    assert results["wrong"]["traceback"][0].startswith("Checked by the grader")
    assert not results["absent"]["passed"] and results["absent"]["ename"] == "NameError"
    assert "not a plain value" in results["absent"]["evalue"]


@root_only
def test_check_runs_sandboxed_on_a_read_only_copy(tmp_path):
    """Does the grader's check run as the dedicated user, on a read-only copy of the submission?"""
    (tmp_path / "answer.txt").write_text("42")
    src = ('import os\nassert os.getuid() == uid\nassert open("answer.txt").read() == "42"\n'
           'try:\n    open("answer.txt", "w")\n    writable = True\nexcept OSError:\n    writable = False\n'
           'assert not writable\n')
    uid, _ = sandbox.ensure_grader_user()
    res = answers.check([{"id": "t", "source": src, "values": {"uid": uid}, "skipped": {}}],
                        tmp_path, sandbox.Limits())
    assert res[0]["passed"], res


@pytest.mark.parametrize("lab", pipeline.LABS)
def test_every_test_cell_reads_only_answers_the_solution_defines(lab):
    """Since test cells run outside the kernel on the answers it reports, does each lab's test
    cell read only names its solution cells assign (no module or helper of the notebook's)?"""
    import ast

    import nbformat

    nb = nbformat.read(pipeline._labs_dir() / lab / f"{lab}.ipynb", as_version=4)
    assigned = set()
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    assigned.add(node.id)
    tests = [c for c in nb.cells if answers.test_cell(c)]
    assert tests
    code_lab = lab in lessons.code_labs()   # its C file's cells read the grader's report, no answer
    for cell in tests:
        names = answers.free_names(cell.source)
        assert (names or code_lab) and set(names) <= assigned, (cell.metadata["nbgrader"]["grade_id"], names)


@root_only
def test_kernel_nbgrader_talks_to_is_inside_and_bounded_in_time(tmp_path):
    """Started as nbgrader starts it, does the kernel answer over its Unix sockets, run code as
    the dedicated user in its folder's copy, and get stopped at the wall-clock bound, leaving no
    socket link behind?"""
    from jupyter_client import BlockingKernelClient
    from jupyter_client.connect import write_connection_file

    work = tmp_path / "submission"
    work.mkdir()
    (work / "answer.txt").write_text("42")
    conn, info = write_connection_file(str(tmp_path / "kernel.json"), transport="ipc",
                                       ip=str(tmp_path / "kernel-ipc"))
    env = dict(os.environ, **{sandbox.ENV: sandbox.Limits(wall_seconds=20).to_env()})
    t0 = time.monotonic()
    launcher = subprocess.Popen([sys.executable, "-m", "hpclab.grading", "kernel", conn], cwd=work,
                                env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    out = []
    try:
        kc = BlockingKernelClient(connection_file=conn)
        kc.load_connection_file()
        kc.start_channels()
        kc.wait_for_ready(timeout=30)
        # the socket folder is root's once the kernel is up: no socket can be swapped for a link
        reply = kc.execute_interactive("import os; print(os.getuid(), open('answer.txt').read(), "
                                       "os.getcwd() == %r, os.access('/kernel', os.W_OK))" % str(work),
                                       timeout=30, output_hook=out.append)
        kc.stop_channels()
    except Exception:
        launcher.kill()
        raise
    assert reply["content"]["status"] == "ok"
    uid, _ = sandbox.ensure_grader_user()
    text = "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream")
    assert text.split() == [str(uid), "42", "True", "False"]
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode != 0 and "wall-clock bound (20 s)" in err
    assert time.monotonic() - t0 < 50
    assert not list(tmp_path.glob("kernel-ipc-*"))



@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
                    reason="runs the system Python as nobody (setpriv)")
def test_sandbox_class_as_a_plain_user():
    """Run as an unprivileged user (nobody, the system Python with a readable copy of the
    package: this machine's venv lives under a 0700 /root), does the Sandbox take the user
    namespace mode: the user's own uid inside, no cgroup but an address-space bound, only the
    package bound, no /etc/shadow?"""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="hpclab-test-"))
    top.chmod(0o755)
    shutil.copytree(paths.package_dir(), top / "hpclab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for p in [top, *top.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    code = f"""
import json, sys
sys.path.insert(0, {str(top)!r})
from hpclab.grading import sandbox
with sandbox.Sandbox(sandbox.Limits(memory_mb=256)) as box:
    out = box.run(["/bin/sh", "-c", "id -u; ulimit -v; ls /; ls {top}; cat /etc/shadow 2>&1; true"])
print(json.dumps({{"mode": sandbox.mode(), "group": str(box.group), "ids": box.ids,
                  "rc": out.returncode, "out": out.stdout}}))
"""
    try:
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                               "env", "-i", "PATH=/usr/bin:/bin", "/usr/bin/python3", "-c", code],
                              capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        shutil.rmtree(top)
    if "unprivileged user namespaces" in proc.stderr or proc.returncode != 0 and "mode" not in proc.stdout:
        pytest.skip(f"no unprivileged sandbox here: {proc.stderr.strip()[-200:]}")
    res = json.loads(proc.stdout)
    assert res["mode"] == "userns" and res["group"] == "None" and res["ids"] is None
    lines = res["out"].splitlines()
    assert res["rc"] == 0 and lines[0] == "65534" and lines[1] == str(2 * 256 * 1024)
    assert "root" not in lines and "work" not in lines and "hpclab" in lines
    assert "No such file" in lines[-1]
