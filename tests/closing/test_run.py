"""Tests for lib/closing/run.py: the goodput is the product of its stages, recomputed here from lib.straggler
directly; backups are whole data-parallel replicas; the 16,384-GPU cluster is searchable; bad inputs are one
line naming the field."""

import math
from dataclasses import replace

import pytest

from lib.closing import run as cr
from lib.closing.exercises import run_of
from lib.galvatron.search.analytic import SHAPES
from lib.straggler import calibration
from lib.straggler import model as sm


@pytest.fixture(scope="module")
def default():
    return run_of(cr.Job())


def test_goodput_is_kept_share_times_step_efficiency(default):
    r, j, e = default, default.job, default.est
    step = sm.StepModel(compute_s=e.compute_s, jitter=j.jitter, p_slow=j.p_slow, slow_factor=j.slow_factor,
                        sync_s=e.step_s - e.compute_s)
    eff = sm.step_efficiency(j.n_gpus, 0, step)
    ckpt_min = 16 * SHAPES[j.model].n_params() / (j.storage_bw_gb_per_s * 1e9) / 60
    assert r.fail_no_backup["checkpoint_min"] == pytest.approx(ckpt_min, rel=0.01)
    mtbf = j.per_gpu_mtbf_h * 60 / j.n_gpus
    tau = math.sqrt(2 * ckpt_min * mtbf)
    kept = sm.checkpoint_shares(tau, mtbf, ckpt_min, j.restart_min)["kept"]
    assert r.eff_no_backup == pytest.approx(eff, rel=1e-9)
    assert r.goodput_no_backup == pytest.approx(kept * eff, rel=1e-3)
    assert 0.5 < r.goodput_no_backup < r.eff_no_backup < 1


def test_backups_are_whole_data_parallel_replicas(default):
    r, j, e = default, default.job, default.est
    b = math.ceil(round(j.backup_share * e.dp, 9))
    assert r.backup_gpus == b * e.tp * e.pp
    n, extra = j.n_gpus, r.backup_gpus
    step = cr.step_model(j, e)
    # the expected step sum written out: Poisson((N + extra) p) slow GPUs, the b slowest replicas dropped
    lam = (n + extra) * step.p_slow
    e_step = step.sync_s + sum(math.exp(s * math.log(lam) - lam - math.lgamma(s + 1))
                               * sm.expected_max_s(n, max(s - b, 0), step) for s in range(60))
    assert r.eff_backup == pytest.approx(step.ideal_step_s / e_step * n / (n + extra), rel=1e-6)
    # backup GPUs fail too: the production model's rate, N^alpha from its 16,384-GPU reference
    alpha = calibration.size_law()[0]
    mtbf_b = j.per_gpu_mtbf_h * 60 / 16_384 * (16_384 / (n + extra)) ** alpha
    assert r.fail_backup["mtbf_min"] == pytest.approx(mtbf_b)
    assert r.goodput_backup == pytest.approx(r.fail_backup["kept"] * r.eff_backup)


