"""Transport experiments: named selections become valid specs; summaries fit each run on its own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpclab.analysis import transports
from hpclab.course.lessons import transports as lesson_transports


def _runs(label, latency_us, bw_mb_s, run_ids):
    sizes = np.array([0] + [2 ** k for k in range(0, 23)])
    rows = []
    for i, run_id in enumerate(run_ids):
        t = latency_us + sizes / bw_mb_s * (1 + 0.01 * i)  # MB/s = bytes/us
        rows += [{"label": label, "run_id": run_id, "bytes": b, "t_usec": tt} for b, tt in zip(sizes, t)]
    return pd.DataFrame(rows)


def test_summary_recovers_latency_and_bandwidth_per_selection():
    """Does the summary give, per selection, the exact latency and the bandwidth range over its runs?"""
    table = pd.concat([_runs("fast", 0.5, 10000.0, ["a", "b", "c"]), _runs("slow", 20.0, 1000.0, ["d"])])
    s = transports.summary(table)
    assert list(s.index) == ["fast", "slow"]
    assert s.loc["fast", "runs"] == 3
    assert s.loc["fast", "latency_us_median"] == pytest.approx(0.5)
    assert s.loc["fast", "bandwidth_mb_s_max"] == pytest.approx(10000.0, rel=1e-9)
    assert s.loc["fast", "bandwidth_mb_s_min"] == pytest.approx(10000.0 / 1.02, rel=1e-9)
    assert s.loc["slow", "bandwidth_mb_s_median"] == pytest.approx(1000.0, rel=1e-9)
    top = 2 ** 22
    assert s.loc["slow", "largest_bytes"] == top
    assert s.loc["slow", "largest_mb_s_median"] == pytest.approx(top / (20.0 + top / 1000.0))


def test_bucket_free_size_leaves_the_bucket_below_an_eighth():
    """Is the first size used to fit a shaped link at least 8 token buckets (a power of two), so
    the unshaped first bucket of each ping-pong message adds at most 1/8 to its rate?"""
    from hpclab.cluster import links

    for name, prof in links.load_profiles().items():
        size = transports.bucket_free_size(name)
        assert size & (size - 1) == 0
        if prof.shaped:
            assert 8 * prof.burst_bytes() <= size < 16 * prof.burst_bytes()
        else:
            assert size == 8192


def test_every_named_selection_is_a_valid_spec():
    """Are all the course's named selections accepted by the spec model (names and MCA syntax)?"""
    specs = lesson_transports.specs(list(lesson_transports.SELECTIONS), repetitions=2)
    assert [s.label for s in specs] == list(lesson_transports.SELECTIONS)
    assert all(s.kernel == "pingpong" and s.repetitions == 2 for s in specs)


def test_the_labs_runs_are_made_again_while_a_fit_answers_nothing(monkeypatch, capsys):
    """Is a lab-transports role whose fit answers nothing (a busy machine's) measured again, the
    others kept, at most LAB_ATTEMPTS runs of it, and the learner told why?"""
    from types import SimpleNamespace

    from hpclab.course.lessons import transports as lesson
    from hpclab.jobs import experiment

    made = []

    def run(specs, **options):
        made.append([s["label"] for s in specs])
        return [SimpleNamespace(path=f"{s['label']}-{len(made)}") for s in specs]
    monkeypatch.setattr(experiment, "run", run)
    monkeypatch.setattr(lesson, "lab_fit_unusable", lambda path: path == "shm-1")
    runs = lesson.measure_lab({"shm": "self,sm", "tcp": "self,tcp"})
    assert made == [["shm", "tcp"], ["shm"]]
    assert {role: run.path for role, run in runs.items()} == {"shm": "shm-2", "tcp": "tcp-1"}
    assert "the shm run's times give no latency" in capsys.readouterr().out
    made.clear()
    monkeypatch.setattr(lesson, "lab_fit_unusable", lambda path: path.startswith("shm"))
    lesson.measure_lab({"shm": "self,sm", "tcp": "self,tcp"})
    assert made == [["shm", "tcp"], ["shm"], ["shm"]]
    assert "3 runs did so: measure when it is quieter" in capsys.readouterr().out


def test_a_run_whose_times_give_no_latency_is_unusable(tmp_path, monkeypatch):
    """Is a ping-pong table whose fit clamps the latency at 0, or whose times fall with the size
    (a descheduled pair on a busy machine), unusable for the lab, and a clean one usable?"""
    from hpclab.course.lessons import transports as lesson
    from hpclab.runs import parse

    sizes = [2 ** k for k in range(13, 23)]
    tables = {"clean": [0.5 + s / 5000.0 for s in sizes],          # L = 0.5 us, 5 GB/s
              "bent": [0.001 + s / 5000.0 * (1 + s / 2 ** 22) for s in sizes],   # large sizes slowed most
              "falling": [4000.0 - s / 2000.0 for s in sizes]}     # a time slice each, falling
    monkeypatch.setattr(parse, "parse_run", lambda folder, kernel: pd.DataFrame(
        {"bytes": sizes, "t_usec": tables[folder.name]}))
    assert not lesson.lab_fit_unusable(tmp_path / "clean")
    assert lesson.lab_fit_unusable(tmp_path / "bent")
    assert lesson.lab_fit_unusable(tmp_path / "falling")
