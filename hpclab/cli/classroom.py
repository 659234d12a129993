"""`hpclab classroom ...`: a summer school on one machine (hpclab/classroom/).

    up | down | status            make or complete the room; stop it (keeps everything); say what it has
    record [--notebooks NB ...]   run the notebooks a room cannot run itself, once, into the recording
                                  that 'up --recording' opens the room on (room mode)
    remove --yes-delete-student-data [--purge]
                                  export the grades, archive the course and every home, then delete it
    release | collect | feedback | export LAB
                                  one step of a lab's round on the room's exchange, per student
    prestart [--over SECONDS]     start every student's server before class, spread over the seconds
"""

from __future__ import annotations

import argparse
from pathlib import Path

LAB_HELP = "the lab, by its folder name under labs/ (a wrong name is answered with the room's labs)"


def _up(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.classroom import accounting, hub, room

    settings = hub.HubSettings(bind_ip=args.bind, port=args.port, ssl_cert=args.ssl_cert, ssl_key=args.ssl_key,
                               spawner=args.spawner, mem_limit_gb=args.server_memory_gb,
                               cpu_limit=args.server_cpus, idle_timeout_s=args.idle_minutes * 60,
                               recording=args.recording.resolve() if args.recording else None)
    limits = accounting.StudentLimits(running_jobs=args.jobs_per_student, cpus=args.cpus_per_student,
                                      wall_minutes=args.wall_minutes)
    print(room.up(args.students, args.instructors, settings, limits, roster=args.roster, own=args.own).render())
    return 0


def _record(args: argparse.Namespace) -> int:
    from hpclab.classroom import layout, recording  # imported when the command runs

    folder = args.to or recording.default_folder(layout.layout())
    notebooks = recording.chosen_notebooks(args.notebooks, args.students)
    print(f"recording {len(notebooks)} notebook(s) into {folder}: "
          + ", ".join(nb.stem for nb in notebooks), flush=True)
    report, made = recording.record(folder, notebooks, by=args.by)
    for path, entry in made.items():
        print(f"  {'ok  ' if entry['ok'] else 'FAIL'} {path}: {len(entry['runs'])} run(s) of "
              f"{', '.join(entry['experiments']) or 'no experiment'} in {entry['seconds']:.0f} s")
    print(f"open the room on it: sudo .venv/bin/hpclab classroom up --recording {folder}")
    return 0 if not report.failures else 1


def _down(args: argparse.Namespace) -> int:
    from hpclab.classroom import room  # imported when the command runs

    print(room.down(purge=args.purge).render())
    return 0


def _remove(args: argparse.Namespace) -> int:
    from hpclab.classroom import room  # imported when the command runs

    print(room.remove(yes=args.yes_delete_student_data, purge=args.purge, archive_dir=args.archive_dir).render())
    return 0


def _status(args: argparse.Namespace) -> int:
    from hpclab.classroom import room  # imported when the command runs

    print(room.status())
    return 0


def _prestart(args: argparse.Namespace) -> int:
    from hpclab.classroom import room  # imported when the command runs

    report = room.prestart(over_s=args.over)
    print(report.render())
    return 0 if report.head.startswith(f"prestart: {len(report.per_student)} of") else 1


def _round_step(args: argparse.Namespace) -> int:
    from hpclab.classroom import room  # imported when the command runs

    step = {"release": room.release, "collect": room.collect, "feedback": room.feedback,
            "export": room.export}[args.classroom_command]
    extra = {"jobs": args.jobs} if args.classroom_command == "collect" else {}
    print(step(args.lab, **extra).render())
    return 0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("classroom", help="a summer school on this machine: accounts, hub, Slurm, grading",
                              description="A summer school on this machine (README: 'Running a summer school'; "
                                          "docs/classroom.md). Every command needs root.")
    sub = p.add_subparsers(dest="classroom_command", required=True, metavar="COMMAND")
    u = sub.add_parser("up", help="create (or complete, or bring back after 'down') the classroom; idempotent")
    u.add_argument("--students", type=int, default=30, help="accounts student01..NN")
    u.add_argument("--instructors", type=int, default=1, help="accounts instructor1..M")
    u.add_argument("--roster", type=Path, help="CSV with first_name,last_name[,email][,account], one row per student: "
                                               "the names the formgrader and the grade export show")
    u.add_argument("--spawner", choices=["local", "slurm"], default="local",
                   help="students' servers as local processes or as Slurm jobs (batchspawner)")
    u.add_argument("--bind", default="127.0.0.1", help="the hub's address (a room's LAN address for a real room)")
    u.add_argument("--port", type=int, default=8000, help="the hub's port")
    u.add_argument("--ssl-cert", type=Path, help="TLS certificate (PEM) for a hub on the network")
    u.add_argument("--ssl-key", type=Path, help="its private key")
    u.add_argument("--server-memory-gb", type=float, default=1.0, help="memory limit of each student's server")
    u.add_argument("--server-cpus", type=float, default=1.0, help="CPU limit of each student's server")
    u.add_argument("--idle-minutes", type=int, default=60, help="a server idle this long is stopped")
    u.add_argument("--jobs-per-student", type=int, default=1, help="running jobs per student (QOS)")
    u.add_argument("--cpus-per-student", type=int, default=2, help="CPUs per student (QOS)")
    u.add_argument("--wall-minutes", type=int, default=10, help="wall time of a student's job (QOS)")
    u.add_argument("--recording", type=Path,
                   help="room mode: the students' notebooks read the runs recorded in this folder "
                        "('classroom record' makes it) instead of submitting")
    u.add_argument("--own", nargs="+", default=[], metavar="EXPERIMENT",
                   help="with --recording: experiments (or experiment/label) the students still run themselves")
    u.set_defaults(func=_up)
    rc = sub.add_parser("record", help="run the notebooks a room cannot run itself once, on this machine, into a "
                                       "recording its students read (room mode; 'up --recording' opens it)")
    rc.add_argument("--notebooks", nargs="+", metavar="NB",
                    help="notebooks by number, stem or path (default: those the last course run's plan puts "
                         "in room mode for --students)")
    rc.add_argument("--students", type=int, default=30, help="the room's size the default notebooks are chosen for")
    rc.add_argument("--to", type=Path, help="the recording's folder (default: the classroom's recording/)")
    rc.add_argument("--by", help="whose runs the figures name (default: the user behind sudo)")
    rc.set_defaults(func=_record)
    d = sub.add_parser("down", help="stop the hub and every student's server; keep accounts, homes, the course, "
                                    "the gradebook and the Slurm account ('up' brings the room back)")
    d.add_argument("--purge", action="store_true", help=argparse.SUPPRESS)   # refused with a pointer to remove
    d.set_defaults(func=_down)
    r = sub.add_parser("remove", help="export the grades, archive the course and every home, then delete the "
                                      "room (accounts, homes, course, Slurm account)")
    r.add_argument("--yes-delete-student-data", action="store_true",
                   help="required: without it, remove only says what it would delete")
    r.add_argument("--purge", action="store_true",
                   help="also remove the students' Python environment (packages only; 'up' rebuilds it)")
    r.add_argument("--archive-dir", type=Path,
                   help="where the archive and the grades go (root's, 0700; default: "
                        "/var/backups/hpclab-classroom, or $HPCLAB_CLASSROOM_ARCHIVES)")
    r.set_defaults(func=_remove)
    s = sub.add_parser("status", help="what the classroom has and whether its hub runs")
    s.set_defaults(func=_status)
    ps = sub.add_parser("prestart", help="start every student's server before class, spread over --over seconds")
    ps.add_argument("--over", type=float, default=300.0,
                    help="seconds over which the starts are spread (a start costs about 2 CPU-seconds)")
    ps.set_defaults(func=_prestart)
    for name, helptext in (("release", "release a lab to the room's exchange (students fetch it)"),
                           ("collect", "collect the students' submissions of a lab and autograde them in the sandbox"),
                           ("feedback", "release the autograded labs' feedback (students fetch it)"),
                           ("export", "every grade as a new CSV in the course's exports/; per student, the lab's")):
        q = sub.add_parser(name, help=helptext)
        if name == "export":
            q.add_argument("lab", nargs="?", help=LAB_HELP + "; every lab when left out")
        else:
            q.add_argument("lab", help=LAB_HELP)
        if name == "collect":
            q.add_argument("--jobs", type=int, default=None,
                           help="submissions autograded at once, each in its own sandbox (default: one per core)")
        q.set_defaults(func=_round_step)
