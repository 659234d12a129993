"""Which network interface carried a run's messages, counted by the kernel, not taken on trust.

An MPI library can say which transport it chose, not which interface its TCP went out on. The job
script saves /proc/net/dev of the node its batch script runs on (the first node) just before and
just after the run (provenance/net-before.txt, net-after.txt); the bytes each interface sent in
between name the one that carried the messages. Slurm's and munge's own chatter crosses the
loopback too, a few kB per job, so an interface counts only from CARRIED_BYTES on. Linux carries
a packet to one of the node's own addresses (its eth0's included) over the loopback, so a
one-node run over TCP shows `lo` whatever address the library picked.
"""

from __future__ import annotations

from pathlib import Path

CARRIED_BYTES = 1_000_000  # below this an interface only carried the job's housekeeping
BEFORE, AFTER = "provenance/net-before.txt", "provenance/net-after.txt"


def parse_net_dev(text: str) -> dict[str, int]:
    """Bytes sent per interface from the text of /proc/net/dev: {"lo": 3681817100, ...}.
    Lines that are not an interface's counters (the two headers) are skipped."""
    sent = {}
    for line in text.splitlines():
        name, sep, counters = line.partition(":")
        fields = counters.split()
        if not sep or len(fields) < 9 or not fields[8].isdigit():
            continue
        sent[name.strip()] = int(fields[8])  # the ninth counter is bytes transmitted
    return sent


def bytes_sent(run_dir: str | Path) -> dict[str, int] | None:
    """Bytes each interface of the first node sent while the run ran, {interface: bytes}, largest
    first; None when the run folder has no counts (a job from before they were kept)."""
    run_dir = Path(run_dir)
    before, after = run_dir / BEFORE, run_dir / AFTER
    if not (before.is_file() and after.is_file()):
        return None
    start, end = parse_net_dev(before.read_text(errors="replace")), parse_net_dev(after.read_text(errors="replace"))
    moved = {name: end[name] - start[name] for name in end if name in start and end[name] >= start[name]}
    return dict(sorted(moved.items(), key=lambda kv: kv[1], reverse=True))


def carried_by(sent: dict[str, int] | None) -> str | None:
    """The interface that carried the messages: the one that sent the most, if at least
    CARRIED_BYTES; "none" when no interface did (shared memory); None when nothing was counted."""
    if sent is None:
        return None
    top = next(iter(sent.items()), None)
    return top[0] if top and top[1] >= CARRIED_BYTES else "none"
