"""lib/galvatron/practice_report.py and practice_figures.py: the ablation ends where practice is, every step
switches one mechanism on, fitted and held-out runs are apart; the pipeline event simulation agrees with
search/schedules.py's bubble and in-flight formulas; ZeRO's bars sum to zero.py's bytes."""

import math

import numpy as np
import pytest

from lib.galvatron import practice_figures as pf
from lib.galvatron import practice_report as pr
from lib.galvatron.published import to_config, to_job
from lib.galvatron.search import schedules as sch
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.search.rules import MECHANISM_FIELDS, MECHANISMS, PRACTICE, VLDB2023
from lib.galvatron.search.zero import state_bytes_per_param


@pytest.fixture(scope="module")
def runs():
    return pr.calibration_runs()


def test_ablation_steps_switch_one_mechanism_each_and_end_at_practice():
    steps = pr.ablation_rules()
    assert steps[0][1] == VLDB2023 and len(steps) == len(MECHANISMS) + 1
    for (_, a), (_, b), (_, fields, _) in zip(steps, steps[1:], MECHANISMS):
        changed = {f for f in MECHANISM_FIELDS if getattr(a, f) != getattr(b, f)}
        assert changed == set(fields)
    assert all(getattr(steps[-1][1], f) for f in MECHANISM_FIELDS)


def test_last_ablation_step_prices_every_run_as_practice(runs):
    from lib.galvatron.validate import estimate_run

    ab = pr.ablation(runs)
    for j, run in enumerate(runs):
        e = estimate_run(run, PRACTICE)            # practice as it applies to the run (its TP overlap)
        assert ab.estimate[-1, j] == pytest.approx(e["tokens_per_s_per_gpu"], rel=1e-12)
    assert ab.error.shape == (len(MECHANISMS) + 1, len(runs))


def test_summary_is_median_and_max_of_the_errors(runs):
    ab = pr.ablation(runs, pr.ablation_rules()[-2:])
    s = ab.summary()
    e = np.abs(ab.estimate / ab.published - 1)
    assert s["median"][1] == pytest.approx(np.median(e[1])) and s["max"][1] == pytest.approx(e[1].max())
    mask = np.arange(len(runs)) < 3
    assert ab.summary(mask)["n"] == 3 and ab.summary(mask)["max"][1] == pytest.approx(e[1, :3].max())


def test_fitted_runs_are_the_gpu_files_fitted_to_and_exist(runs):
    fitted = pr.fitted_runs()
    names = {r.name for r in runs}
    assert fitted and fitted < names          # some fitted, some held out
    table = pr.ablation_table(pr.ablation(runs, pr.ablation_rules()[-1:]), fitted)
    assert f"{len(fitted)} fitted" in " ".join(table.header)


