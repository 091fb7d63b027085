"""benchmarks/gpu_check.py: the short real REINFORCE run works end to end (run here on logical CPU devices)."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "benchmarks", "gpu_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(240)
def test_reinforce_real_runs_and_logs(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import lib.placement.torch_env as te

    real_env = te.TorchPlacementEnv
    # no GPU here: map the CUDA device names the check asks for onto logical CPU devices
    monkeypatch.setattr(te, "TorchPlacementEnv", lambda preset, devices, **k: real_env(preset, ["cpu"] * len(devices), **k))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    torch.set_num_threads(1)
    lines = []
    out = _gpu_check().reinforce_real("ci", 2, lines.append, str(tmp_path))
    assert out["updates"] == 2 and out["devices"] == ["cuda:0"] * 4
    assert out["best_step_s"] > 0
    with open(os.path.join(ROOT, out["log"])) as f:
        records = [json.loads(line) for line in f]
    assert records[0]["kind"] == "header" and len(records) == 3  # header + one record per update
    assert "REINFORCE on" in lines[0]
