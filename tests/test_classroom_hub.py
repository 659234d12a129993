"""The room's JupyterHub, used as a student uses it: a password at the login form (real PAM), a
server that is theirs (their uid, their home, their course copy, their limits), and a hub whose
secrets and APIs stay out of their reach."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from hpclab.classroom import accounts, first_login, hub, hub_config, limits
from hpclab.classroom.hub_client import HubClient
from hpclab.classroom.layout import ClassroomLayout
from hpclab.core.errors import HpclabError


# --- without a hub -------------------------------------------------------------------------

def test_tls_needs_both_certificate_and_key(tmp_path):
    """Is a certificate without its key (or a key alone) refused with a clear error?"""
    cert = tmp_path / "hub.pem"
    cert.write_text("x")
    with pytest.raises(HpclabError, match="both --ssl-cert and --ssl-key"):
        hub.HubSettings(ssl_cert=cert).check()
    with pytest.raises(HpclabError, match="both --ssl-cert and --ssl-key"):
        hub.HubSettings(ssl_key=cert).check()
    with pytest.raises(HpclabError, match="does not exist"):
        hub.HubSettings(ssl_cert=cert, ssl_key=tmp_path / "missing.key").check()
    with pytest.raises(HpclabError, match="not an IP address"):
        hub.HubSettings(bind_ip="the-room").check()
    hub.HubSettings(ssl_cert=cert, ssl_key=cert).check()
    assert hub.HubSettings(ssl_cert=cert, ssl_key=cert).url().startswith("https://")


def test_rendered_config_keeps_apis_on_loopback_and_nobody_admin(tmp_path):
    """Does the config compile, bind both APIs to loopback, allow only the room's groups, make
    nobody an admin, give the culler only the scopes it needs, and let the instructors open the
    students' servers (the hub group of the students) and no one else's?"""
    lay = ClassroomLayout(tmp_path)
    text = hub_config.render(lay, hub.HubSettings(bind_ip="10.0.0.5", port=8443), slurm_conf="/etc/slurm.conf",
                             instructors=["instructor1"], services=[{"name": "formgrader", "url": "http://127.0.0.1:9999"}],
                             roles=[{"name": "formgrader-access", "scopes": ["access:services!service=formgrader"],
                                     "users": ["instructor1"]}], students=["student02", "student01"])
    assert "'access:servers!user=student01', 'access:servers!user=student02'" in text
    assert "'access:servers'" not in text and "access:servers!user=instructor1" not in text
    # the prestart service may start and stop the students' servers only; its token stays in its file
    assert "'servers!user=student01', 'servers!user=student02'" in text and "'hpclab-prestart'" in text
    assert "prestart_api_token')).read_text()" in text or "prestart_api_token').read_text()" in text
    compile(text, "jupyterhub_config.py", "exec")
    assert "c.JupyterHub.bind_url = 'http://10.0.0.5:8443/'" in text
    assert "c.JupyterHub.hub_ip = '127.0.0.1'" in text
    assert "c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:8001'" in text
    assert "c.PAMAuthenticator.allowed_groups = {'hpclab-students', 'hpclab-instructors'}" in text
    assert "c.PAMAuthenticator.admin_groups = set()" in text
    assert "['list:users', 'read:users:activity', 'read:servers', 'delete:servers']" in text
    assert "'formgrader'" in text and "formgrader-access" in text
    assert "auth_token = Path(" in text  # the token is read from its 0600 file, not written here
    # a server's stop ends within 10 + 5 s of signals, far inside the client's 60 s wait
    assert "interrupt_timeout = 10" in text and "term_timeout = 5" in text


def test_first_login_copies_what_is_missing_and_keeps_edits(tmp_path):
    """Does the course copy add new files, keep a student's edited one, and leave alone a path
    the student turned into a link?"""
    course, mine = tmp_path / "course", tmp_path / "home" / "hpclab"
    for rel in ("notebooks/01.ipynb", "notebooks/02.ipynb", "labs/lab-a/lab.ipynb", "labs/lab-b/lab.ipynb"):
        (course / rel).parent.mkdir(parents=True, exist_ok=True)
        (course / rel).write_text(f"course {rel}")
    mine.parent.mkdir()
    items = ("notebooks", "labs")  # two folders, as a course with more than notebooks would have
    assert len(first_login.copy_missing(course, mine, items)) == 4
    (mine / "notebooks/01.ipynb").write_text("my answer")
    (mine / "notebooks/02.ipynb").unlink()
    (tmp_path / "elsewhere").mkdir()
    shutil.rmtree(mine / "labs/lab-b")
    (mine / "labs/lab-b").symlink_to(tmp_path / "elsewhere")
    copied = first_login.copy_missing(course, mine, items)
    assert copied == [mine / "notebooks/02.ipynb"]
    assert (mine / "notebooks/01.ipynb").read_text() == "my answer"
    assert not list((tmp_path / "elsewhere").iterdir())
    assert (mine / "runs").is_dir()


# --- the room's hub, as its users --------------------------------------------------------------

def _passwords(lay) -> dict[str, str]:
    return dict(line.split() for line in lay.passwords.read_text().splitlines()
                if line.strip() and not line.startswith("#"))


@pytest.fixture(scope="module")
def room(classroom):
    """The classroom's hub (started if it is not running) and its URL."""
    from hpclab.classroom import record

    url = hub.start(classroom, record.load(classroom.record), hub.HubSettings())
    return classroom, url


