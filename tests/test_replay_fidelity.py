"""A real traced Poisson run, replayed under a network model fitted to this machine's own
ping-pong, takes as long as it really took (within 15 %), and its split adds up (within 1 %).

Measured on the 2-core VM (24 runs, a new ping-pong fit every 6): the replay lasts 0.905 to 1.066
of the measurement, 0.94 in the median (one more run, switched out for 19 ms, gave 0.29: the
least-disturbed choice below skips such a run). The model has no per-call software cost (an MPI_Isend
that sends eagerly still takes some 100 ns of CPU) and the ping-pong fit itself moves between
runs (latency 0.6-2.1 us, bandwidth 2-7.7 GB/s), so 10 % failed about one run in eight.

The replay keeps the measured wall-clock bursts here: the question is whether the network model
explains the MPI time. (The course's split replays CPU bursts instead, to predict a run with a
core per rank; on a machine shared with other work that differs from the measurement by the time
the ranks were switched out, which the split reports as its rest.)"""

from __future__ import annotations

import pytest

from hpclab.jobs import experiment
from hpclab.spec import model as spec
from hpclab.analysis import imbalance as imb
from hpclab.trace.load import load_run
from hpclab.trace.replay import replay
from hpclab.trace.split import rank_times, split
from hpclab.site import ompi

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("exchange", ["blocking", "nonblocking"])
def test_replay_under_fitted_model_reproduces_the_measured_time(cluster, tmp_path, monkeypatch, exchange):
    """Does replaying a measured trace with a model fitted to a measured ping-pong give back the measured run time?"""
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    [pp] = experiment.run(spec.make_spec(kernel="pingpong", ntasks=2, args={"max_bytes": 1 << 16},
                                         binding={"cpu_bind": "cores"}, experiment="fidelity"), progress=False)
    model = imb.pingpong_model(pp.table()[["bytes", "t_usec"]].to_dict("records"), eager=ompi.eager_limit())
    runs = experiment.run(spec.make_spec(kernel="poisson", ntasks=2, trace=True, binding={"cpu_bind": "cores"},
                                         args={"n": 256, "grid": "1x2", "exchange": exchange, "iters": 50},
                                         repetitions=5, experiment="fidelity"), progress=False)
    # The least disturbed of five runs (the ranks' time switched out is smallest): a rank switched
    # out inside an MPI call makes the measurement longer in a way no network model contains.
    traces = [load_run(r.path) for r in runs]
    trace = min(traces, key=lambda t: rank_times(t)["not_running_ns"].sum())
    measured = split(trace, replay(trace, imb.ideal_model(ompi.eager_limit())))
    replayed = split(replay(trace, model, bursts="wall"))
    assert replayed.T_real == pytest.approx(measured.T_real, rel=0.15)
    five = split(trace, model=model)
    parts = five.T_comp + five.T_transfer + five.T_load + five.T_depend + five.T_rest
    assert parts == pytest.approx(five.T_real, rel=0.01)
