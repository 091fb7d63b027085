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


@pytest.mark.timeout(240)
def test_the_whole_script_dry_runs_on_cpu_and_writes_a_labelled_report(tmp_path, capsys):
    """Every stage of the GPU check (timing, node profiler, simulator error, OOM loop, REINFORCE, report) runs
    here on logical CPU devices, so the first GPU run only meets what is CUDA-specific."""
    pytest.importorskip("torch")
    rc = _gpu_check().main(["--device", "cpu", "--presets", "ci", "--repeats", "2", "--oom-attempts", "5",
                            "--oom-preset", "ci", "--reinforce-updates", "1", "--reinforce-preset", "ci",
                            "--profile-repeats", "2", "--out", str(tmp_path)])
    assert rc == 0
    reports = [f for f in os.listdir(tmp_path) if f.startswith("gpu_check_") and f.endswith(".json")]
    assert len(reports) == 1, os.listdir(tmp_path)
    with open(tmp_path / reports[0]) as f:
        rep = json.load(f)
    assert rep["dry_run"] is True and rep["device"] == "cpu" and rep["gpus"] == []
    assert "DRY RUN" in rep["log"][0] and "measures no GPU" in capsys.readouterr().out
    row = rep["single_device"][0]
    assert row["preset"] == "ci" and len(row["measured_steps_s"]) == 2 and not row["oom"]
    assert row["sim_error"] == pytest.approx((row["sim_step_s"] - row["measured_step_s"]) / row["measured_step_s"])
    assert len(row["node_profile"]["fwd_s"]) == len(row["node_profile"]["bwd_s"]) > 10
    oom = rep["oom_recovery"]
    assert oom["ooms"] == oom["attempts"] == 5 and oom["error"] is None and oom["healthy_step_after_s"] > 0
    assert oom["ok"] and oom["leaked_bytes"] == 0
    assert rep["reinforce"]["updates"] == 1 and rep["reinforce"]["devices"] == ["cpu"] * 4


def test_a_device_that_is_neither_cuda_nor_cpu_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--device must be cuda"):
        _gpu_check().main(["--device", "mps", "--out", str(tmp_path)])
