"""Chapter 4's experiments (break_it.py): sample efficiency, intervals, the sharded head-to-head's log, transfer."""

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from lib.placement import break_it as B
from lib.placement.experiment import EnvSpec, read_evaluation
from lib.placement.reinforce import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _res(step_lists):
    recs = [{"step_s": s} for s in step_lists]
    return SimpleNamespace(records=recs, top=[((0,), min(min(s) for s in step_lists))])


def test_samples_to_within_counts_placements_until_the_best_is_close():
    r = _res([[3.0, 2.5], [2.2, 2.4], [2.0, 2.1]])
    assert B.samples_to_within(r, 2.0, 0.02) == 6
    assert B.samples_to_within(r, 2.0, 0.11) == 4  # 2.2 <= 2.22
    assert B.samples_to_within(r, 1.0, 0.02) is None
    with pytest.raises(ValueError, match="tol 2"):
        B.samples_to_within(r, 2.0, 2)


def test_t_interval_by_hand():
    m, h = B.t_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and h == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert math.isnan(B.t_interval([5.0])[1])


def test_efficiency_uses_the_best_of_all_runs_and_never_averages_a_miss_as_its_budget():
    fast, slow = _res([[2.0, 3.0]]), _res([[3.0, 3.0], [2.5, 2.9]])
    ref, eff = B.efficiency({"a": [fast], "b": [slow]})
    assert ref == 2.0 and eff["a"]["samples"] == [2] and eff["b"]["samples"] == [None] and eff["b"]["reached"] == 0
    assert B.samples_text([2, None, 6], 8) == "2, > 8, 6"
    t = B.efficiency_table({"a": [fast, fast], "b": [slow, fast]}, single_s=2.2)
    assert t.rows[0][3] == "2 ± 0" and t.rows[1][3] == "-"  # no mean over a run that never got there
    assert t.rows[1][2] == "> 4, 2" and "of the 200.0 ms" in t.caption


def test_run_names_say_algorithm_and_policy():
    spec = EnvSpec()
    a = B.run_name(spec, TrainConfig(), True)
    p = B.run_name(spec, TrainConfig(algorithm="ppo", hidden=64), True)
    h = B.run_name(spec, TrainConfig(policy="hierarchical", n_groups=8), False)
    assert len({a, p, h}) == 3 and "_ppo4c0.2_h64_s0" in p and "_hier8" in h and a.endswith("_s0")


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    spec = EnvSpec(preset="ci", noise=True)
    return spec, B.train(spec, TrainConfig(n_iters=3, hidden=16, op_embed=4, dev_embed=4), out_dir=str(d))


def test_sharded_head_to_head_is_logged_and_read_back(ci_run):
    spec, run = ci_run
    h = B.sharded_head_to_head(run.path, replace(spec, env_seed=1), 1, 2, 2)
    sides = {e.side for e in h.entries}
    assert {"rl", "sharded_adamw"} <= sides and "single_gpu" not in sides
    header, logged, _ = read_evaluation(run.path[:-len(".jsonl")] + ".sharded.eval.jsonl")
    assert header["config"]["baseline"] == "sharded_adamw" and logged.to_dict() == h.to_dict()
    assert "sharded over all 4 GPUs" in h.source


