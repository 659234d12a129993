"""The demo class's "wrong" student plants one wrong latency: it must cost test-latency and
nothing else, on any machine's numbers. The unlabelled answer goes to the nearer latency (log
scale), so the planted value must never come nearer the unlabelled run than it was."""

from __future__ import annotations

import math
import random

from hpclab.grading import demo


def _nearest(latency_us: dict, unlabelled_us: float) -> str:
    return min(("shm", "tcp"), key=lambda r: abs(math.log(unlabelled_us / latency_us[r])))


def test_the_planted_shm_latency_is_wrong_and_leaves_the_unlabelled_answer():
    cell = demo._wrong_shm_latency("print(latency_us)")
    planted = cell.splitlines()[0]
    draw = random.Random(7)
    for _ in range(2000):
        shm, tcp = (10 ** draw.uniform(-1, 2) for _ in range(2))
        if abs(math.log(shm / tcp)) < 0.05:          # the lab says either answer counts then
            continue
        unlabelled = tcp * 10 ** draw.uniform(-0.5, 0.5)
        latency_us = {"shm": shm, "tcp": tcp}
        before = _nearest(latency_us, unlabelled)
        exec(planted, {"latency_us": latency_us})
        assert abs(latency_us["shm"] - shm) > 0.02 * shm          # test-latency fails
        if before == "tcp":
            assert _nearest(latency_us, unlabelled) == "tcp"     # test-unknown still passes