def test_a_replica_of_many_gpus_makes_backups_dearer(default):
    e = default.est
    wide = replace(e, tp=8, pp=16, dp=max(e.dp // (16 * 8 // e.replica_gpus), 1))
    assert cr.backup_replicas(default.job, wide) * wide.replica_gpus >= default.backup_gpus
    assert cr.step_efficiency(default.job, wide, True) < cr.step_efficiency(default.job, e, True)


def test_the_16k_cluster_is_searchable():
    r = cr.one_run(cr.Job(n_gpus=16_384))
    e = r.est
    assert e.tp * e.pp * e.dp == 16_384 and e.tp <= 8
    assert e.mem_gb <= r.job.budget_gb and e.search_s <= 60
    assert r.job.global_bsz == 2048  # Llama 3 405B's 16M tokens of 8,192
    assert r.eff_backup > r.eff_no_backup  # at this scale backups pay for themselves


@pytest.mark.parametrize("field, bad", [
    ("model", "llama3-1t"), ("n_gpus", 1000), ("n_gpus", 0), ("n_gpus", 32768), ("tokens_per_gpu", 0),
    ("tokens_per_gpu", 100), ("budget_gb", -1.0), ("storage_bw_gb_per_s", math.inf), ("per_gpu_mtbf_h", 0.0),
    ("restart_min", -1.0), ("backup_share", 1.5), ("p_slow", True), ("slow_factor", 0.5), ("max_tp", 3),
    ("cluster", "tpu-pod"), ("failures", "weibull"),
])
def test_bad_inputs_name_the_field(field, bad):
    kwargs = {field: bad}
    if (field, bad) == ("tokens_per_gpu", 100):
        kwargs["n_gpus"] = 256  # 100 x 256 tokens are not whole sequences (100 x 16,384 would be)
    with pytest.raises(ValueError) as e:
        cr.Job(**kwargs)
    msg = str(e.value)
    assert "\n" not in msg
    assert field in msg or (field == "tokens_per_gpu" and "tokens_per_gpu" in msg)


def test_a_budget_no_plan_fits_is_one_line():
    with pytest.raises(ValueError, match="budget_gb=4") as e:
        cr.search_plan(cr.Job(n_gpus=256, budget_gb=4.0))
    assert "\n" not in str(e.value)


def test_the_cost_rules_are_a_parameter_and_reach_the_search():
    assert cr.Job().rules == "galvatron2" and cr.Job().n_gpus == 16_384
    with pytest.raises(ValueError, match="rules must be one of") as e:
        cr.Job(rules="nonsense")
    assert "\n" not in str(e.value)


def test_the_jobs_rules_reach_every_search(monkeypatch):
    seen, real = [], cr.search

    def spy(*args, **kwargs):
        seen.append(kwargs.get("rules"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cr, "search", spy)
    cr.search_plan(cr.Job(n_gpus=256, model="llama3-8b", tokens_per_gpu=8192, rules="vldb2023"))
    assert seen and set(seen) == {"vldb2023"}


def test_the_failure_stage_takes_the_production_model_and_the_page_is_a_switch():
    """At 16,384 H100s both models give Llama 3's rate (it was measured there); below, the production model
    fails more often (N^alpha, alpha < 1); the job's per-GPU MTBF scales either; the restart stays fixed."""
    prod, page = cr.Job(), cr.Job(failures="page")
    assert prod.failures == "production"
    assert cr.cluster_mtbf_min(prod, 16_384) == pytest.approx(cr.cluster_mtbf_min(page, 16_384), rel=1e-12)
    assert cr.cluster_mtbf_min(page, 1024) == pytest.approx(page.per_gpu_mtbf_h * 60 / 1024)
    alpha = calibration.size_law()[0]
    assert cr.cluster_mtbf_min(prod, 1024) == pytest.approx(prod.per_gpu_mtbf_h * 60 / 16_384 * 16 ** alpha)
    assert cr.cluster_mtbf_min(prod, 1024) < cr.cluster_mtbf_min(page, 1024) / 1.5
    assert cr.cluster_mtbf_min(prod, 20_000) > cr.cluster_mtbf_min(page, 20_000)  # grows slower than N
    from lib.straggler import predict
    from lib.straggler.switches import PRODUCTION

    for n in (8, 1024, 16_384, 16_768, 100_000):  # Part III's own function, at the H100's own rate
        assert cr.cluster_mtbf_min(prod, n) == pytest.approx(predict.mtbf_min("h100-sxm-80gb", n, PRODUCTION))
    twice = replace(prod, per_gpu_mtbf_h=2 * prod.per_gpu_mtbf_h)
    assert cr.cluster_mtbf_min(twice, 1024) == pytest.approx(2 * cr.cluster_mtbf_min(prod, 1024))
    with pytest.raises(ValueError, match="n_gpus"):
        cr.cluster_mtbf_min(prod, 0)
    est = run_of(cr.Job(n_gpus=1024)).est
    a, b = cr.failure_stage(cr.Job(n_gpus=1024), est, False), cr.failure_stage(
        cr.Job(n_gpus=1024, failures="page"), est, False)
    assert a["mtbf_min"] < b["mtbf_min"] and a["kept"] < b["kept"]
