"""The room's jupyterhub_config.py, rendered from the classroom's layout and the hub's settings.

Everything a person may want to check is a literal in the file (addresses, paths, groups, limits,
services, roles); only the spawner classes come from the package (`spawn.py`). The proxy's token
is read from its own file (0600) when the hub starts, so the config holds no secret.

Who may do what:
- PAM login, allowed for the groups hpclab-students and hpclab-instructors only (a system account
  that is in neither cannot log in, even with the right password);
- nobody is a JupyterHub admin (an admin may open every server, the other instructors' too);
  instructors get a role to see the room, start or stop servers, and open a student's server to
  help (access:servers for each student the config lists, not for other instructors): an
  instructor then works in that server as the student would, in the student's home;
- the idle culler holds just the scopes it needs; the formgrader and its roles come from
  grading_room.hub_services.
- The hub's API (8081) and the proxy's API (8001) listen on loopback only; the public address is
  the proxy's (bind_ip:port, TLS when a certificate is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpclab.classroom.layout import INSTRUCTORS_GROUP, STUDENTS_GROUP, ClassroomLayout
from hpclab.runs import recorded

HUB_API_PORT = 8081
PROXY_API_PORT = 8001
CULLER = "idle-culler"
# A service without a process: root's `hpclab classroom prestart` uses its token to start the
# students' servers before they arrive. It may start and stop those servers, not enter them.
PRESTART = "hpclab-prestart"
INSTRUCTOR_ROLE = "hpclab-instructor"
SERVER_JOB_NAME = "spawner-jupyterhub"  # batchspawner's Slurm job name for a student's server


@dataclass(frozen=True)
class HubFiles:
    """Every file of the hub, in lay.hub (root, 0700)."""

    folder: Path

    @property
    def config(self) -> Path:
        return self.folder / "jupyterhub_config.py"

    @property
    def db(self) -> Path:
        return self.folder / "jupyterhub.sqlite"

    @property
    def cookie_secret(self) -> Path:
        return self.folder / "jupyterhub_cookie_secret"

    @property
    def proxy_token(self) -> Path:
        return self.folder / "proxy_auth_token"

    @property
    def prestart_token(self) -> Path:
        """The token of the prestart service (hpclab classroom prestart): root's, 0600."""
        return self.folder / "prestart_api_token"

    @property
    def log(self) -> Path:
        return self.folder / "jupyterhub.log"

    @property
    def pid(self) -> Path:
        return self.folder / "jupyterhub.pid"

    @property
    def proxy_pid(self) -> Path:
        return self.folder / "proxy.pid"


def proxy_command(lay: ClassroomLayout) -> Path:
    """configurable-http-proxy as installed by npm below the classroom's folder."""
    return lay.root / "node" / "node_modules" / ".bin" / "configurable-http-proxy"


def site_name(lay: ClassroomLayout) -> str:
    """The site profile of the students' servers and jobs: the classroom's when the course has it."""
    return "classroom" if (lay.course / "sites" / "classroom.yaml").is_file() else "local"


