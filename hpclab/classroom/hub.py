"""JupyterHub for the room (being written: see the classroom issue). Interface used by room.py:

    HubSettings(bind_ip, port, ssl_cert, ssl_key, spawner, mem_limit_gb, cpu_limit, idle_timeout_s)
    start(lay, rec, settings) -> str     start (idempotent) and return the hub's URL
    stop(lay, rec) -> bool               stop what start started; True if it ran
    status(lay) -> list[str]             lines for `hpclab classroom status`
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpclab.core.errors import HpclabError
from hpclab.classroom.layout import ClassroomLayout
from hpclab.classroom.record import Record


@dataclass(frozen=True)
class HubSettings:
    bind_ip: str = "127.0.0.1"
    port: int = 8000
    ssl_cert: Path | None = None
    ssl_key: Path | None = None
    spawner: str = "local"  # or "slurm" (batchspawner)
    mem_limit_gb: float = 1.0
    cpu_limit: float = 1.0
    idle_timeout_s: int = 3600


def start(lay: ClassroomLayout, rec: Record, settings: HubSettings) -> str:
    raise HpclabError("the classroom's hub is not built in this checkout yet", "see the classroom issue")


def stop(lay: ClassroomLayout, rec: Record) -> bool:
    return False


def status(lay: ClassroomLayout) -> list[str]:
    return ["hub: not built yet"]
