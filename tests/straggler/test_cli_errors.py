"""``python -m lib.straggler`` as a hostile user runs it (issue 18): one line and exit 2 for every mistake, no
OverflowError or math domain error at extreme but legal inputs, probabilities within [0, 1]."""

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.straggler import cli
from lib.straggler.model import checkpoint_shares, optimal_interval_min, p_wait, young_daly_min
from tests.cli_helpers import assert_one_line, call_main


def call(argv):
    return call_main(cli.main, argv)


def check_result(stdout):
    """A correct result: finite numbers, every share and probability in [0, 1]."""
    d = json.loads(stdout)
    s = d["summary"]
    assert all(math.isfinite(v) for v in s.values())
    assert 0 < s["step_efficiency"] <= 1 and 0 < s["step_efficiency_2pct_backups"] <= 1
    for r in d["rows"]:
        for k in ("checkpoint_share", "lost_share", "kept_share", "expected_checkpoint", "expected_lost",
                  "expected_kept", "step_efficiency", "goodput", "expected_goodput"):
            assert 0 <= r[k] <= 1, (k, r[k], r["name"])
        assert r["failures"] >= 0 and math.isfinite(r["expected_failures"])


@pytest.mark.parametrize("argv", [
    ["--mtbf-gpu-h", "1", "--gpus", "10000000"],          # was OverflowError (math range error)
    ["--mtbf-gpu-h", "1e9", "--gpus", "1"],                # was ZeroDivisionError
    ["--interval", "1e9", "--days", "365"],
    ["--interval", "1e-300", "--days", "1e-300"],
    ["--backups", "100", "--gpus", "8"],
])
def test_finding5_extreme_but_legal_inputs_compute(argv):
    """Issue 18, finding 5: the straggler CLI crashed with OverflowError or 'math domain error' here."""
    rc, out, err = call(argv + ["--json"])
    assert rc == 0 and err == [], err
    check_result(out)


@pytest.mark.parametrize("argv, words", [
    (["--backups", "1e300"], ["--backups", "[0, 100]"]),   # was OverflowError
    (["--mtbf-gpu-h", "1e300"], ["--mtbf-gpu-h"]),
    (["--gpus", "1000000000"], ["--gpus", "10000000"]),    # ran for minutes
    (["--days", "1e300"], ["--days", "365"]),               # ran for ever
    (["--seed", "-1"], ["--seed"]),                         # was numpy's 'expected non-negative integer'
    (["--interval", "nan"], ["--interval", "not finite"]),
    (["--gpus", "2.5"], ["--gpus", "invalid int"]),
    (["--gpus"], ["--gpus", "expected one argument"]),
    (["--bogus"], ["unrecognized arguments"]),
])
def test_out_of_range_is_one_line_naming_the_flag(argv, words):
    rc, _, err = call(argv)
    assert_one_line(rc, err, *words)


def test_probabilities_stay_within_0_and_1_at_extreme_gpu_counts():
    """Issue 18: p_wait was 1.0000000000000384 at a million GPUs."""
    for n in (10**6, 2 * 10**6, 10**7):
        assert 0 <= p_wait(n) <= 1
    for mtbf in (1e-6, 1e-3, 1.0, 1e6, 1e300):
        shares = checkpoint_shares(120.0, mtbf, 1.0, 5.0)
        assert all(0 <= float(v) <= 1 for v in shares.values()), (mtbf, shares)
        tau = optimal_interval_min(mtbf, 1.0)
        assert 0 < tau <= mtbf and math.isfinite(tau)
    assert optimal_interval_min(1e12, 1.0) == pytest.approx(young_daly_min(1e12, 1.0), rel=1e-6)


FLAGS = {"--gpus": int, "--interval": float, "--backups": float, "--days": float, "--seed": int,
         "--mtbf-gpu-h": float}
VALUES = st.one_of(
    st.integers(-2**70, 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(1e-6, 1e7).map(repr),
    st.sampled_from(["", "nan", "inf", "-inf", "1e999", "1.5", "true", "x", "0", "1", "16384", "365", "1e-300"]),
)


@settings(max_examples=30, deadline=None)
@given(flag=st.sampled_from(sorted(FLAGS)), value=st.one_of(st.none(), VALUES))
def test_fuzzed_flags_give_one_line_or_a_correct_result(flag, value):
    """Issue 18: hypothesis-generated values for every flag: exit 2 with one line naming it, or a result whose
    numbers are finite and whose shares are within [0, 1]."""
    rc, out, err = call([flag] + ([] if value is None else [value]) + ["--json"])
    if rc == 0:
        assert err == []
        check_result(out)
    else:
        assert_one_line(rc, err, flag)


def test_debug_shows_the_traceback():
    p = subprocess.run([sys.executable, "-m", "lib.straggler", "--gpus", "0", "--debug"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and "Traceback" in p.stderr
    p = subprocess.run([sys.executable, "-m", "lib.straggler", "--gpus", "0"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("error: --gpus")


@settings(max_examples=15, deadline=None)
@given(gpus=st.one_of(st.integers(1, 10**6), st.sampled_from([1, 8, 16_384, 10**6])),
       interval=st.one_of(st.floats(1e-6, 1e9), st.sampled_from([1e-6, 1e9])),
       backups=st.one_of(st.floats(0, 100), st.sampled_from([0.0, 100.0])),
       days=st.one_of(st.floats(1e-6, 365), st.sampled_from([1e-6, 365.0])),
       mtbf=st.one_of(st.floats(1, 1e9), st.sampled_from([1.0, 1e9])),
       seed=st.integers(0, 2**32 - 1))
def test_every_legal_combination_gives_a_correct_result(gpus, interval, backups, days, mtbf, seed):
    """Issue 18: the allowed ranges of all the flags together, edges included: finite, shares in [0, 1]."""
    rc, out, err = call(["--gpus", str(gpus), "--interval", repr(interval), "--backups", repr(backups),
                         "--days", repr(days), "--mtbf-gpu-h", repr(mtbf), "--seed", str(seed), "--json"])
    assert rc == 0 and err == [], err
    check_result(out)
