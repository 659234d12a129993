"""A real traced Poisson run, replayed under a network model fitted to this machine's own
ping-pong, takes as long as it really took (within 10 %), and its split adds up (within 1 %)."""

from __future__ import annotations

import pytest

from hpclab import experiment, spec
from hpclab import imbalance as imb
from hpclab.trace.load import load_run
from hpclab.trace.replay import replay
from hpclab.trace.split import split

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("exchange", ["blocking", "nonblocking"])
def test_replay_under_fitted_model_reproduces_the_measured_time(cluster, tmp_path, monkeypatch, exchange):
    """Does replaying a measured trace with a model fitted to a measured ping-pong give back the measured run time?"""
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    [pp] = experiment.run(spec.make_spec(kernel="pingpong", ntasks=2, args={"max_bytes": 1 << 16},
                                         binding={"cpu_bind": "cores"}, experiment="fidelity"), progress=False)
    model = imb.pingpong_model(pp.table()[["bytes", "t_usec"]].to_dict("records"), eager=imb.eager_limit())
    [run] = experiment.run(spec.make_spec(kernel="poisson", ntasks=2, trace=True, binding={"cpu_bind": "cores"},
                                          args={"n": 256, "grid": "1x2", "exchange": exchange, "iters": 50},
                                          experiment="fidelity"), progress=False)
    trace = load_run(run.path)
    measured = split(trace, replay(trace, imb.ideal_model(imb.eager_limit())))
    replayed = split(replay(trace, model))
    assert replayed.T_real == pytest.approx(measured.T_real, rel=0.10)
    parts = measured.T_comp + measured.T_transfer + measured.T_load + measured.T_depend
    assert parts == pytest.approx(measured.T_real, rel=0.01)
