"""The imbalance lessons' fidelity rows (hpclab.course.lessons.imbalance: imbalance_split,
nonblocking_dependency, mapping_messages, mapping_time, grid_2d_vs_1d): each verdict follows from the
numbers, 'yes' only for a measured effect the course's statistics decide (paired rounds where the
runs alternated) or an exact count, model support is 'predicted', and what this machine cannot show
is 'not shown'."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pandas as pd

from hpclab.course.lessons import imbalance as lesson


def test_mapping_messages_needs_exact_counts_and_fewer_with_blocks():
    """Exact traced counts, fewer with the blocked mapping: 'yes' (an exact count); a count off by one: 'partly'."""
    counts = pd.DataFrame({
        "mapping": ["linear", "blocked"], "run": ["r1", "r2"], "ranks where mapped": [True, True],
        "inter-node messages, predicted": [1608, 804], "inter-node messages, traced": [1608, 804]})
    row = lesson.mapping_messages(counts)
    assert row.reproduced == "yes" and row.evidence == "measured" and "2.0x" in row.here and row.runs == ["r1", "r2"]
    assert "exact count" in row.why
    off = counts.assign(**{"inter-node messages, traced": [1608, 805]})
    assert lesson.mapping_messages(off).reproduced == "partly"
    same = counts.assign(**{"inter-node messages, traced": [804, 804], "inter-node messages, predicted": [804, 804]})
    assert lesson.mapping_messages(same).reproduced == "no"
    assert lesson.mapping_messages(pd.DataFrame()).reproduced == "not shown"


def test_mapping_messages_seed_quotes_boundary_lines_not_the_1d_comparison():
    """Does the claim quote the seed's boundary lines for the mappings, and place its '16X and 17X'
    where the seed has it (2D against 1D), instead of calling it the blocked mapping's gain?"""
    seed = lesson.MAPPING_MESSAGES.seed
    assert "16 or 17 boundary" in seed and "4 (vertical) and 6 (horizontal)" in seed
    assert "compares the 2D decomposition with the 1D one" in seed and "16.5x" not in seed


def _subdomains(strip_ns, tile_ns):
    """subdomain_table rows: round i of the strip and of the tile ran together."""
    rows = [{"case": "1D 1x384", "run": f"s{i}", "repetition": i + 1, "ns_per_point": v} for i, v in enumerate(strip_ns)]
    rows += [{"case": "2D 24x16", "run": f"t{i}", "repetition": i + 1, "ns_per_point": v} for i, v in enumerate(tile_ns)]
    return pd.DataFrame(rows)


TILE = [2.3, 2.5, 2.2, 2.6, 2.4, 2.3, 2.5]


def test_grid_row_is_decided_by_paired_rounds():
    """Seven rounds, the strip about 2.5x slower in each: 'yes', decided, paired, labelled as one
    rank per subdomain; the strip within a few % of the tile: 'no' (equivalent); noisy rounds
    either way: 'partly' (undecided); too few rounds: 'partly'; the strip faster: 'no'."""
    slow = [5.8, 6.1, 5.6, 6.4, 5.9, 5.7, 6.2]
    yes = lesson.grid_2d_vs_1d(_subdomains(slow, TILE))
    assert yes.reproduced == "yes" and yes.evidence == "measured" and len(yes.runs) == 14
    assert "one rank per subdomain" in yes.here and "7 paired runs" in yes.here and "seed 2.5" in yes.here
    same = lesson.grid_2d_vs_1d(_subdomains([t * f for t, f in zip(TILE, (1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01))], TILE))
    assert same.reproduced == "no" and "no difference larger than 5 %" in same.here
    noisy = [t * f for t, f in zip(TILE, (1.6, 0.7, 1.5, 0.8, 1.4, 0.9, 1.3))]
    assert lesson.grid_2d_vs_1d(_subdomains(noisy, TILE)).reproduced == "partly"
    assert lesson.grid_2d_vs_1d(_subdomains(slow[:3], TILE[:3])).reproduced == "partly"
    assert lesson.grid_2d_vs_1d(_subdomains(TILE, slow)).reproduced == "no"
    assert lesson.grid_2d_vs_1d(_subdomains([], [2.5])).reproduced == "not shown"


NB = [42.0, 38.5, 45.1, 40.2, 36.9, 44.0, 39.3]


def _dep(naive_real, nb_real, chain=(0.047, 0.0127)):
    n, m = len(naive_real), len(nb_real)
    return pd.DataFrame({"exchange": ["naive"] * n + ["nonblocking"] * m, "ranks": 2,
                         "repetition": list(range(1, n + 1)) + list(range(1, m + 1)),
                         "T_real": list(naive_real) + list(nb_real),
                         "T_chain": [chain[0]] * n + [chain[1]] * m})


