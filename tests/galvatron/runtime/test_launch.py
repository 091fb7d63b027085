"""The launcher: torchrun with two local "nodes" (one rank each) on loopback, the CLI's errors, and
spawn_local's exit-code checking and hang protection."""

import json
import os
import subprocess
import sys

import pytest

from lib.galvatron.runtime.launch import spawn_local
from lib.galvatron.runtime.processes import free_port
from tests import ROOT

TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def _torchrun_nodes(plan_path, out_path, extra=()):
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([TORCHRUN, "--nnodes", "2", "--node-rank", str(n), "--nproc-per-node", "1",
                               "--master-addr", "127.0.0.1", "--master-port", str(port), "-m", "lib.galvatron",
                               "run", "--plan", plan_path, "--steps", "2", "--warmup", "0", "--out", out_path,
                               *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for n in (0, 1)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=90)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    return [p.returncode for p in procs], outs


@pytest.mark.timeout(120)
def test_torchrun_two_nodes_runs_a_galvatron_plan_and_matches_reference(tmp_path):
    plan = {"pp_deg": 1, "tp_sizes_enc": "2,1", "tp_consecutive_flags": "1,1", "dp_types_enc": "0,1",
            "global_bsz": 8, "chunks": 1, "world_size": 2}
    pp, out = tmp_path / "plan.json", tmp_path / "out.json"
    pp.write_text(json.dumps(plan))
    codes, logs = _torchrun_nodes(str(pp), str(out), ["--check"])
    assert codes == [0, 0], logs
    summary = json.loads(out.read_text())
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    for r in summary["ranks"]:
        c = r["checks"][0]
        assert c["param_err"] < 1e-5 and c["loss_err"] < 1e-5, c
        assert c["sdp_impl"] in ("fsdp2", "manual")  # layer 2 is SDP over both nodes


@pytest.mark.timeout(60)
def test_spawn_local_reports_a_failing_job_with_every_exit_code():
    with pytest.raises(ValueError, match=r"exit codes \[1, 1\].*job kind"):
        spawn_local({"kind": "no-such-job"}, 2, timeout_s=50)


@pytest.mark.timeout(60)
def test_a_rank_failing_mid_run_leaves_no_rank_hanging():
    import time

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank 1: RuntimeError: rank 1 failed on purpose") as e:
        spawn_local({"kind": "fail_rank", "rank": 1, "timeout_s": 10}, 2, timeout_s=40)
    assert "exit codes [1, 1]" in str(e.value) or "still running" in str(e.value)
    assert time.monotonic() - t0 < 40


def test_cli_rejects_missing_plan_fields(tmp_path, capsys):
    from lib.galvatron.__main__ import main

    pp = tmp_path / "plan.json"
    pp.write_text(json.dumps({"pp_deg": 1, "global_bsz": 8}))
    assert main(["run", "--plan", str(pp)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: plan.json: missing field") and err.count("\n") == 1


@pytest.mark.parametrize("backend, device, bound", [("nccl", "cuda", True), ("gloo", "cuda", False),
                                                    ("gloo", "cpu", False)])
def test_a_nccl_rank_binds_its_group_to_its_gpu(monkeypatch, backend, device, bound):
    """Under NCCL each rank names its GPU to init_process_group (``device_id``), so NCCL does not guess it from
    the global rank and its barrier does not warn (seen on the first GPU session, data/runs/h200_20261204/);
    gloo and CPU runs pass nothing new. Checked here with the CUDA calls stubbed (no GPU on this machine)."""
    import torch
    import torch.distributed as dist

    from lib.galvatron.runtime import processes

    seen = {}
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)   # keep this test process's threads
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: seen.setdefault("set", i))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: seen["set"])
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: seen.update(kw))
    processes._init(11, 16, backend, 30, device)
    assert seen["rank"] == 11 and seen["world_size"] == 16
    if bound:
        assert seen["set"] == 3 and seen["device_id"] == torch.device("cuda", 3)
    else:
        assert "device_id" not in seen
