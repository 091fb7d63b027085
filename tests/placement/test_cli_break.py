"""The placement CLI's chapter-4 flags: PPO and the hierarchical policy train through the same command."""

import json
import os

import pytest

from lib.placement.cli import main
from lib.placement.reinforce import RunResult

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(tmp_path, capsys, *extra):
    rc = main(["train", "--preset", "ci", "--n-iters", "2", "--k", "3", "--hidden", "8", "--quiet",
               "--out", str(tmp_path), *extra])
    out = capsys.readouterr().out
    return rc, out


def test_ppo_and_hierarchical_runs_from_the_command_line(tmp_path, capsys):
    rc, out = _train(tmp_path, capsys, "--colocate", "--algorithm", "ppo", "--ppo-epochs", "2")
    assert rc == 0
    res = RunResult.from_log(json.loads(out)["log"])
    assert res.config.algorithm == "ppo" and res.config.ppo_epochs == 2 and "_ppo2" in res.path
    assert all("clip_fraction" in r for r in res.records)
    rc, out = _train(tmp_path, capsys, "--policy", "hierarchical", "--n-groups", "3")
    assert rc == 0 and "_hier3" in json.loads(out)["log"]
    rc, out = _train(tmp_path, capsys, "--colocate")  # chapters 2-3's name, unchanged
    name = os.path.basename(json.loads(out)["log"])
    assert rc == 0 and name == "ci_4xT4-pcie_m1_coloc_ma_lr0.001_ent0_s0.jsonl"


@pytest.mark.parametrize("extra, msg", [(["--policy", "hierarchical", "--colocate"], "--colocate"),
                                        (["--ppo-epochs", "0"], "--ppo-epochs"),
                                        (["--ppo-clip", "1.5"], "--ppo-clip"),
                                        (["--n-groups", "0"], "--n-groups")])
def test_bad_chapter4_flags_are_one_line(tmp_path, capsys, extra, msg):
    rc = main(["train", "--preset", "ci", "--out", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1
