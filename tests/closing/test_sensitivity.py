"""Tests for lib/closing/sensitivity.py and llama3.py: a step at Meta's throughput is derived from the quoted
figures; stage 2 under each step and tail is the chain recomputed; the orderings the chapter states hold."""

import pytest

from lib.closing import llama3 as l3
from lib.closing.exercises import run_of
from lib.closing.run import Job, one_run
from lib.closing.sensitivity import PAGE_TAIL, TAILS, meta_estimate, sensitivity
from lib.galvatron.search.analytic import SHAPES
from lib.straggler.model import StepModel


def test_meta_step_from_its_quoted_throughput():
    params = SHAPES["llama3-405b"].n_params()
    assert l3.llama3_step_s() == pytest.approx(6 * params * 2048 * 8192 / (16_384 * 400e12))
    assert 6.0 < l3.llama3_step_s() < 6.5
    assert l3.llama3_step_s(8192) == pytest.approx(2 * l3.llama3_step_s() * 400 / 430)
    assert l3.llama3_dp(16_384) == 128 and l3.llama3_dp(8192) == 64
    for bad, call in ((1000, l3.llama3_step_s), (100, l3.llama3_dp)):
        with pytest.raises(ValueError, match="n_gpus"):
            call(bad)


def test_the_pages_tail_is_part_threes_default():
    d = StepModel()
    assert (PAGE_TAIL.p_slow, PAGE_TAIL.slow_factor, PAGE_TAIL.jitter) == (d.p_slow, d.slow_factor, d.jitter)
    milder, page, harsher = TAILS
    assert milder.p_slow < page.p_slow < harsher.p_slow and milder.slow_factor < page.slow_factor
    assert page.text() == "1 in 10,000 slow, 1.5x, jitter 1.0%"


def test_meta_estimate_keeps_the_computation_and_takes_metas_layout():
    r = run_of(Job())
    m = meta_estimate(r)
    assert m.compute_s == r.est.compute_s and m.step_s == pytest.approx(l3.llama3_step_s())
    assert (m.tp, m.pp, m.dp, m.replica_gpus) == (8, 16, 128, 128)
    assert 0.9 < m.sync_s < 1.3  # about 1 s of communication beside about 5 s of computation
    with pytest.raises(ValueError, match="tflops_per_gpu"):
        meta_estimate(r, tflops_per_gpu=2000.0)


def test_sensitivity_is_the_chain_under_each_step_and_tail():
    r = run_of(Job())
    cases = sensitivity(r)
    assert [(c.step, c.tail.name) for c in cases][:3] == [("the plan's", t.name) for t in TAILS]
    page_plan = next(c.run for c in cases if c.step == "the plan's" and c.tail is PAGE_TAIL)
    assert page_plan.eff_no_backup == pytest.approx(r.eff_no_backup)  # the page's tail is the chapter's run
    page_meta = next(c.run for c in cases if c.step != "the plan's" and c.tail is PAGE_TAIL)
    assert page_meta.eff_no_backup == pytest.approx(one_run(r.job, meta_estimate(r)).eff_no_backup)
    assert page_meta.backup_gpus == 3 * 128  # ceil(2% of 128) replicas of 128 GPUs
    # a faster step: stragglers cost more (the issue's ~73% and ~69%)
    assert page_meta.eff_no_backup == pytest.approx(0.733, abs=0.01)
    assert page_meta.goodput_no_backup == pytest.approx(0.697, abs=0.01)
    for c in cases:  # the failure stage does not depend on the step model
        assert c.run.fail_no_backup["kept"] == pytest.approx(r.fail_no_backup["kept"])
    by_tail = {}
    for c in cases:
        by_tail.setdefault(c.step, []).append(c.run.eff_no_backup)
    for effs in by_tail.values():
        assert effs[0] > effs[1] > effs[2]  # milder > page's > harsher