def _client(room, user: str) -> HubClient:
    lay, url = room
    c = HubClient(url, user, _passwords(lay)[user])
    c.login()
    return c


def _server_pids(user: str) -> list[int]:
    cg = limits.cgroup(user)
    return cg.pids() if cg is not None else []


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(pid)


@pytest.mark.cluster
@pytest.mark.classroom
def test_wrong_password_and_foreign_accounts_are_refused(room):
    """Does the login form refuse a wrong password, and an account outside the room's groups?"""
    lay, url = room
    with pytest.raises(HpclabError, match="refused"):
        HubClient(url, "student01", "not-the-password").login()
    with pytest.raises(HpclabError, match="refused"):
        HubClient(url, "root", "whatever").login()


@pytest.mark.cluster
@pytest.mark.classroom
def test_a_student_server_runs_as_the_student_in_their_home(room):
    """Does a student who logs in with their password get a server running as their uid, with
    HPCLAB_RUNS and HPCLAB_OUTPUT in their home, the course notebooks in their copy, and a kernel that runs code as
    them? Is it counted by status and gone, with its cgroup, when stopped?"""
    lay, _ = room
    user, uid, home = "student01", accounts.uid("student01"), accounts.home("student01")
    c = _client(room, user)
    seconds = c.start_server()
    try:
        print(f"server of {user} ready in {seconds:.2f} s")
        pids = _server_pids(user)
        if limits.mode() != "none":
            assert pids and all(_uid_of(p) == uid for p in pids)
        names = {item["name"] for item in c.contents()["content"]}
        assert {"notebooks", "runs"} <= names
        assert "labs" not in names, "the labs' sources hold solutions: students get them from the Assignments tab"
        course_notebooks = {p.name for p in (lay.course / "notebooks").glob("*.ipynb")}
        assert course_notebooks and course_notebooks <= {p.name for p in (home / "hpclab/notebooks").iterdir()}
        assert all(p.stat().st_uid == uid for p in (home / "hpclab/notebooks").iterdir())
        run = c.execute("import os; print(os.getuid(), os.environ['HPCLAB_RUNS'], os.environ['SLURM_CONF'], "
                        "os.environ['HPCLAB_OUTPUT'])")
        got_uid, runs, slurm_conf, output = run.stdout.split()
        assert int(got_uid) == uid
        assert runs == str(ClassroomLayout.student_runs(home)) and Path(runs).is_dir()
        assert output == str(ClassroomLayout.student_output(home))   # the course copy's build/ is not theirs
        assert Path(slurm_conf).is_file()
        assert hub.running_servers(lay) >= 1
        assert f"{hub.running_servers(lay)} servers running" in hub.status(lay)[0]
    finally:
        c.stop_server()
    assert limits.cgroup(user) is None or not any(d.exists() for d in limits.cgroup(user).dirs)
    assert not _server_pids(user)