def test_dependency_row_is_measured_and_decided_by_paired_rounds():
    """Seven rounds, the naive exchange 15-45 % slower in each: 'yes', measured, with the replay's
    chain labelled as a prediction; the same rounds swapped: 'no'; rounds within a few %: 'no'
    (equivalent); noisy rounds the statistics cannot decide: 'predicted' from a 3.7x replayed
    chain, 'partly' from a small one, 'no' without a model; one exchange missing: 'not shown'."""
    slower = [n * f for n, f in zip(NB, (1.3, 1.45, 1.15, 1.35, 1.4, 1.2, 1.3))]
    yes = lesson.nonblocking_dependency(_dep(slower, NB), ["a", "b"], setting="2 one-core virtual nodes")
    assert yes.reproduced == "yes" and yes.evidence == "measured" and "7 paired runs" in yes.here
    assert "3.7x" in yes.prediction and "a prediction" in yes.prediction and "virtual nodes" in yes.here
    assert lesson.nonblocking_dependency(_dep(NB, slower)).reproduced == "no"
    same = lesson.nonblocking_dependency(_dep([n * f for n, f in zip(NB, (1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01))], NB))
    assert same.reproduced == "no" and "same time" in same.why
    noisy = [n * f for n, f in zip(NB, (1.5, 0.8, 1.4, 0.85, 1.3, 0.9, 1.2))]
    predicted = lesson.nonblocking_dependency(_dep(noisy, NB))
    assert predicted.reproduced == "predicted" and predicted.evidence == "replayed" and "cannot decide" in predicted.why
    small = lesson.nonblocking_dependency(_dep(noisy, NB, chain=(0.012, 0.01)))
    assert small.reproduced == "partly" and small.evidence == "replayed"
    bare = lesson.nonblocking_dependency(_dep(noisy, NB).drop(columns="T_chain"))
    assert bare.reproduced == "no" and bare.evidence == "measured"
    assert lesson.nonblocking_dependency(_dep([1.5], [])).reproduced == "not shown"


def _table(rows, ranks=2):
    out = []
    for comp, transfer, load, depend, rest in rows:
        total = comp + transfer + load + depend + rest
        out.append({"label": "x", "ranks": ranks, "T_real": total, "T_model": total - rest, "T_comp": comp,
                    "T_transfer": transfer, "T_load": load, "T_depend": depend, "T_rest": rest})
    return pd.DataFrame(out)


def test_imbalance_split_measured_on_dedicated_cores_is_partly_an_engineered_case():
    """A core per rank: the lesson's engineered case, not the seed's 384 ranks, so 'partly' once
    the parts add up, whatever leads, saying which parts lead and in how many runs compute and
    transfer are the two largest; parts that do not add up: 'no'."""
    good = [(50, 30, 10, 5, 5), (48, 32, 10, 4, 6), (52, 28, 11, 5, 4)]
    row = lesson.imbalance_split(_table(good), "2x1 naive", oversubscribed=False, setting="2 one-core virtual nodes")
    assert row.reproduced == "partly" and row.evidence == "measured" and "virtual nodes" in row.here
    assert "engineered 2-rank case" in row.why and "384 ranks" in row.why and "3 of 3 runs" in row.why
    led = lesson.imbalance_split(_table([(50, 10, 30, 5, 5)] * 3), "x", False)
    assert led.reproduced == "partly" and "compute and load imbalance lead" in led.why and "0 of 3 runs" in led.why
    broken = _table(good).assign(T_real=lambda t: t["T_real"] * 2)
    assert lesson.imbalance_split(broken, "x", False).reproduced == "no"


def test_a_model_that_over_predicts_the_transfer_shows_a_negative_rest():
    """A negative rest (the model's replay longer than the run, as a fitted 1 Gb/s link gave here:
    rest -44 %) still adds up: 'partly', with the negative rest in the row."""
    over = [(62, 64, 17, 0, -43), (60, 66, 18, 0, -44), (63, 63, 16, 0, -42)]
    row = lesson.imbalance_split(_table(over), "2x1 naive", oversubscribed=False)
    assert row.reproduced == "partly" and "rest -44% to -42%" in row.here


