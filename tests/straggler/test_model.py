"""The step model and the exact expected values of lib/straggler/model.py, against the spec's numbers
(specs/straggler.md §5-§7, §10), independent integrations, brute force and Monte Carlo."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.straggler.model import (PER_GPU_MTBF_H, FailureModel, StepModel, backup_count, checkpoint_shares,
                                 expected_failures, expected_max_s, expected_segment_min, expected_step_s, harmonic,
                                 lambert_w0, max_of_exponentials, optimal_interval_min, p_wait, sample_steps,
                                 step_efficiency, young_daly_min)

N_BIG, B_BIG = 16_384, 328
FM = FailureModel()
M_BIG = FM.cluster_mtbf_min(N_BIG)  # minutes


# ----------------------------------------------------------------------------------------------- parameters
def test_parameters_from_the_llama3_figure():
    assert PER_GPU_MTBF_H == pytest.approx(50_677.0, abs=0.05)
    assert M_BIG / 60 == pytest.approx(3.0931, abs=5e-5)  # the page's "3.1 h"
    assert FM.cluster_mtbf_min(N_BIG, B_BIG) / 60 == pytest.approx(3.0324, abs=5e-5)
    assert FM.cluster_mtbf_min(8) / 60 == pytest.approx(6334.6, abs=0.05)
    assert StepModel().ideal_step_s == pytest.approx(1.10)


@pytest.mark.parametrize("n, b", [(8, 1), (16, 1), (32, 1), (50, 1), (64, 2), (128, 3), (256, 6), (512, 11),
                                  (1024, 21), (2048, 41), (4096, 82), (8192, 164), (16_384, 328)])
def test_backup_count_is_ceil_of_two_percent(n, b):
    assert backup_count(n) == b


def test_round_trip_to_dict():
    m = StepModel(p_slow=2e-4)
    assert StepModel.from_dict(m.to_dict()) == m
    f = FailureModel(restart_min=7.0)
    assert FailureModel.from_dict(f.to_dict()) == f


# ----------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call", [
    lambda: step_efficiency(-8), lambda: step_efficiency(0), lambda: step_efficiency(8.5),
    lambda: expected_step_s(8, -1), lambda: backup_count(8, -0.02), lambda: backup_count(-8),
    lambda: FailureModel(per_gpu_mtbf_h=0), lambda: FailureModel(per_gpu_mtbf_h=-1),
    lambda: checkpoint_shares(10, 0), lambda: checkpoint_shares(0, M_BIG), lambda: checkpoint_shares(-5, M_BIG),
    lambda: young_daly_min(0), lambda: optimal_interval_min(-1), lambda: expected_failures(100, 0),
    lambda: StepModel(p_slow=1.5), lambda: StepModel(slow_factor=0.5), lambda: StepModel(compute_s=0),
    lambda: FM.cluster_mtbf_min(-1), lambda: FM.cluster_mtbf_min(8, -1), lambda: lambert_w0(-1.0),
])
def test_bad_input_raises_a_clear_value_error(call):
    with pytest.raises(ValueError, match="must be"):
        call()


def test_error_names_the_bad_value():
    with pytest.raises(ValueError, match=r"n_gpus must be an integer >= 1; got -3"):
        step_efficiency(-3)
    with pytest.raises(ValueError, match=r"interval_min must be > 0; got 0"):
        checkpoint_shares(0, M_BIG)


# ----------------------------------------------------------------------------------------------- steps: exact
def test_harmonic_numbers():
    assert harmonic(1) == 1.0
    assert harmonic(4) == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 4)
    assert 0.01 * harmonic(N_BIG) == pytest.approx(0.10281, abs=5e-6)
    # the asymptotic branch continues the exact sum
    assert harmonic(1_000_001) - harmonic(1_000_000) == pytest.approx(1 / 1_000_001, rel=1e-4)


def _expected_max_by_trapezoid(n, k, m=StepModel()):
    """Independent check: E[max(H, S_k)] = T_c + int_{T_c}^inf (1 - F_H F_k) dx on a fine uniform grid."""
    x = np.linspace(m.compute_s, m.slow_factor * m.compute_s * (1 + m.jitter * 80), 4_000_001)
    f_h = (1 - np.exp(-(x / m.compute_s - 1) / m.jitter)) ** n
    zk = np.clip((x / (m.slow_factor * m.compute_s) - 1) / m.jitter, 0, None)
    f_k = np.where(x >= m.slow_factor * m.compute_s, (1 - np.exp(-zk)) ** k, 0.0) if k else 1.0
    y = 1 - f_h * f_k
    return m.compute_s + float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)))


@pytest.mark.parametrize("n, k", [(8, 0), (8, 1), (16_384, 1), (16_384, 3), (100, 40)])
def test_expected_max_matches_an_independent_integration(n, k):
    assert expected_max_s(n, k) == pytest.approx(_expected_max_by_trapezoid(n, k), abs=2e-7)


def test_expected_max_when_healthy_and_slow_overlap():
    # a large jitter makes the healthy maximum reach past the slow base: both terms of the integrand matter
    m = StepModel(jitter=1.0)
    assert expected_max_s(64, 2, m) == pytest.approx(_expected_max_by_trapezoid(64, 2, m), rel=2e-4)


@pytest.mark.parametrize("n, b, plain, backed", [
    (8, 1, 97.56, 86.75), (16, 1, 96.95, 91.31), (32, 1, 96.31, 93.52), (64, 2, 95.62, 92.96),
    (128, 3, 94.81, 93.11), (256, 6, 93.80, 92.56), (512, 11, 92.40, 92.18), (1024, 21, 90.32, 91.73),
    (2048, 41, 87.14, 91.23), (4096, 82, 82.54, 90.70), (8192, 164, 76.81, 90.18), (16_384, 328, 71.42, 89.66)])
def test_step_efficiency_by_cluster_size_matches_spec_table(n, b, plain, backed):
    assert 100 * step_efficiency(n) == pytest.approx(plain, abs=0.006)
    assert 100 * step_efficiency(n, b) == pytest.approx(backed, abs=0.006)


def test_the_pages_step_claims_as_exact_values():
    assert 100 * step_efficiency(8) == pytest.approx(97.555, abs=5e-4)  # page: 97.5% (one run)
    assert 97.5 <= 100 * step_efficiency(8) <= 97.6
    assert expected_step_s(8) == pytest.approx(1.12757, abs=5e-6)
    assert p_wait(N_BIG) == pytest.approx(0.805709, abs=1e-6)  # page: 81%
    assert round(100 * p_wait(N_BIG)) == 81
    assert expected_step_s(N_BIG) == pytest.approx(1.5401, abs=5e-5)  # page: 1.54 s
    assert 100 * step_efficiency(N_BIG) == pytest.approx(71.42, abs=0.005)  # page: 71%
    assert expected_step_s(N_BIG, B_BIG) == pytest.approx(1.20281, abs=5e-6)
    assert round(100 * step_efficiency(N_BIG, B_BIG)) == 90  # page: 90%
    assert expected_step_s(8, 1) == pytest.approx(1.12718, abs=5e-6)
    assert round(100 * step_efficiency(8, 1)) == 87  # page: 87%


def test_p_wait_is_the_chance_of_any_slow_gpu():
    for n in (8, 512, N_BIG):
        assert p_wait(n) == pytest.approx(-math.expm1(-n * 1e-4), abs=1e-12)
    lam = (N_BIG + 3) * 1e-4  # with b backups it is P(S > b)
    tail = 1 - sum(math.exp(-lam) * lam**s / math.factorial(s) for s in range(4))
    assert p_wait(N_BIG, 3) == pytest.approx(tail, rel=1e-9)


def test_page_tests_on_steps():
    # spec §10, tests 1 and 2
    assert step_efficiency(8) >= 0.95 and step_efficiency(N_BIG) <= 0.80
    assert step_efficiency(N_BIG, B_BIG) - step_efficiency(N_BIG) >= 0.10
    assert step_efficiency(8, 1) < step_efficiency(8)


# ----------------------------------------------------------------------------------------------- steps: draws
def test_max_draw_has_the_distribution_of_the_maximum():
    rng = np.random.default_rng(1)
    x = max_of_exponentials(50, rng.random(200_000))
    assert x.mean() == pytest.approx(harmonic(50), abs=0.02)  # E[X_N] = H_N, sd of mean ~0.003
    for z in (3.0, 4.0, 6.0):
        assert np.mean(x <= z) == pytest.approx((1 - math.exp(-z)) ** 50, abs=0.005)
    assert np.all(max_of_exponentials(np.array([0, 0]), rng.random(2)) == 0)


def _brute_force_steps(n, n_steps, rng, m=StepModel()):
    """Every GPU drawn separately: compute, own delay, slow with probability p, then sync."""
    d = rng.exponential(m.jitter * m.compute_s, (n_steps, n))
    slow = rng.random((n_steps, n)) < m.p_slow
    t = m.compute_s + d
    t = np.where(slow, m.slow_factor * t, t)
    return t.max(axis=1) + m.sync_s


def test_max_distribution_draw_agrees_with_brute_force_at_8_gpus():
    rng = np.random.default_rng(7)
    fast = sample_steps(8, 0, 60_000, rng)
    brute = _brute_force_steps(8, 60_000, rng)
    exact = step_efficiency(8)
    eff = lambda s: 1.1 / s.mean()
    se = brute.std() / math.sqrt(len(brute)) * 1.1 / brute.mean() ** 2
    assert se < 0.0002
    assert eff(fast) == pytest.approx(exact, abs=0.0005)  # 0.05 pp
    assert eff(brute) == pytest.approx(exact, abs=0.0005)


@pytest.mark.parametrize("n, b", [(N_BIG, 0), (N_BIG, B_BIG), (1024, 21)])
def test_monte_carlo_steps_agree_with_the_exact_mean(n, b):
    steps = sample_steps(n, b, 200_000, np.random.default_rng(n + b))
    se = steps.std() / math.sqrt(len(steps))
    assert steps.mean() == pytest.approx(expected_step_s(n, b), abs=5 * se)
    eff = 1.1 / steps.mean() * n / (n + b)
    assert eff == pytest.approx(step_efficiency(n, b), abs=0.001)


def test_monte_carlo_share_of_waiting_steps():
    rng = np.random.default_rng(3)
    steps = sample_steps(N_BIG, 0, 100_000, rng)
    waited = np.mean(steps > 1.5 + 0.1 - 1e-12)  # a slow GPU always takes >= 1.5 s
    assert waited == pytest.approx(p_wait(N_BIG), abs=0.006)


# ----------------------------------------------------------------------------------------------- checkpoints
def test_young_daly_and_exact_best():
    yd, best = young_daly_min(M_BIG), optimal_interval_min(M_BIG)
    assert yd == pytest.approx(19.266, abs=5e-4)  # page: 19.3
    assert young_daly_min(FM.cluster_mtbf_min(N_BIG, B_BIG)) == pytest.approx(19.076, abs=5e-4)
    assert best == pytest.approx(18.605, abs=5e-4)  # page: 18.6
    assert math.sqrt(2 * M_BIG) - 2 / 3 == pytest.approx(18.599, abs=5e-4)  # the small-delta approximation
    assert abs(yd - best) / best < 0.10  # spec §10 test 3


def _golden_max(f, lo, hi, iters=200):
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(iters):
        c, d = b - g * (b - a), a + g * (b - a)
        a, b = (a, d) if f(c) > f(d) else (c, b)
    return (a + b) / 2


@pytest.mark.parametrize("mtbf_min, ckpt_min", [(M_BIG, 1.0), (60.0, 5.0), (10_000.0, 0.5), (20.0, 10.0)])
def test_lambert_w_optimum_matches_a_numerical_maximisation(mtbf_min, ckpt_min):
    kept = lambda t: float(checkpoint_shares(t, mtbf_min, ckpt_min, 5.0)["kept"])
    numeric = _golden_max(kept, 1e-6, 5 * mtbf_min)
    assert optimal_interval_min(mtbf_min, ckpt_min) == pytest.approx(numeric, rel=1e-5)
    # and the raw W0 formula, without the Newton polish, agrees to many digits too
    d = ckpt_min / mtbf_min
    assert mtbf_min * (1 + lambert_w0(-math.exp(-1 - d))) == pytest.approx(numeric, rel=1e-5)


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-1 / math.e + 1e-12, max_value=50.0))
def test_lambert_w0_inverts_w_exp_w(x):
    w = lambert_w0(x)
    assert w >= -1
    assert w * math.exp(w) == pytest.approx(x, abs=1e-10, rel=1e-10)


KEPT_TABLE = [  # spec §6: interval (min) -> kept, checkpoint, lost (percent)
    (1, 48.43, 48.56, 3.15), (3, 72.25, 24.15, 3.67), (5, 79.84, 16.01, 4.19), (10, 85.93, 8.62, 5.48),
    (15, 87.41, 5.84, 6.76), (30, 86.58, 2.89, 10.53), (60, 80.90, 1.35, 17.75), (120, 68.49, 0.57, 30.94),
    (240, 47.27, 0.20, 52.54)]


@pytest.mark.parametrize("tau, kept, ckpt, lost", KEPT_TABLE)
def test_kept_checkpoint_lost_along_the_interval_curve(tau, kept, ckpt, lost):
    s = checkpoint_shares(tau, M_BIG)
    assert 100 * s["kept"] == pytest.approx(kept, abs=0.006)
    assert 100 * s["checkpoint"] == pytest.approx(ckpt, abs=0.006)
    assert 100 * s["lost"] == pytest.approx(lost, abs=0.006)


def test_the_pages_checkpoint_claims_as_exact_values():
    yd = young_daly_min(M_BIG)
    at_yd = checkpoint_shares(yd, M_BIG)
    assert 87.5 <= 100 * at_yd["kept"] <= 87.7 and 100 * at_yd["kept"] == pytest.approx(87.609, abs=5e-4)
    assert 100 * checkpoint_shares(optimal_interval_min(M_BIG), M_BIG)["kept"] == pytest.approx(87.614, abs=5e-4)
    assert 100 * checkpoint_shares(yd / 6, M_BIG)["checkpoint"] == pytest.approx(22.92, abs=0.006)  # page 23%
    lost_6yd = 100 * checkpoint_shares(6 * yd, M_BIG)["lost"]
    assert lost_6yd == pytest.approx(30.03, abs=0.006)  # page 29%, one seeded run
    assert round(lost_6yd) == 30


def test_the_three_shares_exceed_one_by_the_interrupted_writes():
    for tau in (3.0, young_daly_min(M_BIG), 120.0):
        s = checkpoint_shares(tau, M_BIG)
        e_t = float(expected_segment_min(tau, M_BIG))
        excess = (M_BIG * math.expm1(1 / M_BIG) - 1) / e_t
        assert s["kept"] + s["checkpoint"] + s["lost"] - 1 == pytest.approx(excess, rel=1e-6, abs=1e-12)
    yd = young_daly_min(M_BIG)
    assert 100 * (M_BIG * math.expm1(1 / M_BIG) - 1) / float(expected_segment_min(yd, M_BIG)) == pytest.approx(
        0.012, abs=0.001)


def test_expected_failures():
    assert expected_failures(20_160, M_BIG) == pytest.approx(105.8, abs=0.05)
    assert expected_failures(20_160, FM.cluster_mtbf_min(N_BIG, B_BIG)) == pytest.approx(107.8, abs=0.05)


def test_checkpoint_shares_accept_arrays():
    taus = np.array([3.0, 19.0, 120.0])
    s = checkpoint_shares(taus, M_BIG)
    assert s["kept"].shape == (3,)
    assert s["kept"][1] == pytest.approx(float(checkpoint_shares(19.0, M_BIG)["kept"]))