@pytest.mark.cluster
@pytest.mark.classroom
def test_a_second_start_keeps_the_students_edit(room):
    """Does a notebook the student edited survive the next server start (the course copy never
    overwrites), while a notebook they deleted comes back?"""
    lay, _ = room
    user = "student02"
    c = _client(room, user)
    c.start_server()
    notebooks = sorted(item["name"] for item in c.contents("notebooks")["content"] if item["name"].endswith(".ipynb"))
    edited, deleted = notebooks[0], notebooks[1]
    c.save_text(f"notebooks/{edited}", "my own notes")
    assert c.api("DELETE", f"api/contents/notebooks/{deleted}").status_code == 204
    c.stop_server()
    c.start_server()
    try:
        assert c.api("GET", f"api/contents/notebooks/{edited}?type=file&format=text").json()["content"] == "my own notes"
        assert (accounts.home(user) / "hpclab/notebooks" / deleted).is_file()
    finally:
        c.stop_server()


@pytest.mark.cluster
@pytest.mark.classroom
def test_a_kernel_over_the_memory_limit_is_killed_and_the_server_survives(room):
    """Does a kernel that allocates more than its server's memory limit get killed by the
    kernel's OOM killer inside the server's cgroup, leaving the server usable?"""
    if limits.mode() == "none":
        pytest.skip("no writable cgroup hierarchy here: " + limits.describe())
    user = "student03"
    c = _client(room, user)
    c.start_server()
    try:
        cg = limits.cgroup(user)
        limit = cg.memory_limit()
        assert limit == int(hub.HubSettings().mem_limit_gb * (1 << 30))
        before = cg.oom_kills()
        over = c.execute(f"b = bytearray({limit + (512 << 20)}); print('survived')", timeout=90)
        assert over.kernel_died and "survived" not in over.stdout
        assert cg.oom_kills() > before
        assert c.execute("print(6 * 7)").stdout.strip() == "42"
    finally:
        c.stop_server()


@pytest.mark.cluster
@pytest.mark.classroom
def test_hub_secrets_are_root_only_and_unreadable_by_a_student(room):
    """Are the hub's folder (0700), database, cookie secret, proxy token and config (0600)
    root's, and does reading them as a student fail?"""
    lay, _ = room
    f = hub.files(lay)
    assert f.folder.stat().st_uid == 0 and f.folder.stat().st_mode & 0o777 == 0o700
    for path in (f.db, f.cookie_secret, f.proxy_token, f.prestart_token, f.config):
        st = path.stat()
        assert st.st_uid == 0 and st.st_mode & 0o777 == 0o600, (path, oct(st.st_mode))
        r = subprocess.run([*accounts.as_user("student01"), "cat", str(path)], capture_output=True, text=True, cwd="/")
        assert r.returncode != 0 and "Permission denied" in r.stderr and not r.stdout, path


def _listening(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on `port` (IPv4 and IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                found.add(addr)
    return found


@pytest.mark.cluster
@pytest.mark.classroom
def test_hub_and_proxy_apis_listen_on_loopback_only(room):
    """Do the hub's API (8081) and the proxy's API (8001) listen on 127.0.0.1 and nowhere else?"""
    loopback = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
    for port in (hub_config.HUB_API_PORT, hub_config.PROXY_API_PORT):
        assert _listening(port) == {loopback}, port


@pytest.mark.cluster
@pytest.mark.classroom
def test_start_is_idempotent_and_the_culler_runs(room):
    """Does a second start leave the running hub alone, and does the idle culler run as its
    service with the configured timeout?"""
    from hpclab.classroom import record

    lay, url = room
    pid = hub.running_pid(lay)
    assert hub.start(lay, record.load(lay.record), hub.HubSettings()) == url
    assert hub.running_pid(lay) == pid
    culler = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).startswith(
        f"{lay.python} -m jupyterhub_idle_culler")]
    assert culler and f"--timeout={hub.HubSettings().idle_timeout_s}" in _cmdline(culler[0])


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _server_jobs(user: str) -> list[list[str]]:
    from hpclab.cluster import local
    from hpclab.core import commands

    r = commands.run(["squeue", "-h", "-u", user, "-p", hub.SERVER_PARTITION, "-o", "%i %u %P %q %T"],
                     "list the server jobs", env={**os.environ, **local.slurm_env()}, timeout=20)
    return [line.split() for line in r.stdout.splitlines()] if r is not None else []


def _processes_of(user: str) -> list[int]:
    uid = accounts.uid(user)
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _uid_or_none(int(p.name)) == uid]


def _uid_or_none(pid: int) -> int | None:
    try:
        return _uid_of(pid)
    except (OSError, AssertionError):
        return None


