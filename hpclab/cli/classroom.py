"""`hpclab classroom up | down | status`: a summer school on one machine (hpclab/classroom/)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _up(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.classroom import accounting, hub, room

    settings = hub.HubSettings(bind_ip=args.bind, port=args.port, ssl_cert=args.ssl_cert, ssl_key=args.ssl_key,
                               spawner=args.spawner, mem_limit_gb=args.server_memory_gb,
                               cpu_limit=args.server_cpus, idle_timeout_s=args.idle_minutes * 60)
    limits = accounting.StudentLimits(running_jobs=args.jobs_per_student, cpus=args.cpus_per_student,
                                      wall_minutes=args.wall_minutes)
    print(room.up(args.students, args.instructors, settings, limits).render())
    return 0


def _down(args: argparse.Namespace) -> int:
    from hpclab.classroom import room  # imported when the command runs

    removed = room.down(purge=args.purge)
    print(f"classroom down: removed {len(removed)} things" + (f" ({', '.join(removed[:6])}...)" if removed else ""))
    return 0


def _status(args: argparse.Namespace) -> int:
    from hpclab.classroom import room  # imported when the command runs

    print(room.status())
    return 0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("classroom", help="a summer school on this machine: accounts, hub, Slurm, grading")
    sub = p.add_subparsers(dest="classroom_command", required=True)
    u = sub.add_parser("up", help="create (or complete) the classroom; idempotent")
    u.add_argument("--students", type=int, default=30)
    u.add_argument("--instructors", type=int, default=1)
    u.add_argument("--spawner", choices=["local", "slurm"], default="local",
                   help="students' servers as local processes (default) or as Slurm jobs (batchspawner)")
    u.add_argument("--bind", default="127.0.0.1", help="the hub's address (a room's LAN address for a real room)")
    u.add_argument("--port", type=int, default=8000)
    u.add_argument("--ssl-cert", type=Path, help="TLS certificate (PEM) for a hub on the network")
    u.add_argument("--ssl-key", type=Path, help="its private key")
    u.add_argument("--server-memory-gb", type=float, default=1.0, help="memory limit of each student's server")
    u.add_argument("--server-cpus", type=float, default=1.0, help="CPU limit of each student's server")
    u.add_argument("--idle-minutes", type=int, default=60, help="a server idle this long is stopped")
    u.add_argument("--jobs-per-student", type=int, default=1, help="running jobs per student (QOS)")
    u.add_argument("--cpus-per-student", type=int, default=2, help="CPUs per student (QOS)")
    u.add_argument("--wall-minutes", type=int, default=10, help="wall time of a student's job (QOS)")
    u.set_defaults(func=_up)
    d = sub.add_parser("down", help="remove everything 'up' created (accounts, homes, hub, Slurm objects)")
    d.add_argument("--purge", action="store_true", help="also remove the students' Python environment")
    d.set_defaults(func=_down)
    s = sub.add_parser("status", help="what the classroom has and whether its hub runs")
    s.set_defaults(func=_status)
