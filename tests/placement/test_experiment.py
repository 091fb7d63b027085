"""The experiment API the chapters and the command line share: environment specs, run names, and results that
come back from the logs on disk."""

import pytest

from lib.placement.experiment import EnvSpec, evaluate_run, read_evaluation, run_name, train_run
from lib.placement.reinforce import RunResult, TrainConfig


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_run_name_and_specs():
    spec = EnvSpec(mem_cap=0.24)
    name = run_name(spec, TrainConfig(baseline="leave_one_out"), colocate=True)
    assert name == "49m_4xT4-pcie_m1_coloc_loo_lr0.001_ent0_cap0.24_s0"
    assert EnvSpec.from_dict({**spec.to_dict(), "describe": "x"}) == spec
    with pytest.raises(ValueError, match="device"):
        EnvSpec(device="tpu")


def test_results_come_back_from_the_logs_on_disk(tmp_path):
    """train_run and evaluate_run return what their logs say (the chapters draw from these): nothing is lost
    between memory and disk. An output folder whose name contains '.jsonl' does not confuse the file names."""
    out = tmp_path / "runs.jsonl.d"
    out.mkdir()
    spec = EnvSpec(preset="ci")
    res = train_run(spec, TrainConfig(n_iters=2, k=4), colocate=True, out_dir=str(out), name="r", progress=False)
    assert res == RunResult.from_log(res.path) and len(res.records) == 2
    h2h, ph = evaluate_run(res.path, rounds_select=1, rounds_confirm=2, steps_per_round=1)
    _, h2h_disk, ph_disk = read_evaluation(str(out / "r.eval.jsonl"))
    assert h2h == h2h_disk and ph == ph_disk