@pytest.mark.cluster
@pytest.mark.classroom
@pytest.mark.slow
def test_stop_takes_every_server_and_the_slurm_spawner_runs_servers_as_jobs(room):
    """Does stopping the hub stop a running local server with its cgroup? With --spawner slurm,
    is a student's server a Slurm job of theirs (servers partition, server QOS) whose kernel runs
    as them inside the job, and does stopping the hub cancel that job?"""
    from hpclab.classroom import record

    lay, url = room
    rec = record.load(lay.record)
    user = "student01"
    try:
        c = _client(room, user)
        c.start_server()
        server = set(_server_pids(user)) if limits.mode() != "none" else set(_processes_of(user))
        assert server
        # `up` with other settings restarts the hub: the local server goes, with its cgroup
        assert hub.start(lay, rec, hub.HubSettings(spawner="slurm")) == url
        assert not server & set(_processes_of(user))
        assert limits.cgroup(user) is None or not any(d.exists() for d in limits.cgroup(user).dirs)

        c = _client(room, user)
        seconds = c.start_server(timeout=150)
        print(f"server of {user} as a Slurm job ready in {seconds:.2f} s")
        jobs = _server_jobs(user)
        assert len(jobs) == 1 and jobs[0][1:] == [user, hub.SERVER_PARTITION, hub.SERVER_QOS, "RUNNING"], jobs
        out = c.execute("import os; print(os.getuid(), os.environ.get('SLURM_JOB_ID'))").stdout.split()
        assert out == [str(accounts.uid(user)), jobs[0][0]]
        assert "1 servers running" in hub.status(lay)[0]
        assert hub.stop(lay, rec)
        assert hub.running_pid(lay) is None
        # cancelled: the job leaves the queue once its processes are gone (COMPLETING until then,
        # which on a loaded machine outlasts stop's return)
        deadline = time.monotonic() + 90
        while _server_jobs(user) and time.monotonic() < deadline:
            time.sleep(1)
        assert not _server_jobs(user)
        assert _listening(hub_config.PROXY_API_PORT) == set() and _listening(hub_config.HUB_API_PORT) == set()
    finally:
        hub.start(lay, rec, hub.HubSettings())  # the room's default again


def _ignored_signals(pid: int) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("SigIgn:"))
    return int(line.split()[1], 16)


@pytest.mark.cluster
@pytest.mark.classroom
def test_a_hub_started_with_sigint_ignored_still_stops_its_services_with_sigint(room):
    """Started from a shell's background job (SIGINT ignored, as under nohup or a CI runner), do
    the hub's services still take SIGINT, so that the hub's stop ends with its own clean-up of
    the services and servers rather than with hpclab's SIGKILL after a 30 s wait for each one?"""
    import signal

    from hpclab.classroom import record

    lay, _ = room
    rec = record.load(lay.record)
    earlier = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        hub.start(lay, rec, hub.HubSettings(idle_timeout_s=7200))  # other settings: a new hub
    finally:
        signal.signal(signal.SIGINT, earlier)
    try:
        services = _room_service_pids()
        assert services, "the hub runs no service (the formgrader, the idle culler)"
        assert all(not _ignored_signals(p) & (1 << (signal.SIGINT - 1)) for p in services)
        log = hub.files(lay).log
        before = log.stat().st_size
        assert hub.stop(lay, rec)
        with open(log) as fh:
            fh.seek(before)
            stopped = fh.read()
        # JupyterHub reached the servers' clean-up, which comes after the services'
        assert "single-user servers" in stopped, stopped[-2000:]
    finally:
        hub.start(lay, rec, hub.HubSettings())  # the room's default again