def test_machine_transfer_rows_and_summary(ci_run):
    spec, run = ci_run
    rows = B.machine_transfer(run.path, spec, [0, 1], 1, 2, 2)
    assert [r["machine"] for r in rows] == [0, 1]
    for r in rows:
        assert r["gain_ms"] == pytest.approx(r["gpu_ms"] - r["rl_ms"])
        assert r["gain_z"] == pytest.approx(r["gain_ms"] / r["gain_se_ms"])
        assert r["gain_q_ms"] == pytest.approx(r["gpu_q_ms"] - r["rl_q_ms"])
        # the pick chooses its GPUs on each machine: never slower without noise than with them as trained
        assert r["gain_q_ms"] >= r["as_trained_q_ms"] - 0.5  # (up to a noisy selection's slip)
    assert rows[0]["gain_q_ms"] == pytest.approx(rows[0]["as_trained_q_ms"], abs=0.5)  # at home, alike
    row = lambda m, g, se: {"machine": m, "gain_ms": g, "gain_se_ms": se}
    s = B.transfer_summary([row(0, 10.0, 2.0), row(1, 4.0, 2.0), row(2, 2.0, 2.0)], 0)
    assert s["home_ms"] == 10.0 and s["away_ms"] == 3.0 and s["specific_share"] == pytest.approx(0.7)
    assert s["home_clear"] and s["away_se_ms"] == pytest.approx(2 ** 0.5)
    assert s["diff_z"] == pytest.approx(7.0 / (4 + 2) ** 0.5)
    qrow = lambda m, q, t: {**row(m, 1.0, 1.0), "gain_q_ms": q, "as_trained_q_ms": t}
    sq = B.transfer_summary([qrow(0, 3.0, 3.0), qrow(1, 2.0, -1.0), qrow(2, 4.0, 0.0)], 0)
    assert sq["home_q_ms"] == 3.0 and sq["away_q_ms"] == 3.0 and sq["specific_q_share"] == 0.0
    assert sq["away_trained_q_ms"] == -0.5 and sq["specific_trained_q_share"] == pytest.approx(3.5 / 3)
    noisy = B.transfer_summary([row(0, 10.0, 6.0), row(1, 4.0, 6.0)], 0)  # a home gain within 2 SE
    assert not noisy["home_clear"] and noisy["specific_share"] != noisy["specific_share"]  # NaN: no share


def test_tables_render():
    t = B.sharding_table(["4xT4-pcie"], preset="ci")
    assert len(t.rows) == 1 and "simulated" in t.caption
    from lib.placement.experiment import make_env

    f = B.fit_table(make_env(EnvSpec(preset="ci")))
    assert f.rows[-1][0] == "GPU 0 + sharded AdamW" and all(r[1] in ("yes", "no (out of memory)") for r in f.rows)


def test_verdict_table_and_clip_fractions(ci_run):
    spec, run = ci_run
    h = B.sharded_head_to_head(run.path, replace(spec, env_seed=2), 1, 2, 2, out_path=run.path + ".v.eval.jsonl")
    t = B.verdict_table({"ci": h})
    assert t.rows[0][0] == "ci" and t.rows[0][5] in ("RL wins", "RL loses", "no clear winner")
    with pytest.raises(ValueError, match="clip_fraction"):
        B.clip_fractions([run])
    fake = SimpleNamespace(records=[{"clip_fraction": 0.25}, {"clip_fraction": 0.75}])
    assert B.clip_fractions([fake]) == (0.5, 0.75)


def test_noiseless_table_resimulates_the_picks(ci_run):
    _, run = ci_run
    t = B.noiseless_table({"4xT4-pcie": run}, preset="ci")
    prof, one, sh, _, hand, rl, _ = t.rows[0]
    assert prof == "4xT4-pcie" and float(rl) > 0 and float(one) > 0 and float(sh) > 0


def test_best_so_far_figure_is_the_mean_curve():
    a, b = _res([[3.0, 2.0], [1.0, 4.0]]), _res([[5.0, 4.0], [3.0, 3.0]])
    fig = B.best_so_far_figure({"m": [a, b]}, "t")
    tr = fig.data[0]
    assert list(tr.x) == [2, 4] and list(tr.y) == [3000.0, 2000.0] and tr.name == "m"
    assert "mean of 2" in fig.layout.yaxis.title.text


def test_each_run_judged_on_a_machine_gets_its_own_noise(ci_run, tmp_path):
    """Same machine (speed factors), but two runs no longer share their noise draws; one run twice is the same."""
    import shutil

    from lib.placement.experiment import evaluate_run

    spec, run = ci_run
    twin = str(tmp_path / "twin.jsonl")
    shutil.copy(run.path, twin)
    where = replace(spec, noise=True, env_seed=7)
    args = (where, 1, 2, 2)
    a = evaluate_run(run.path, *args, phase_steps=1, out_path=str(tmp_path / "a.eval.jsonl"))[0]
    a2 = evaluate_run(run.path, *args, phase_steps=1, out_path=str(tmp_path / "a2.eval.jsonl"))[0]
    b = evaluate_run(twin, *args, phase_steps=1, out_path=str(tmp_path / "b.eval.jsonl"))[0]
    one = lambda h: h.entry("single_gpu").confirm_s
    assert one(a) == one(a2) and one(a) != one(b)
    from lib.placement.experiment import independent_noise, make_env

    env = make_env(where)
    factors = env.device_time_factors
    independent_noise(env, where, 0, twin)
    assert env.device_time_factors == factors == make_env(where).device_time_factors  # the same machine
