"""HPCLAB_CLUSTER_SHARED (make test's first part runs two tests at a time on one cluster): hpclab
refuses to start, stop, restart or reshape a cluster others run jobs on, with a message that says
why, and leaves a running cluster's idempotent `up` alone. No daemon is touched: the state folder
is a temporary one, and every daemon's start and stop fails the test if reached."""

from __future__ import annotations

import shutil

import pytest

from hpclab.cluster import local, vnodes
from hpclab.core import paths
from hpclab.core.errors import HpclabError


@pytest.fixture
def shared(tmp_path, monkeypatch):
    state = tmp_path / "cluster"
    monkeypatch.setenv("HPCLAB_STATE", str(state))
    monkeypatch.setenv(local.SHARED_ENV, "1")

    def reached(*args, **kwargs):
        raise AssertionError("a daemon would have been started or stopped")

    monkeypatch.setattr(local, "daemons", reached)
    monkeypatch.setattr(local, "slurmctld_daemon", reached)
    monkeypatch.setattr(local, "check_prerequisites", lambda: None)
    monkeypatch.setattr(vnodes, "_check_tools", lambda: None)
    yield
    # the layout's folders include one under /var/lib/hpclab for this temporary state folder
    shutil.rmtree(paths.daemon_state_dir(state), ignore_errors=True)


def test_down_is_refused_and_says_why(shared):
    with pytest.raises(HpclabError, match="refused to stop the cluster: HPCLAB_CLUSTER_SHARED is set") as e:
        local.down()
    assert "would be cancelled" in str(e.value)


def test_starting_a_stopped_cluster_is_refused(shared, monkeypatch):
    monkeypatch.setattr(local.config, "load_nodes", lambda lay: [])
    with pytest.raises(HpclabError, match="refused to start or restart"):
        local.up()


def test_virtual_nodes_in_place_of_the_running_cluster_are_refused(shared, monkeypatch):
    monkeypatch.setattr(local.config, "load_nodes", lambda lay: [])
    with pytest.raises(HpclabError, match="refused to start 2 virtual nodes"):
        vnodes.up(nodes=2, cpus_per_node=1)


def test_a_new_policy_is_refused_and_the_same_one_is_not(shared):
    lay = local.config.layout()
    lay.make_dirs()
    lay.policy_conf.write_text("PriorityType=priority/basic\n")
    assert local.apply_policy("PriorityType=priority/basic\n") is False
    with pytest.raises(HpclabError, match="refused to restart the controller with a new scheduling policy"):
        local.apply_policy("PriorityType=priority/multifactor\n")
    assert lay.policy_conf.read_text() == "PriorityType=priority/basic\n"


def test_without_the_variable_nothing_is_refused(monkeypatch):
    monkeypatch.delenv(local.SHARED_ENV, raising=False)
    local.refuse_if_shared("stop the cluster")


def test_a_classroom_on_a_shared_cluster_is_refused_before_anything_is_made(shared, tmp_path):
    """A room's policy restarts the controller: is `classroom up` refused before it writes its
    record, an account or anything else (a refusal half way left a room behind once)?"""
    from hpclab.classroom import room
    from hpclab.classroom.layout import ClassroomLayout

    lay = ClassroomLayout(root=tmp_path / "room")
    with pytest.raises(HpclabError, match="refused to restart the controller with a new scheduling policy"):
        room._up(3, 1, None, None, lay)
    assert not lay.root.exists()
