"""The three estimates on paper (lib/straggler/estimates.py) against hand arithmetic and the exact model."""

import math

import pytest

from lib.straggler import estimates as est
from lib.straggler.model import (FailureModel, StepModel, checkpoint_shares, p_wait, step_efficiency,
                                 young_daly_min)
from lib.straggler.report import estimates_glue

FM = FailureModel()
M = FM.cluster_mtbf_min(16_384)


def test_wait_share_by_hand():
    assert est.slow_per_step(16_384) == pytest.approx(1.6384)
    assert est.wait_share(16_384) == pytest.approx(1 - math.exp(-1.6384))
    assert est.wait_share(16_384) == pytest.approx(p_wait(16_384), abs=1e-6)  # a slow GPU is always last


def test_healthy_late_is_about_ten_percent():
    assert est.healthy_late(16_384) == pytest.approx(0.01 * (math.log(16_384) + 0.5772), abs=1e-4)
    assert est.backup_ceiling(16_384, 328) == pytest.approx(step_efficiency(16_384, 328), abs=2e-3)
    assert est.backup_ceiling(16_384, 328) < 0.9


def test_mean_step_close_to_exact():
    assert StepModel().ideal_step_s / est.mean_step_s(16_384) == pytest.approx(step_efficiency(16_384), abs=0.01)


def test_young_daly_minimises_the_first_order_overhead():
    tau = young_daly_min(M)
    assert est.overhead(tau, M) < min(est.overhead(0.9 * tau, M), est.overhead(1.1 * tau, M))
    assert est.overhead(tau, M) == pytest.approx(math.sqrt(2 / M))
    exact = float(checkpoint_shares(tau, M)["kept"])
    assert est.kept_at_young_daly(M) == pytest.approx(exact, abs=0.01)


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="interval_min"):
        est.overhead(0, M)
    with pytest.raises(ValueError, match="n_gpus"):
        est.healthy_late(0)


def test_glue_texts():
    g = estimates_glue()
    assert (g["q_np"], g["q_wait"], g["q_late"], g["q_ceiling"], g["q_tau_min"]) == (
        "1.64", "81%", "10%", "90%", "19.3 min")