def render(lay: ClassroomLayout, settings, *, slurm_conf: str, instructors: list[str],
           services: list[dict], roles: list[dict], server_partition: str = "", server_qos: str = "",
           students: list[str] = ()) -> str:
    """The text of jupyterhub_config.py. `settings` is a hub.HubSettings; `services` and `roles`
    are added to the hub's own (the idle culler's, the instructors')."""
    files = HubFiles(lay.hub)
    scheme = "https" if settings.ssl_cert else "http"
    venv_bin = lay.venv / "bin"
    environment = {
        "HPCLAB_SITE": site_name(lay),
        "SLURM_CONF": slurm_conf,
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(lay.venv),
        "LANG": "C.UTF-8",
    }
    if getattr(settings, "recording", None):  # room mode: the notebooks read the instructor's runs
        environment[recorded.ENV] = str(settings.recording)
    culler = {"name": CULLER,
              "command": [str(lay.python), "-m", "jupyterhub_idle_culler", f"--timeout={settings.idle_timeout_s}",
                          f"--cull-every={max(10, min(300, settings.idle_timeout_s // 2))}"]}
    all_services = [culler, *services]
    all_roles = [
        {"name": CULLER, "description": "stop servers idle longer than the timeout",
         "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"], "services": [CULLER]},
        {"name": INSTRUCTOR_ROLE, "description": "see the room, start or stop servers, open a student's server to help",
         # one access scope per student: a student's server checks a visitor's scopes itself and
         # knows users, not groups (a !group= filter answered 403, measured)
         "scopes": ["admin-ui", "list:users", "read:users", "read:users:activity", "read:servers", "servers",
                    *(f"access:servers!user={s}" for s in sorted(students))],
         "users": sorted(instructors)},
        {"name": PRESTART, "description": "start the students' servers before they arrive",
         "scopes": ["list:users", "read:users", "read:servers", *(f"servers!user={s}" for s in sorted(students))],
         "services": [PRESTART]},
        *roles,
    ]
    spawner = "ClassroomSlurmSpawner" if settings.spawner == "slurm" else "ClassroomLocalSpawner"
    lines = [
        "# jupyterhub_config.py of the hpclab classroom: generated by 'hpclab classroom up'",
        "# (hpclab/classroom/hub_config.py); edits are lost at the next 'up'.",
        "from pathlib import Path",
        "",
        f"from hpclab.classroom.spawn import {spawner}",
        "",
        "# --- where it listens: the public address is the proxy's; both APIs stay on loopback",
        f"c.JupyterHub.bind_url = {f'{scheme}://{settings.bind_ip}:{settings.port}/'!r}",
    ]
    if settings.ssl_cert:
        lines += [f"c.JupyterHub.ssl_cert = {str(settings.ssl_cert)!r}",
                  f"c.JupyterHub.ssl_key = {str(settings.ssl_key)!r}"]
    lines += [
        "c.JupyterHub.hub_ip = '127.0.0.1'",
        f"c.JupyterHub.hub_port = {HUB_API_PORT}",
        f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{PROXY_API_PORT}'",
        f"c.ConfigurableHTTPProxy.command = [{str(proxy_command(lay))!r}]",
        f"c.ConfigurableHTTPProxy.pid_file = {str(files.proxy_pid)!r}",
        f"c.ConfigurableHTTPProxy.auth_token = Path({str(files.proxy_token)!r}).read_text().strip()",
        "",
        "# --- state: root's, in a 0700 folder",
        f"c.JupyterHub.db_url = {'sqlite:///' + str(files.db)!r}",
        f"c.JupyterHub.cookie_secret_file = {str(files.cookie_secret)!r}",
        f"c.JupyterHub.pid_file = {str(files.pid)!r}",
        "# stopping the hub stops every student's server and the proxy with it",
        "c.JupyterHub.cleanup_servers = True",
        "c.JupyterHub.cleanup_proxy = True",
        "",
        "# --- who may log in: the room's accounts, by their Unix password",
        "c.JupyterHub.authenticator_class = 'pam'",
        f"c.PAMAuthenticator.allowed_groups = {{{STUDENTS_GROUP!r}, {INSTRUCTORS_GROUP!r}}}",
        "c.PAMAuthenticator.admin_groups = set()",
        "c.Authenticator.admin_users = set()",
        "# the hub knows every student before their first login, so their servers can be prestarted",
        f"c.Authenticator.allowed_users = {set(sorted(students))!r}" if students else "",
        "",
        "# --- each student's JupyterLab, as the student, on their own course copy",
        f"c.JupyterHub.spawner_class = {spawner}",
        # jupyterhub-singleuser without a slow optional import (singleuser.py); batchspawner's wrapper
        # runs a script file, the local spawner the module
        f"c.Spawner.cmd = {[str(lay.course / 'hpclab' / 'classroom' / 'singleuser.py')] if settings.spawner == 'slurm' else [str(lay.python), '-m', 'hpclab.classroom.singleuser']!r}",
        "c.Spawner.default_url = '/lab'",
        f"c.Spawner.environment = {environment!r}",
        f"c.Spawner.mem_limit = {int(settings.mem_limit_gb * (1 << 30))}",
        f"c.Spawner.cpu_limit = {float(settings.cpu_limit)!r}",
        f"c.Spawner.start_timeout = {120 if settings.spawner == 'slurm' else 60}",
        "c.Spawner.http_timeout = 60",
        # a stop is bounded: SIGINT, then SIGTERM after 10 s, SIGKILL 5 s later (JupyterHub 6 waits
        # 30 s and 30 s, and a server that let a SIGINT pass held its stop past a minute once, in a
        # full test run). Nothing of the student's is lost: the browser saves, the server holds no
        # unsaved work, and the post-stop hook removes whatever is left in the server's cgroup.
        "c.LocalProcessSpawner.interrupt_timeout = 10",
        "c.LocalProcessSpawner.term_timeout = 5",
        # kernels talk to their server over Unix sockets in the student's runtime folder, not TCP
        # ports: each kernel's five ports are picked free at its start, and with a room opening
        # kernels at once two picked the same one (measured: 6 'Address already in use' in one
        # bench, a kernel that never answered); a socket file is also the student's alone
        "c.Spawner.args = ['--KernelManager.transport=ipc']",
        f"c.{spawner}.course_folder = {str(lay.course)!r}",
        f"c.{spawner}.classroom_python = {str(lay.python)!r}",
        # a room arrives at once: let every student's spawn run, not only JupyterHub's default 100
        "c.JupyterHub.concurrent_spawn_limit = 200",
    ]
    if settings.spawner == "slurm":
        lines += [
            f"c.{spawner}.server_partition = {server_partition!r}",
            f"c.{spawner}.server_qos = {server_qos!r}",
            f"c.{spawner}.batchspawner_singleuser_cmd = {str(venv_bin / 'batchspawner-singleuser')!r}",
            "c.SlurmSpawner.startup_poll_interval = 0.5",
        ]
    lines += [
        "",
        "# --- services: the idle culler (and the formgrader, from grading_room)",
        f"c.JupyterHub.services = {all_services!r}",
        "# the prestart service's token is read from its own file (0600), as the proxy's is",
        f"c.JupyterHub.services.append({{'name': {PRESTART!r}, "
        f"'api_token': Path({str(files.prestart_token)!r}).read_text().strip()}})",
        f"c.JupyterHub.load_roles = {all_roles!r}",
        "",
    ]
    return "\n".join(lines)