def test_an_unpriceable_configuration_is_nan_not_an_error(runs):
    run = runs[0]
    cfg = run.config.model_copy(update={"cp": 2, "dp": run.config.dp // 2})
    odd = run.model_copy(update={"config": cfg})
    ab = pr.ablation([odd], [("vldb2023", VLDB2023), ("practice", PRACTICE)])
    assert math.isnan(ab.estimate[0, 0]) and np.isfinite(ab.estimate[1, 0])


def test_leave_one_out_rows_and_the_most_needed(runs):
    rows = pr.leave_one_out(runs)
    assert rows[0][0] is None and [r[0] for r in rows[1:]] == [n for n, _, _ in MECHANISMS]
    assert pr.most_needed(rows) == max(rows[1:], key=lambda r: r[1])[0]
    with pytest.raises(ValueError, match="no run 'nope'"):
        pr.picks(runs, ["nope"])


@pytest.mark.parametrize("pp,m,vp", [(2, 4, 1), (4, 8, 2), (4, 12, 3), (8, 16, 4), (3, 6, 2), (4, 4, 2)])
def test_event_simulation_agrees_with_the_schedule_formulas(pp, m, vp):
    for schedule, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", vp)):
        if schedule == "interleaved" and v == 1:
            continue
        ops = pf.pipeline_timeline(schedule, pp, m, v)
        assert len(ops) == 2 * pp * m * v
        assert pf.step_length(ops) == pytest.approx(sch.step_s(schedule, [3.0] * pp, m, v))
        bubble = pf.step_length(ops) / (3.0 * m) - 1
        assert bubble == pytest.approx(sch.bubble_fraction(schedule, pp, m, v))
        assert pf.peak_in_flight(ops, pp, v) == pytest.approx(
            [sch.in_flight(schedule, pp, m, r, v) for r in range(pp)])


def test_one_stage_never_runs_two_operations_at_once():
    ops = pf.pipeline_timeline("interleaved", 4, 8, 2)
    for r in range(4):
        mine = sorted((o.start, o.end) for o in ops if o.stage == r)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(mine, mine[1:]))


def test_bad_schedule_inputs_raise():
    with pytest.raises(ValueError, match="schedule must be one of"):
        pf.pipeline_timeline("zigzag", 4, 8)
    with pytest.raises(ValueError, match="multiple of pp"):
        pf.pipeline_timeline("interleaved", 4, 6, 2)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_bars_sum_to_zero_py(stage):
    assert sum(pf.zero_parts(stage, 8).values()) == pytest.approx(state_bytes_per_param(stage, 8, 2, 4, 12))


def test_sequence_parallelism_and_cp_cut_activations():
    r = pf.activation_rows(2048, 12288, 96, 4 * 12288)
    tp_only, sp = r["tp"]["TP only"], r["tp"]["TP + SP"]
    assert tp_only[0] == pytest.approx(sp[0])                 # at TP 1 SP changes nothing
    assert all(b < a for a, b in zip(tp_only[1:], sp[1:]))
    cp = list(r["cp"].values())
    assert all(b < a for a, b in zip(cp, cp[1:]))


def test_figures_build(runs):
    ab = pr.ablation(runs, pr.ablation_rules()[:1] + pr.ablation_rules()[-1:])
    for fig in (pf.timelines_figure(), pf.in_flight_figure(), pf.zero_figure(), pf.precision_figure(),
                pf.activations_figure(2048, 12288, 96, 4 * 12288, "GPT-3 175B"),
                pf.parity_figure(ab, (0, 1), pr.fitted_runs())):
        assert fig.data and fig.layout.title.text


def test_ablation_agrees_with_validate_ablation(runs):
    from lib.galvatron.validate import ablation as v_ablation

    ours, theirs = pr.ablation(runs), v_ablation(runs)
    s = ours.summary()
    assert len(theirs) == len(ours.steps)
    for i, row in enumerate(theirs):
        assert s["median"][i] == pytest.approx(row["median_abs_error"])
        assert s["max"][i] == pytest.approx(row["max_abs_error"])
        assert s["fits"][i] == row["fits"]
        assert ours.estimate[i] == pytest.approx(row["estimates"])


def test_breakdown_adds_up_to_the_step(runs):
    from lib.galvatron.validate import estimate_run

    for r in runs:
        e = estimate_run(r, PRACTICE)
        b = pr.breakdown(e)
        assert sum(b.values()) == pytest.approx(e["step_s"])
        assert abs(b["other"]) < 1e-6 * e["step_s"] and min(b.values()) >= -1e-9
    # by hand for a run without pipelining: m x layers x (fwd + bwd) of its GEMMs, its attention 3 x
    e = estimate_run({r.name: r for r in runs}["mcore-h100-1.7b"], PRACTICE)
    b = pr.breakdown(e)
    assert b["bubble"] == pytest.approx(0.0, abs=1e-12)
    assert b["gemm"] == pytest.approx(e["micro_batches"] * 24 * 3 * (e["fwd_s"] - e["attention_s"]))
    assert b["head"] == pytest.approx(e["micro_batches"] * e["head_s"])


def test_the_mcore_runs_at_micro_batch_one_expose_their_zero1_traffic(runs):
    """Why the fill matters (chapter 9): at micro-batch 1 (the old default) the 32B run spends over a third
    of its step on exposed ZeRO-1 messages; validate's fill (the fastest micro-batch that fits) hides them."""
    from lib.galvatron.search.efficiency import load_gpu
    from lib.galvatron.validate import estimate_run, fit_efficiency, with_efficiency

    p, k, _, _ = fit_efficiency(runs, "h100-sxm-80gb", fill="one")    # the constants of the old fill
    old = with_efficiency(load_gpu("h100-sxm-80gb"), p, k)
    r = {x.name: x for x in runs}["mcore-h100-32b"]
    one, search = estimate_run(r, PRACTICE, old, fill="one"), estimate_run(r, PRACTICE)
    assert pr.breakdown(one)["dp"] > 0.3 * one["step_s"]
    assert search["micro_batch"] > 1 and search["dp_s"] < 0.05 * search["step_s"]
    assert search["searched"]["micro_batch"] == search["micro_batch"]


def test_planner_fill_only_fills_what_is_null(runs):
    from lib.galvatron.validate import estimate_run

    by = {x.name: x for x in runs}
    stated = by["sc21-gpt-18.4b"]                         # micro-batch 8, stated
    assert estimate_run(stated, PRACTICE, fill="planner")["tokens_per_s_per_gpu"] == \
        estimate_run(stated, PRACTICE)["tokens_per_s_per_gpu"]
    llama = by["llama3-405b-16384-8192"]                  # 16 per rank on 16 stages: only 1 keeps m >= pp
    assert estimate_run(llama, PRACTICE, fill="planner")["micro_batch"] == 1
    with pytest.raises(ValueError, match="fill must be one of"):
        estimate_run(stated, PRACTICE, fill="auto")


def test_fill_what_if_the_old_defaults_push_the_h100_fit_to_its_bound(runs):
    """Refitted under the old default fill (micro-batch 1, plain 1F1B), the H100 peak fraction climbs to its
    bound and a Llama 3 run breaks the calibration bar; validate's search fill keeps both inside."""
    from lib.galvatron.search.efficiency import at_edge, load_gpu

    held = pr.calibration_runs(pr.CALIBRATION.with_name("heldout.json"))
    w = pr.fill_what_if(runs, held)
    p, k = w["constants"]["h100-sxm-80gb"]
    assert any("peak_fraction" in e for e in at_edge(p, k))
    g = load_gpu("h100-sxm-80gb")
    assert at_edge(g.peak_fraction, g.knee) == []
    assert w["summary"]["cal"]["search"][1] <= 0.25 < w["summary"]["cal"]["one"][1]
    assert w["summary"]["cal"]["search"][0] <= 0.10
    assert len(w["rows"]) == len(runs) + len(held)

def test_attention_shares_by_hand():
    from lib.galvatron import practice_figures as pf
    from lib.galvatron.search.efficiency import efficiency, load_gpu

    g = load_gpu("h100-sxm-80gb")
    r = pf.attention_shares(g, 4096, seqs=(4096, 32768))
    # 4096 tokens, h = 4096: causal attention 2 s h = 2 * 4096 * 4096 FLOPs per token, the GEMMs 24 h^2
    a, m = 2 * 4096 * 4096, 24 * 4096 ** 2
    assert r["gemm rate"][0] == pytest.approx(a / (a + m))                   # same rate: a FLOP share
    eff = efficiency(g, 4096)
    assert r["kernel rate"][0] == pytest.approx((a / 0.35) / (a / 0.35 + m / eff))
    assert r["kernel rate"][1] > r["gemm rate"][1] > r["gemm rate"][0]
    fig = pf.attention_figure(g, 4096, "a 4096-wide layer", seqs=(4096, 32768))
    assert len(fig.data) == 2 and "35%" in fig.data[1].name