def _room_service_pids() -> list[int]:
    """The processes of the running hub's services (JUPYTERHUB_SERVICE_NAME in their environment)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"JUPYTERHUB_SERVICE_NAME=" in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.cluster
@pytest.mark.classroom
def test_a_student_reaches_neither_another_students_server_nor_the_proxy_api(room):
    """With their own login, can another student not open a student's server, while an instructor
    can (to help someone stuck: the instructors' role has access to each student's server)?
    Does the proxy's API (reachable on loopback from the student's own processes) refuse them
    without its token, which their server's environment does not hold?"""
    owner, other = _client(room, "student01"), _client(room, "student02")
    owner.start_server()
    try:
        r = other._request("GET", owner.server_url() + "api/contents", headers=other._auth(), allow_redirects=False)
        assert r.status_code in (302, 403), r.status_code
        instructor = _client(room, "instructor1")
        r = instructor._request("GET", owner.server_url() + "api/contents", headers=instructor._auth(),
                                allow_redirects=False)
        assert r.status_code == 200 and r.json()["type"] == "directory", r.status_code
        assert owner.contents()["type"] == "directory"
        listing = instructor._hub("GET", "users")
        assert listing.status_code == 200 and "student01" in {u["name"] for u in listing.json()}
        assert other._hub("GET", "users").status_code == 403  # a student does not list the room
        env = owner.execute("import os; print(sorted(os.environ))").stdout
        assert "CONFIGPROXY_AUTH_TOKEN" not in env and "JUPYTERHUB_CRYPT_KEY" not in env
        probe = subprocess.run([*accounts.as_user("student01"), "python3", "-c",
                                "import urllib.request as u, urllib.error as e\n"
                                "try: print(u.urlopen('http://127.0.0.1:8001/api/routes').status)\n"
                                "except e.HTTPError as x: print(x.code)"],
                               capture_output=True, text=True, timeout=30, cwd="/")
        assert probe.stdout.strip() == "403", probe
    finally:
        owner.stop_server()


@pytest.mark.cluster
@pytest.mark.classroom
def test_prestarted_servers_are_ready_when_their_students_log_in(room):
    """Does `classroom prestart` start the students' servers (as the students, spread over the
    time asked), so that a student who then logs in finds a server that answers at once, and
    does a second prestart leave running servers alone? The time from login to an answering
    server, with and without prestart, is printed for the record."""
    from hpclab.classroom import room as room_mod

    lay, _ = room
    cold = _client(room, "student03")
    t0 = time.monotonic()
    cold_s = cold.start_server()
    cold.stop_server()
    users = ["student01", "student02", "student03"]
    try:
        report = room_mod.prestart(over_s=2.0, lay=lay, students=users)
        assert report.head.startswith("prestart: 3 of 3"), report.render()
        assert all(what.startswith("ready") for _, what in report.per_student), report.render()
        for user in users:
            assert {_uid_of(pid) for pid in _server_pids(user)} == {accounts.uid(user)}
        again = room_mod.prestart(over_s=0.0, lay=lay, students=users)
        assert all(what == "was running already" for _, what in again.per_student), again.render()
        t1 = time.monotonic()
        warm = _client(room, "student03")
        warm_s = warm.start_server()
        login_s = time.monotonic() - t1
        print(f"login to an answering server: {cold_s:.1f} s cold (one start alone), {login_s:.2f} s prestarted "
              f"({warm_s:.2f} s of it waiting for the server); {time.monotonic() - t0:.0f} s in all")
        assert warm_s < cold_s
    finally:
        for user in users:
            _client(room, user).stop_server()


@pytest.mark.cluster
@pytest.mark.classroom
def test_a_hub_killed_mid_session_comes_back_with_the_students_kernels(room):
    """kill -9 the hub while a student's kernel holds a variable: does the server keep running, does
    `up` start a new hub that finds it (the kernel still answers with the variable), and are the
    killed hub's services (culler, formgrader) replaced, not doubled?"""
    from hpclab.classroom import record
    from hpclab.classroom import room as room_mod

    lay, _ = room
    student = _client(room, "student02")
    student.start_server()
    kernel = student.start_kernel()
    try:
        assert student.execute("x = 41", kernel_id=kernel).status == "ok"
        server = sorted(_server_pids("student02"))
        pid = hub.running_pid(lay)
        os.kill(pid, 9)
        deadline = time.monotonic() + 10
        while hub.running_pid(lay) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        left = hub.orphaned_services()
        assert left, "the killed hub's services should outlive it (JupyterHub starts them in sessions of their own)"
        assert set(server) <= set(_server_pids("student02")), "the student's server died with the hub"
        room_mod.up(students=record.load(lay.record).settings["students"], instructors=1)
        assert hub.running_pid(lay) not in (None, pid)
        assert not hub.orphaned_services() and not any(Path(f"/proc/{p}").exists() for p in left)
        again = _client(room, "student02")
        assert again.server_ready(), "the new hub did not find the running server"
        done = again.execute("x + 1", kernel_id=kernel)
        assert (done.status, done.result) == ("ok", "42"), done
        cullers = subprocess.run(["pgrep", "-f", "jupyterhub_idle_culler"], capture_output=True, text=True).stdout.split()
        assert len(cullers) == 1, cullers
    finally:
        _client(room, "student02").delete_kernel(kernel)
