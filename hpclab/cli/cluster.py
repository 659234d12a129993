"""`hpclab cluster up | down | status | env`: the local Slurm cluster (hpclab/cluster/).

    hpclab cluster up [--nodes N [--cpus-per-node C] [--link PROFILE]]   one node, or N virtual nodes
    hpclab cluster down                                                  stop exactly what up started
    hpclab cluster status                                                daemons, nodes, logs (exit 1 when stopped)
    eval "$(hpclab cluster env)"                                         Slurm's commands in this shell
"""

from __future__ import annotations

import argparse
import sys

from hpclab.core.errors import HpclabError


def _up(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.cluster import local

    multinode = args.nodes is not None or args.link is not None
    if args.cpus_per_node is not None and not multinode:
        # The single-node cluster always has the whole machine: without virtual nodes there is
        # nothing to give C CPUs to, and ignoring the option would leave a student wondering.
        raise HpclabError("--cpus-per-node applies to virtual nodes only and was given without --nodes",
                          "start virtual nodes with e.g. 'hpclab cluster up --nodes 2 --cpus-per-node 1'; "
                          "the single-node cluster always uses all of this machine's CPUs")
    if multinode:
        from hpclab.cluster import vnodes  # multi-node mode on one machine

        report = vnodes.up(nodes=2 if args.nodes is None else args.nodes, cpus_per_node=args.cpus_per_node,
                           link=args.link or "unshaped")
    else:
        report = local.up()
    verb = "already running" if report.already_running else f"started in {report.seconds:.1f} s"
    print(f"hpclab cluster {verb}: nodes {', '.join(report.nodes)}")
    print(f"  {report.client_config}")
    return 0


def _down(args: argparse.Namespace) -> int:
    # imported when the command runs; virtual nodes' down also stops the single-node cluster
    from hpclab.cluster import vnodes

    stopped = vnodes.down()
    print("stopped: " + ", ".join(stopped) if stopped else "nothing was running")
    return 0


def _status(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab import cluster
    from hpclab.cluster import vnodes

    st = cluster.status()
    print(st.render())
    link = vnodes.link_in_effect()
    if link:  # virtual nodes: the link profile and which of its parts took effect
        print(f"  {link}")
    return 0 if st.running else 1


def _env(args: argparse.Namespace) -> int:
    from hpclab import cluster  # imported when the command runs

    sys.stdout.write(cluster.env_script())
    return 0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("cluster", help="start, stop or inspect the local Slurm cluster",
                              description="The local Slurm cluster: munged, MariaDB, slurmdbd, slurmctld and one "
                                          "slurmd per node, on this machine (README: 'The local cluster').")
    sub = p.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND")
    u = sub.add_parser("up", help="start the cluster (one node with the whole machine, or N virtual nodes)")
    u.add_argument("--nodes", type=int, help="virtual nodes on this machine (multi-node mode; docs/virtual-nodes.md)")
    u.add_argument("--cpus-per-node", type=int,
                   help="CPUs each virtual node gets (with --nodes; default: the machine's CPUs shared out)")
    u.add_argument("--link", help="link profile between virtual nodes: unshaped, 10g, 1g, 100m "
                                  "(with --nodes; default: unshaped)")
    u.set_defaults(func=_up)
    sub.add_parser("down", help="stop exactly the daemons (and virtual nodes) 'up' started").set_defaults(func=_down)
    sub.add_parser("status", help="daemons with their pids and logs, nodes, partitions; exit 1 when stopped"
                   ).set_defaults(func=_status)
    sub.add_parser("env", help="shell lines that point Slurm's commands at this cluster: "
                               "eval \"$(hpclab cluster env)\"").set_defaults(func=_env)
