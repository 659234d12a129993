"""The spawners of the room's hub: what happens when a student's JupyterLab starts and stops.

This module runs inside the hub (root, in the classroom's venv, where jupyterhub and batchspawner
are installed); the rendered jupyterhub_config.py names its classes. Both spawners
- copy the course's notebooks and labs into the student's home before the server starts, as the
  student, never overwriting a file they have (`first_login`);
- open JupyterLab on that copy (notebook_dir) with HPCLAB_RUNS in the student's home.

`ClassroomLocalSpawner` starts the server as a local process of the student, in its own cgroup
(`limits`): memory and CPU limits are enforced by the kernel, not merely announced.
`ClassroomSlurmSpawner` (--spawner slurm) submits it as a Slurm job of the student (batchspawner's
SlurmSpawner), in the servers partition and QOS; Slurm's own cgroups bound its memory.
"""

from __future__ import annotations

import asyncio
import math
import os
import pwd
import shlex

from batchspawner import SlurmSpawner
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import HasTraits, Unicode, default

from hpclab.classroom import accounts, limits
from hpclab.classroom.layout import ClassroomLayout
from hpclab.core import paths

DEFAULT_MEM_BYTES = 1 << 30
# Each student's server listens on a port of its own, from its account's uid: JupyterHub's random
# port is whatever port the kernel hands out free at that moment, and with a room starting at
# once two servers were given the same one (measured: student15 and student25 on 59739; the
# second server could not bind, and the first one's spawner took the other's answer for its own).
# Below Linux's ephemeral range (32768-60999), so no outgoing connection holds it.
SERVER_PORT_BASE = 20000
SERVER_PORT_SPAN = 10000


def server_port(uid: int) -> int:
    """The port of the server of the account with this uid."""
    return SERVER_PORT_BASE + uid % SERVER_PORT_SPAN


def port_free(port: int, ip: str = "127.0.0.1") -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind((ip, port))
        except OSError:
            return False
    return True


