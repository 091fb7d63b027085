"""Tests for lib/closing/sensitivity.py and llama3.py: a step at Meta's throughput is derived from the quoted
figures; stage 2 under each step (Meta's, split two ways, and the planner's pick) and tail is the chain
recomputed; the orderings the chapter states hold."""

from dataclasses import replace

import pytest

from lib.closing import llama3 as l3
from lib.closing.exercises import CHAPTER_JOB, run_of
from lib.closing.run import Job, one_run
from lib.closing.meta_run import meta_run, meta_start, split_step
from lib.closing.sensitivity import PAGE_TAIL, STEPS, TAILS, sensitivity
from lib.galvatron.search.analytic import SHAPES
from lib.straggler.model import StepModel


def test_meta_step_from_its_quoted_throughput():
    sh = SHAPES["llama3-405b"]
    per_token = 6 * sh.n_params() + 12 * sh.n_layers * sh.seq_len * sh.hidden  # 6N + attention (MFU's)
    assert l3.model_flops_per_token("llama3-405b") == pytest.approx(per_token)
    # NVIDIA DGXC's formula for a 8,192-token sequence (data/published_runs/): 2.17e16
    assert per_token * 8192 == pytest.approx(2.17e16, rel=0.01)
    assert l3.llama3_step_s() == pytest.approx(per_token * 2048 * 8192 / (16_384 * 400e12))
    assert 6.5 < l3.llama3_step_s() < 7.0
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


def test_sensitivity_is_the_chain_under_each_step_and_tail():
    pick = run_of(CHAPTER_JOB)
    start = meta_start(CHAPTER_JOB)
    cases = sensitivity(start, pick)
    assert [(c.step, c.tail.name) for c in cases] == [(s, t.name) for s in STEPS for t in TAILS]
    by = {(c.step, c.tail.name): c.run for c in cases}
    page_pick = by["the planner's pick", PAGE_TAIL.name]
    assert page_pick.eff_no_backup == pytest.approx(pick.eff_no_backup)  # the page's tail is the chapter's
    for gap, step in (("compute", STEPS[0]), ("communication", STEPS[1])):
        r = by[step, PAGE_TAIL.name]
        assert r.est == split_step(start, gap)
        assert r.eff_no_backup == pytest.approx(meta_run(CHAPTER_JOB, gap).eff_no_backup)
        assert r.backup_gpus == 3 * 128  # ceil(2% of 128) of Meta's replicas of 128 GPUs
    # the chapter's numbers (a regression guard): the gap (0.002 s) as compute or as communication keeps
    # 70.9% with the page's tail, the pick 70.5%; backups: Meta's 86.4%, the pick's 81.3%
    m_c, m_x = by[STEPS[0], PAGE_TAIL.name], by[STEPS[1], PAGE_TAIL.name]
    assert m_c.eff_no_backup == pytest.approx(0.709, abs=0.005)
    assert m_x.eff_no_backup == pytest.approx(0.709, abs=0.005)
    assert abs(m_c.eff_no_backup - m_x.eff_no_backup) < 1e-3     # too small a gap for its split to matter
    # more communication dilutes the stragglers' tax: where Meta's step is 10% longer than the model's
    longer = replace(start, reported_tokens_s=0.9 * start.reported_tokens_s)
    assert (one_run(CHAPTER_JOB, split_step(longer, "compute")).eff_no_backup
            < one_run(CHAPTER_JOB, split_step(longer, "communication")).eff_no_backup)
    assert min(m_c.eff_backup, m_x.eff_backup) > page_pick.eff_backup  # smaller replicas, cheaper backups
    for c in cases:  # the failure stage without backups does not depend on the step model
        assert c.run.fail_no_backup["kept"] == pytest.approx(pick.fail_no_backup["kept"])
    by_step = {}
    for c in cases:
        by_step.setdefault(c.step, []).append(c.run.eff_no_backup)
    for effs in by_step.values():
        assert effs[0] > effs[1] > effs[2]  # milder > page's > harsher