def test_imbalance_split_oversubscribed_is_a_prediction_from_the_replay():
    """4 ranks on 2 cores, 65 % rest: the replay's parts (compute and transfer leading) make it
    'predicted' with evidence 'replayed', never 'yes'; parts that do not add up: 'no'."""
    crowded = _table([(20, 8, 5, 2, 65)] * 3, ranks=4)
    row = lesson.imbalance_split(crowded, "2x2", oversubscribed=True)
    assert row.reproduced == "predicted" and row.evidence == "replayed" and "rest 65%" in row.here
    assert "of T_model" in row.prediction
    broken = crowded.assign(T_real=crowded["T_real"] * 2)
    assert lesson.imbalance_split(broken, "2x2", True).reproduced == "no"


def _sim(t_ms):
    return NS(split=NS(T_real=t_ms * 10 * 1e6), iterations=10)


def test_mapping_time_is_not_shown_on_shared_cores_and_decided_with_a_core_per_rank():
    """More ranks than cores: 'not shown', the simulation in the prediction column (naming the
    fastest simulated case when it is not the blocked mapping). A core per rank: seven paired
    rounds decide ('yes' when blocked is faster; 'partly' when undecided; 'no' when equivalent).
    Without measured runs a 20 % simulated gain is 'predicted', a flat one 'no'."""
    sims = {"2D 24x16": _sim(1.0), "2D 24x16 blocked mapping": _sim(0.8), "1D 384x1": _sim(0.7)}
    linear = [5.0, 5.4, 5.2, 5.1, 5.3, 5.2, 5.5]

    def measured(blocked):
        return pd.DataFrame({"mapping": ["linear"] * 7 + ["blocked"] * 7, "run": [f"r{i}" for i in range(14)],
                             "repetition": list(range(1, 8)) * 2, "ms per iteration": linear + list(blocked)})

    faster = [v * 0.8 for v in linear]
    shared = lesson.mapping_time(sims, measured(faster), oversubscribed=True)
    assert shared.reproduced == "not shown" and "waiting for a core" in shared.here
    assert "1D 384x1" in shared.prediction and "by far the best" in shared.prediction
    row = lesson.mapping_time(sims, measured(faster))
    assert row.reproduced == "yes" and row.evidence == "measured" and "7 paired runs" in row.here
    noisy = [v * f for v, f in zip(linear, (0.7, 1.3, 0.8, 1.2, 0.75, 1.25, 1.0))]
    assert lesson.mapping_time(sims, measured(noisy)).reproduced == "partly"
    same = [v * f for v, f in zip(linear, (1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01))]
    assert lesson.mapping_time(sims, measured(same)).reproduced == "no"
    sim_only = lesson.mapping_time(sims)
    assert sim_only.reproduced == "predicted" and sim_only.evidence == "simulated"
    flat = {"2D 24x16": _sim(1.0), "2D 24x16 blocked mapping": _sim(1.0)}
    assert lesson.mapping_time(flat).reproduced == "no"


def test_mapping_time_gives_no_prediction_the_port_check_does_not_keep():
    """One position on the simulation: when port_check does not keep a mapping's simulated time,
    the row carries no prediction from it, and without measured runs it is 'not shown'; kept, the
    prediction is there."""
    sims = {"2D 24x16": _sim(1.0), "2D 24x16 blocked mapping": _sim(0.8)}
    check = pd.DataFrame({"transfer / bound": [1.02, 3.5], "kept as prediction": [True, False]},
                         index=["2D 24x16", "2D 24x16 blocked mapping"])
    row = lesson.mapping_time(sims, check=check)
    assert row.reproduced == "not shown" and row.prediction.startswith("none:") and "blocked mapping" in row.prediction
    kept = check.assign(**{"kept as prediction": [True, True]})
    assert lesson.mapping_time(sims, check=kept).reproduced == "predicted"
    assert "Both mappings stay within the check's bound (2D 24x16 1.02x" in lesson.mapping_kept_text(kept)
    assert "no prediction" in lesson.mapping_kept_text(check)


def test_the_subdomain_takeaway_says_what_the_decision_says():
    slow = [5.8, 6.1, 5.6, 6.4, 5.9, 5.7, 6.2]
    assert "compute 2.5x slower per point" in lesson.subdomain_takeaway(_subdomains(slow, TILE))
    same = [t * f for t, f in zip(TILE, (1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01))]
    assert "as fast per point" in lesson.subdomain_takeaway(_subdomains(same, TILE))
    noisy = [t * f for t, f in zip(TILE, (1.6, 0.7, 1.5, 0.8, 1.4, 0.9, 1.3))]
    assert lesson.subdomain_takeaway(_subdomains(noisy, TILE)).startswith("This machine cannot tell")
