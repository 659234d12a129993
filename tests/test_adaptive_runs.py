"""Experiments of adaptive length: rounds of one job per spec until the caller's rule says the
comparison is decided, or a cap of rounds or seconds; the loop is checked against a stand-in for
Slurm (no jobs), then once on the real cluster (job ids alternate round by round)."""

import itertools
from types import SimpleNamespace

import pytest

from hpclab.core.errors import HpclabError, TimedOut
from hpclab.jobs import experiment
from hpclab.core import paths
from hpclab.runs.folder import RunFolder, run_folders
from hpclab.spec.model import make_spec

TINY = dict(kernel="pingpong", ntasks=2, args={"max_bytes": 1024, "reps": 20},
            binding={"cpu_bind": "cores"}, mca={"btl": "self,vader"})


class Clock:
    """A stand-in for the time module as experiment uses it: each wait takes `step` seconds."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """prepare/submit/wait_for without Slurm: folders under tmp_path, job ids 100, 101, ...; a
    wait marks its runs completed (or as `outcome` says for a job id) and advances the clock."""
    jobs = itertools.count(100)
    clock = Clock(step=10.0)
    outcome: dict[str, dict] = {}

    def prepare(spec, site, repetition=1, root=None):
        folder = RunFolder.create(spec.experiment, spec.to_dict(), root=tmp_path)
        folder.set_status("pending", repetition=repetition)
        return experiment.Run(folder, spec)

    def submit(run):
        run.folder.set_status("pending", job_id=str(next(jobs)))
        return run

    def wait_for(runs, timeout=None, progress=True, poll=0.5):
        clock.now += clock.step
        for r in runs:
            end = outcome.get(r.job_id, {"state": "completed"})
            r.folder.set_status(**end)
        experiment.raise_for_failures(runs)
        return runs

    monkeypatch.setattr(experiment, "prepare", prepare)
    monkeypatch.setattr(experiment, "submit", submit)
    monkeypatch.setattr(experiment, "wait_for", wait_for)
    monkeypatch.setattr(experiment, "time", clock)
    return SimpleNamespace(clock=clock, outcome=outcome, root=tmp_path)


def pair():
    a, b = make_spec({**TINY, "label": "A"}), make_spec({**TINY, "label": "B"})
    return [(a, None), (b, None)]


def test_rounds_stop_when_the_rule_says_decided(fake_slurm):
    """Is the rule asked after every round from the minimum on, with the runs grouped by spec, and
    do the rounds stop at the first yes, saying so?"""
    asked = []

    def until(by_spec):
        asked.append([[r.spec.label for r in g] for g in by_spec])
        return len(by_spec[0]) == 4

    runs = experiment.run_until(pair(), until, min_repetitions=2, max_repetitions=10)
    assert runs.stopped == "decided after 4 rounds" and runs.rounds == 4
    assert asked == [[["A"] * n, ["B"] * n] for n in (2, 3, 4)]
    assert [r.spec.label for r in runs] == ["A"] * 4 + ["B"] * 4
    assert [[r.repetition for r in g] for g in runs.groups] == [[1, 2, 3, 4]] * 2
    ids = [int(r.job_id) for rnd in zip(*runs.groups) for r in rnd]  # A1 B1 A2 B2 ...
    assert ids == list(range(100, 108))


def test_a_cap_of_rounds_stops_an_undecided_comparison(fake_slurm):
    """Does a rule that never decides stop at max_repetitions, saying the cap was reached?"""
    runs = experiment.run_until(pair(), lambda by_spec: False, min_repetitions=1, max_repetitions=3)
    assert runs.stopped == "cap of 3 rounds reached" and len(runs) == 6


def test_no_round_starts_that_would_end_after_the_time_cap(fake_slurm):
    """With rounds of 10 s and a cap of 35 s, are 3 rounds run (a fourth would end at 40 s)?"""
    runs = experiment.run_until(pair(), lambda by_spec: False, min_repetitions=1, max_repetitions=10,
                                max_seconds=35)
    assert runs.stopped == "time cap of 35 s reached after 3 rounds" and runs.rounds == 3


def test_a_failed_run_ends_the_rounds_with_its_typed_error(fake_slurm):
    """Does a run that fails in round 2 raise the error of its cause, with no round 3 submitted
    and the folders of both rounds kept?"""
    fake_slurm.outcome["103"] = {"state": "timeout", "failure": "timed_out", "reason": "TimeLimit"}
    with pytest.raises(TimedOut, match="1 of 2 run"):
        experiment.run_until(pair(), lambda by_spec: False, min_repetitions=1, max_repetitions=5)
    states = sorted(f.status()["state"] for f in run_folders(fake_slurm.root))
    assert states == ["completed"] * 3 + ["timeout"]


def test_until_asks_for_a_sensible_range_and_waiting():
    """Are min_repetitions above max_repetitions, and until without waiting, refused before
    anything is submitted?"""
    with pytest.raises(HpclabError, match="1 <= min_repetitions <= max_repetitions"):
        experiment.run_until(pair(), lambda by_spec: True, min_repetitions=4, max_repetitions=3)
    with pytest.raises(HpclabError, match="until needs wait=True"):
        experiment.run(make_spec(TINY), wait=False, until=lambda by_spec: True)


def test_disturbed_runs_are_repeated_once_in_their_place(fake_slurm):
    """With rerun_disturbed, is a run whose status says noise submitted once more with the same
    repetition, in its place in the groups, both folders kept and marked, and is a disturbed
    repetition kept rather than repeated again?"""
    noisy = {"state": "completed", "noise": "while it ran, other processes used 0.9 of a core on vm"}
    fake_slurm.outcome.update({"101": noisy, "102": noisy})  # B of round 1, and its repetition
    runs = experiment.run_until(pair(), lambda by_spec: True, min_repetitions=2, max_repetitions=2,
                                rerun_disturbed=True)
    assert len(runs.replaced) == 1
    old, new = runs.replaced[0]
    assert (old.job_id, new.job_id) == ("101", "102")
    assert old.folder.status()["replaced_by"] == new.run_id and new.folder.status()["replaces"] == old.run_id
    assert [r.job_id for r in runs.groups[1]] == ["102", "104"] and new.repetition == 1
    assert new.noise and "replaced_by" not in new.folder.status()
    assert len(run_folders(fake_slurm.root)) == 5


def test_fixed_repetitions_rerun_the_disturbed_after_all_ended(fake_slurm):
    """Without until, are the disturbed runs of the whole experiment repeated as one batch after
    it, and does Runs say which replaced which?"""
    fake_slurm.outcome["100"] = {"state": "completed", "noise": "while it ran, other processes used 1.0 of a core on vm"}
    site = object()
    monkey_checked = [(make_spec({**TINY, "label": "A", "repetitions": 2}), site)]
    groups = [[experiment.prepare(monkey_checked[0][0], site, rep) for rep in (1, 2)]]
    for r in groups[0]:
        experiment.submit(r)
    experiment.wait_for(groups[0])
    pairs = experiment.rerun_disturbed_runs(groups, monkey_checked)
    assert [(o.job_id, n.job_id) for o, n in pairs] == [("100", "102")]
    assert [r.job_id for r in groups[0]] == ["102", "101"]


# --- on the real cluster --------------------------------------------------------------------------


@pytest.fixture
def runs_root(tmp_path, monkeypatch, cluster):
    root = tmp_path / "runs"
    monkeypatch.setenv("HPCLAB_RUNS", str(root))
    if not (paths.bin_dir() / "pingpong").is_file():
        pytest.skip("build/bin/pingpong not built (make -C src)")
    return root


def test_real_rounds_alternate_and_stop_when_decided(runs_root):
    """Two tiny pingpong specs with a rule that says yes at round 3: exactly 3 rounds, job ids
    A1 < B1 < A2 < B2 < A3 < B3, each run's repetition its round?"""
    asked = []

    def until(by_spec):
        asked.append(len(by_spec[0]))
        return len(by_spec[0]) == 3

    a, b = make_spec({**TINY, "label": "A"}), make_spec({**TINY, "label": "B"})
    runs = experiment.run([a, b], until=until, min_repetitions=2, max_repetitions=6, progress=False, timeout=120)
    assert runs.stopped == "decided after 3 rounds" and asked == [2, 3]
    assert [[r.spec.label for r in g] for g in runs.groups] == [["A"] * 3, ["B"] * 3]
    ids = [int(r.job_id) for rnd in zip(*runs.groups) for r in rnd]
    assert ids == sorted(ids) and len(set(ids)) == 6, ids
    assert [r.repetition for r in runs.groups[1]] == [1, 2, 3]
    assert all(r.state == "completed" for r in runs)


def test_real_rounds_stop_at_the_cap(runs_root):
    """Does a rule that never decides stop at max_repetitions on the real cluster?"""
    runs = experiment.run([make_spec({**TINY, "label": "A"}), make_spec({**TINY, "label": "B"})],
                          until=lambda by_spec: False, min_repetitions=1, max_repetitions=2,
                          progress=False, timeout=120)
    assert runs.stopped == "cap of 2 rounds reached" and len(runs) == 4
