"""Each student's server gets a port of its own (hpclab.classroom.spawn.server_port): JupyterHub's
random port gave two servers of a room starting at once the same one."""

from __future__ import annotations

import socket

from hpclab.classroom import spawn


def test_a_room_of_accounts_gets_distinct_ports_below_the_ephemeral_range():
    uids = range(1001, 1001 + 200)   # accounts made one after another, as `classroom up` does
    ports = [spawn.server_port(uid) for uid in uids]
    assert len(set(ports)) == len(ports)
    assert all(1024 < p < 32768 for p in ports)


def test_a_port_in_use_is_seen_as_taken():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        assert not spawn.port_free(taken)
    assert spawn.port_free(taken)
