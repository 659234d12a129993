"""Temporary virtual nodes for a notebook section: intra- against inter-node experiments on one machine.

    with multinode.virtual_nodes(2, link="1g"):
        runs = experiment.run(specs)

On the local site this stops the single-node cluster, starts `nodes` virtual nodes (network
namespaces joined by a shaped bridge, see docs/virtual-nodes.md) and, when the block ends (also on
error), stops them and starts the single-node cluster again. On a real site there is nothing to
emulate: the block simply runs on the site's own nodes.
"""

from __future__ import annotations

import contextlib

from hpclab.site import profile as site_mod
from hpclab.core.errors import HpclabError
from hpclab.cluster import local, vnodes


@contextlib.contextmanager
def virtual_nodes(nodes: int = 2, link: str = "unshaped", cpus_per_node: int | None = None):
    """Run the block on `nodes` virtual nodes linked by `link`; yields the cluster's UpReport
    (None on a real site)."""
    site = site_mod.load_site()
    if site.name != "local":
        yield None
        return

    vnodes.down()
    try:
        report = vnodes.up(nodes=nodes, cpus_per_node=cpus_per_node, link=link)
    except HpclabError:
        vnodes.down()
        local.up()
        raise
    try:
        yield report
    finally:
        vnodes.down()
        local.up()
