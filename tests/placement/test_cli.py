"""The command line: train -> evaluate -> figures on the simulator, with a small model and few updates."""

import json
import os

import pytest
import torch

from lib import runlog
from lib.placement import cli
from lib.placement.reinforce import RunResult, TrainConfig


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run_cli(args, capsys):
    assert cli.main(args) == 0
    return capsys.readouterr().out


def test_train_evaluate_figures(tmp_path, capsys):
    out = str(tmp_path)
    args = ["train", "--preset", "ci", "--colocate", "--n-iters", "3", "--k", "4", "--out", out, "--quiet",
            "--name", "r"]
    summary = json.loads(run_cli(args, capsys).strip().splitlines()[-1])
    assert summary["updates"] == 3 and summary["log"].endswith("r.jsonl")
    header, recs = runlog.read(os.path.join(out, "r.jsonl"))
    assert header["env"]["preset"] == "ci" and header["env"]["device"] == "sim"
    assert "simulated" in header["env"]["describe"] and header["config"]["k"] == 4
    assert len(recs) == 3 and all(len(r["placements"]) == 4 for r in recs)
    # extending the run resumes it instead of starting over
    run_cli(args[:5] + ["5"] + args[6:], capsys)
    assert len(runlog.read(os.path.join(out, "r.jsonl"))[1]) == 5

    text = run_cli(["evaluate", "--run", "r", "--out", out, "--rounds-select", "2", "--rounds-confirm", "3",
                    "--steps-per-round", "2"], capsys)
    assert "standard errors" in text
    _, h2h, ph = cli.read_evaluation(os.path.join(out, "r.eval.jsonl"))
    assert sorted(e.side for e in h2h.entries if e.role == "pick") == ["human_2gpu", "rl", "single_gpu"]
    assert all(len(e.confirm_s) == 3 for e in h2h.entries)
    rl_labels = {lbl for lbl, _ in RunResult.from_log(os.path.join(out, "r.jsonl")).candidates()}
    assert {s.label for s in h2h.selection if s.side == "rl"} == rl_labels

    rows = json.loads(run_cli(["figures", "--out", out], capsys).strip().splitlines()[0])
    assert rows["run"] == "r" and rows["updates"] == 5
    assert sorted(os.listdir(os.path.join(out, "figures"))) == ["r.eval.html", "r.eval.phases.html", "r.html"]


def test_run_name_and_specs():
    spec = cli.EnvSpec(mem_cap=0.24)
    name = cli.run_name(spec, TrainConfig(baseline="leave_one_out"), colocate=True)
    assert name == "49m_4xT4-pcie_m1_coloc_loo_lr0.001_ent0_cap0.24_s0"
    assert cli.EnvSpec.from_dict({**spec.to_dict(), "describe": "x"}) == spec
    with pytest.raises(ValueError, match="device"):
        cli.EnvSpec(device="tpu")


def test_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="no run log"):
        cli.main(["evaluate", "--run", "missing", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="leave-one-out"):
        cli.main(["train", "--k", "1", "--baseline", "leave_one_out", "--out", str(tmp_path)])
    # a log written for another model cannot be evaluated against this one
    run_cli(["train", "--preset", "ci", "--n-iters", "1", "--k", "2", "--out", str(tmp_path), "--quiet", "--name",
             "small"], capsys)
    path = os.path.join(str(tmp_path), "small.jsonl")
    with pytest.raises(ValueError, match="another model"):
        cli.evaluate_run(path, cli.EnvSpec(preset="49m"))


def test_results_come_back_from_the_logs_on_disk(tmp_path):
    """train_run and evaluate_run return what their logs say (the chapters draw from these): nothing is lost
    between memory and disk. An output folder whose name contains '.jsonl' does not confuse the file names."""
    out = tmp_path / "runs.jsonl.d"
    out.mkdir()
    spec = cli.EnvSpec(preset="ci")
    res = cli.train_run(spec, TrainConfig(n_iters=2, k=4), colocate=True, out_dir=str(out), name="r", progress=False)
    assert res == RunResult.from_log(res.path) and len(res.records) == 2
    h2h, ph = cli.evaluate_run(res.path, rounds_select=1, rounds_confirm=2, steps_per_round=1)
    _, h2h_disk, ph_disk = cli.read_evaluation(str(out / "r.eval.jsonl"))
    assert h2h == h2h_disk and ph == ph_disk
