"""The `hpclab` command: the cluster, experiments and trace analysis from a terminal.

Each area registers its own subcommands (`add_commands(subparsers)` in its cli_* module); this
file only assembles them and turns an HpclabError into a short message and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from hpclab.core.errors import HpclabError

# Modules that add subcommands; a missing one (a part not built yet) is skipped.
COMMAND_MODULES = ["hpclab.cli.run", "hpclab.cli.trace", "hpclab.cli.course", "hpclab.cli.classroom"]


def _cluster(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab import cluster
    from hpclab.cluster import local

    multinode = args.nodes is not None or args.link is not None
    if args.cpus_per_node is not None and (args.action != "up" or not multinode):
        # The single-node cluster always has the whole machine: without virtual nodes there is
        # nothing to give C CPUs to, and ignoring the option would leave a student wondering.
        what = ("--cpus-per-node applies to virtual nodes only and was given without --nodes" if args.action == "up"
                else f"--cpus-per-node applies to 'hpclab cluster up --nodes N' only, not to '{args.action}'")
        raise HpclabError(what, "start virtual nodes with e.g. 'hpclab cluster up --nodes 2 --cpus-per-node 1'; "
                                "the single-node cluster always uses all of this machine's CPUs")
    if args.action == "up":
        nodes = None
        if multinode:
            from hpclab.cluster import vnodes  # multi-node mode on one machine

            report = vnodes.up(nodes=2 if args.nodes is None else args.nodes, cpus_per_node=args.cpus_per_node,
                               link=args.link or "unshaped")
        else:
            report = local.up(nodes=nodes)
        verb = "already running" if report.already_running else f"started in {report.seconds:.1f} s"
        print(f"hpclab cluster {verb}: nodes {', '.join(report.nodes)}")
        print(f"  {report.client_config}")
        return 0
    if args.action == "down":
        try:
            # imported when the command runs: `hpclab --help` and other commands start without it
            from hpclab.cluster import vnodes
        except ImportError:
            vnodes = None
        stopped = vnodes.down() if vnodes else local.down()
        print("stopped: " + ", ".join(stopped) if stopped else "nothing was running")
        return 0
    if args.action == "status":
        # imported when the command runs: `hpclab --help` and other commands start without it
        from hpclab.cluster import vnodes

        st = cluster.status()
        print(st.render())
        link = vnodes.link_in_effect()
        if link:  # virtual nodes: the link profile and which of its parts took effect
            print(f"  {link}")
        return 0 if st.running else 1
    if args.action == "env":
        sys.stdout.write(cluster.env_script())
        return 0
    raise AssertionError(args.action)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpclab", description="The hpclab course: cluster, experiments, analysis.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("cluster", help="start, stop or inspect the local Slurm cluster")
    p.add_argument("action", choices=["up", "down", "status", "env"])
    p.add_argument("--nodes", type=int, help="virtual nodes on this machine (multi-node mode)")
    p.add_argument("--cpus-per-node", type=int, help="CPUs each virtual node gets")
    p.add_argument("--link", help="link profile between virtual nodes (e.g. unshaped, 10g, 1g, 100m)")
    p.set_defaults(func=_cluster)

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        module.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HpclabError as e:
        print(f"hpclab: {e.what}", file=sys.stderr)
        if e.hint:
            print(f"  what to do: {e.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hpclab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and friends: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
