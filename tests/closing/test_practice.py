"""Tests of the chain under rules='practice' (lib/closing/practice_plan.py; written by h27b for its
practice.py, which practice_plan.py replaces): the chain takes the practice planner's layout and step; its split
of the step, its replica and its errors. Skipped where the search package has no practice planner."""

import pytest

from lib.closing import run as cr
from lib.closing.llama3 import llama3_step_s

practice_search = pytest.importorskip("lib.galvatron.search.practice_search")


@pytest.fixture(scope="module")
def practice_run():
    return cr.one_run(cr.Job(rules="practice"))


def test_the_chain_takes_the_practice_planners_layout_and_step(practice_run):
    from lib.closing.practice_plan import practice_job

    e = practice_run.est
    cfg, est, _ = practice_search.search_practice(practice_job(practice_run.job), "practice")
    assert (e.tp, e.cp, e.pp, e.dp) == (cfg.tp, cfg.cp, cfg.pp, cfg.dp)
    assert e.tp * e.cp * e.pp * e.dp == 16_384 and e.replica_gpus == e.tp * e.cp * e.pp
    assert e.step_s == pytest.approx(est["step_s"]) and e.compute_s == pytest.approx(est["pipeline_s"])
    assert e.sync_s == pytest.approx(est["step_s"] - est["pipeline_s"]) and e.sync_s >= 0
    assert e.mem_gb * 2**30 == pytest.approx(est["peak_bytes"])
    # far nearer Meta's step than the galvatron2 rules' (about three times slower)
    assert 0.5 < e.step_s / llama3_step_s() < 1.5


def test_the_practice_step_is_mostly_pipeline_so_stragglers_cost_more(practice_run):
    galvatron2 = cr.one_run(cr.Job())
    assert practice_run.est.sync_s < practice_run.est.compute_s
    assert practice_run.eff_no_backup < galvatron2.eff_no_backup
    assert practice_run.backup_gpus % practice_run.est.replica_gpus == 0


def test_practice_is_a_rule_name_and_a_cluster_without_a_gpu_profile_is_refused():
    assert "practice" in cr.rule_names()
    from lib.closing.practice_plan import practice_job

    job = cr.Job(rules="practice")
    object.__setattr__(job, "cluster", "no-such-cluster")  # past Job's own check: practice_job's
    with pytest.raises(ValueError, match="cluster must be one of"):
        practice_job(job)
