"""The GPU check's measurements that would settle the simulator's optimizer and power-clock terms, dry-run on
the CPU (they measure nothing real there; the test checks the plumbing and the report's fields)."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "benchmarks", "gpu_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_optimizer_phase_reports_each_share():
    pytest.importorskip("torch")
    lines = []
    out = _gpu_check().optimizer_phase("ci", lines.append, "cpu", repeats=2)
    assert out["all"]["params"] == sum(out[k]["params"] for k in ("embedding", "body", "head"))
    for k in ("all", "embedding", "body", "head"):
        assert out[k]["adamw_s"] > 0 and out[k]["adamw_clip_s"] > 0
    assert "AdamW (ci" in lines[0]


def test_duty_cycle_reports_g_for_every_partial_duty():
    pytest.importorskip("torch")
    lines = []
    out = _gpu_check().duty_cycle_clocks(lines.append, "cpu", n=32, burst_s=0.005, duties=(1.0, 0.5),
                                         seconds=0.05)
    assert set(out["duties"]) == {"1.0", "0.5"} and set(out["g"]) == {"0.5"}
    assert all(v["matmul_s"] > 0 and v["n_matmuls"] > 0 for v in out["duties"].values())
    assert "duty cycle" in lines[0]
