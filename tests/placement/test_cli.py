"""The command line: train -> evaluate -> figures on the simulator, with a small model and few updates."""

import json
import os

import pytest
import torch

from lib import runlog
from lib.placement import cli, experiment, relabel
from lib.placement.reinforce import RunResult, TrainConfig


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run_cli(args, capsys):
    assert cli.main(args) == 0
    return capsys.readouterr().out


def h2h_graph(out):
    from lib.gpt import gpt_graph, preset

    return gpt_graph(preset(RunResult.from_log(os.path.join(out, "r.jsonl")).header["env"]["preset"]))


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
    _, h2h, ph = experiment.read_evaluation(os.path.join(out, "r.eval.jsonl"))
    assert sorted(e.side for e in h2h.entries if e.role == "pick") == ["human_2gpu", "rl", "single_gpu"]
    assert all(len(e.confirm_s) == 3 for e in h2h.entries)
    # every side chooses its GPUs on the judged machine: the RL candidates are relabelled, busiest GPU fastest
    header = runlog.read(os.path.join(out, "r.eval.jsonl"))[0]
    order = header["config"]["gpu_order"]
    rl_cands = RunResult.from_log(os.path.join(out, "r.jsonl")).candidates()
    rl_sel = [s for s in h2h.selection if s.side == "rl"]
    assert {relabel.base_label(s.label) for s in rl_sel} <= {lbl for lbl, _ in rl_cands}
    assert [s.placement for s in rl_sel] == [p for _, p in relabel.by_speed(rl_cands, order, h2h_graph(out))]

    rows = json.loads(run_cli(["figures", "--out", out], capsys).strip().splitlines()[0])
    assert rows["run"] == "r" and rows["updates"] == 5
    assert sorted(os.listdir(os.path.join(out, "figures"))) == ["r.eval.html", "r.eval.phases.html", "r.html"]


def one_error_line(args, capsys, match):
    """A user error: exit 2 and exactly one line on stderr (lib.cli_errors)."""
    assert cli.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and match in err[0], err


def test_errors(tmp_path, capsys):
    one_error_line(["evaluate", "--run", "missing", "--out", str(tmp_path)], capsys, "no run log")
    one_error_line(["train", "--k", "1", "--baseline", "leave_one_out", "--out", str(tmp_path)], capsys,
                   "leave-one-out")
    # a log written for another model cannot be evaluated against this one
    run_cli(["train", "--preset", "ci", "--n-iters", "1", "--k", "2", "--out", str(tmp_path), "--quiet", "--name",
             "small"], capsys)
    path = os.path.join(str(tmp_path), "small.jsonl")
    with pytest.raises(ValueError, match="another model"):
        experiment.evaluate_run(path, experiment.EnvSpec(preset="49m"))