class ClassroomSpawnerMixin(HasTraits):
    """What both spawners share: the course copy, the notebook folder, the runs root. (HasTraits,
    so that traitlets names its traits; it comes first in each spawner's bases.)"""

    course_folder = Unicode(help="the classroom's course copy (lay.course), read by every account").tag(config=True)
    classroom_python = Unicode(help="the classroom venv's python (runs the course copy as the student)").tag(config=True)

    def _home(self) -> str:
        return pwd.getpwnam(self.user.name).pw_dir

    @default("notebook_dir")
    def _notebook_dir(self):
        return str(ClassroomLayout.student_course(self._home()))

    def get_env(self):
        env = super().get_env()
        env["HPCLAB_RUNS"] = str(ClassroomLayout.student_runs(self._home()))
        env[paths.OUTPUT_ENV] = str(ClassroomLayout.student_output(self._home()))
        return env

    async def _copy_course(self) -> None:
        """Copy the notebooks and labs the student does not have yet, as the student."""
        dest = ClassroomLayout.student_course(self._home())
        argv = [*accounts.as_user(self.user.name), self.classroom_python, "-m", "hpclab.classroom.first_login",
                self.course_folder, str(dest)]
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, cwd="/")
        out, _ = await proc.communicate()
        text = out.decode(errors="replace").strip()
        if proc.returncode != 0:
            raise RuntimeError(f"copying the course into {dest} as {self.user.name} failed "
                               f"(exit {proc.returncode}): {text[-500:]}")
        self.log.info("%s: %s", self.user.name, text)

    async def _until_listening(self, ip: str, port: int, timeout: float = 45.0) -> None:
        """Return once the new server accepts connections (or died, or `timeout` s passed). The hub
        then checks it over HTTP with a back-off that doubles from 0.2 s: a server up at 2.5 s
        would be seen only at about 3 s or 6 s. Polling the port every 50 ms here makes that
        first check the one that succeeds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        tries = 0
        while loop.time() < deadline:
            try:
                _, writer = await asyncio.open_connection(ip or "127.0.0.1", port)
                writer.close()
                return
            except OSError:
                pass
            tries += 1
            if tries % 20 == 0 and await self.poll() is not None:
                return  # it died: the hub's own check reports it
            await asyncio.sleep(0.05)

    async def run_pre_spawn_hook(self):
        await self._copy_course()
        result = super().run_pre_spawn_hook()
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            await result


class ClassroomLocalSpawner(ClassroomSpawnerMixin, LocalProcessSpawner):
    """JupyterLab as a local process of the student, inside a cgroup with the server's limits."""

    _cgroup = None

    async def start(self):
        mem = int(self.mem_limit or DEFAULT_MEM_BYTES)
        cpus = float(self.cpu_limit or 1.0)
        self._cgroup = limits.create(self.user.name, mem, cpus)
        if self._cgroup is None:
            self.log.warning("%s's server: memory and CPU limits %s", self.user.name, limits.describe())
        else:
            self.log.info("%s's server: %d MiB, %.2g CPUs (%s)", self.user.name, mem >> 20, cpus,
                          self._cgroup.version)
        port = server_port(pwd.getpwnam(self.user.name).pw_uid)
        if port_free(port, self.ip or "127.0.0.1"):
            self.port = port
        else:  # something else holds it: JupyterHub's random port, as before
            self.log.warning("%s's server port %d is taken; a random one instead", self.user.name, port)
            self.port = 0
        ip, port = await super().start()
        await self._until_listening(ip, port)
        return ip, port

    def make_preexec_fn(self, name):
        become_student = super().make_preexec_fn(name)
        cg = self._cgroup
        root = self._notebook_dir()

        def preexec():
            # still root here: enter the cgroup first, so the server and every kernel it forks
            # are inside from their first instruction
            if cg is not None:
                cg.enter()
            become_student()
            # Start in the course copy, not the home: nbgrader's Assignments tab fetches into the
            # server's working folder, and a lab fetched outside the file browser's root is lost.
            try:
                os.chdir(root)
            except OSError:
                pass

        return preexec

    def run_post_stop_hook(self):
        # whatever the server left (a kernel it did not stop) goes with its cgroup
        cg = limits.cgroup(self.user.name)
        if cg is not None and not cg.remove():
            self.log.warning("the cgroup of %s's server could not be removed", self.user.name)
        return super().run_post_stop_hook()


class ClassroomSlurmSpawner(ClassroomSpawnerMixin, SlurmSpawner):
    """JupyterLab as a Slurm job of the student (batchspawner), as HPC centres run it.

    The embedded cluster's servers partition holds only this machine's node, so the server
    listens on loopback and the hub reaches it there (batchspawner resets `ip` to the class
    default before it submits, hence a class default rather than configuration)."""

    ip = Unicode("127.0.0.1")
    server_qos = Unicode("", help="QOS for the server jobs (their own, beside the students' job QOS)").tag(config=True)
    server_partition = Unicode("", help="partition for the server jobs").tag(config=True)

    @default("req_prologue")
    def _prologue(self):
        # the server starts in the course copy: nbgrader's Assignments tab fetches into the
        # server's working folder (the job itself starts in the home, where Slurm writes its log)
        return f"cd {shlex.quote(self._notebook_dir())}"

    @default("req_partition")
    def _partition(self):
        return self.server_partition

    @default("req_memory")
    def _memory(self):
        return f"{int(self.mem_limit or DEFAULT_MEM_BYTES) >> 20}M"

    @default("req_nprocs")
    def _nprocs(self):
        return str(max(1, math.ceil(self.cpu_limit or 1)))

    @default("req_options")
    def _options(self):
        return f"--qos={self.server_qos}" if self.server_qos else ""

    @default("exec_prefix")
    def _exec_prefix(self):
        # sbatch, squeue and scancel run as the student (no sudo here: setpriv, as accounts.as_user)
        pw = pwd.getpwnam(self.user.name)
        return shlex.join(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups"])

    def state_gethost(self):
        return "127.0.0.1"

    async def start(self):
        ip, port = await super().start()
        await self._until_listening(ip, port)
        return ip, port
