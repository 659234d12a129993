"""A killed job step's PMIx socket in a slurmd spool: removed before slurmd starts, while the
socket of a step that still runs is kept (real UNIX sockets, no cluster)."""

from __future__ import annotations

import socket

from hpclab.cluster import local


def _bound(path, listen: bool) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    if listen:
        s.listen(1)
    return s


def test_a_killed_steps_socket_and_folder_go_a_live_one_stays(tmp_path):
    spool = tmp_path / "slurmd-node2"
    spool.mkdir()
    dead = _bound(spool / "stepd.slurm.pmix.56.1", listen=False)
    dead.close()  # the file stays, as it does when slurmstepd is killed
    (spool / "pmix.56.1" / "a").mkdir(parents=True)
    live = _bound(spool / "stepd.slurm.pmix.57.0", listen=True)
    (spool / "pmix.57.0").mkdir()
    (spool / "cred_state").write_text("kept")
    try:
        assert local.clear_stale_step_sockets(spool) == ["stepd.slurm.pmix.56.1"]
        assert sorted(p.name for p in spool.iterdir()) == ["cred_state", "pmix.57.0", "stepd.slurm.pmix.57.0"]
    finally:
        live.close()


def test_a_missing_spool_is_nothing_to_clear(tmp_path):
    assert local.clear_stale_step_sockets(tmp_path / "never-made") == []
