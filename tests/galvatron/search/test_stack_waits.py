"""Two stack fields for what a stack waits for (rules.STACK_FIELDS, data/stacks/):
``exposed_param_gather`` (ZeRO-1/2's gather of the updated weights ends the optimizer step: DeepSpeed,
nanotron) and ``tp_backward_waits`` (the backward's TP collectives are waited for at once: nanotron without
``tp_linear_async_communication``). Hand-worked exposure, which stacks set them, and what they move."""

import pytest

from lib.galvatron.published import load_runs
from lib.galvatron.search import zero as zr
from lib.galvatron.search.analytic import TransformerShape
from lib.galvatron.search.cost import _dp_exposed, step_estimate
from lib.galvatron.search.efficiency import load_gpu
from lib.galvatron.search.layout import Job, ParallelConfig
from lib.galvatron.search.rules import ALL_PRESETS, PRACTICE, STACK_FIELDS
from lib.galvatron.stacks import load_stack, stack_names
from lib.galvatron.validate import run_rules
from tests import ROOT

H100 = load_gpu("h100-sxm-80gb")
GPT = TransformerShape("gpt-13b", 40, 5120, 40, 2048, vocab=51200)
FIELDS = ("exposed_param_gather", "tp_backward_waits")


def _job(n=64, B=128):
    return Job(shape=GPT, gpu=H100, n_gpus=n, gpus_per_node=8, port_gb_s=50.0, global_batch=B)


def _on(field):
    return {n for n in stack_names() if load_stack(n)["fields"][field]["value"]}


def test_stack_fields_off_in_every_preset_and_set_by_the_stacks_whose_code_waits():
    assert set(FIELDS) <= set(STACK_FIELDS)
    assert not any(getattr(r, f) for r in ALL_PRESETS.values() for f in FIELDS)
    assert _on("exposed_param_gather") == {"deepspeed", "nanotron"}
    assert _on("tp_backward_waits") == {"nanotron"}
    assert "all_gather_dp_groups" in load_stack("deepspeed")["fields"]["exposed_param_gather"]["source"]
    assert "_all_gather_params" in load_stack("nanotron")["fields"]["exposed_param_gather"]["source"]
    assert "tp_linear_async_communication" in load_stack("nanotron")["fields"]["tp_backward_waits"]["source"]


def test_the_gather_moves_to_the_step_phase_for_zero_1_and_2_only():
    for stage in (1, 2):
        hidden, waits = zr.collectives(stage, 10.0, 2, 4), zr.collectives(stage, 10.0, 2, 4, gather_after_step=True)
        assert ("all-gather", 20.0, "fwd") in hidden["per_step"]
        assert ("all-gather", 20.0, "step") in waits["per_step"] and ("all-gather", 20.0, "fwd") not in waits["per_step"]
        assert hidden["per_micro_batch"] == waits["per_micro_batch"]
    for stage in (0, 3):
        assert zr.collectives(stage, 10.0, 2, 4) == zr.collectives(stage, 10.0, 2, 4, gather_after_step=True)


def test_gather_exposure_by_hand(monkeypatch):
    """ZeRO-1 on 1 parameter with p = 2, g = 4 (seconds = bytes): a 4 s reduce-scatter under a 5 s backward
    hides; the 2 s gather under a 1 s forward leaves 1 s. Waited for after the step, all 2 s are exposed."""
    import lib.galvatron.search.cost as C

    monkeypatch.setattr(C.col, "group_s", lambda kind, nbytes, *a: nbytes)
    assert _dp_exposed(zr.collectives(1, 1.0, 2, 4), 1.0, 5.0, 4, 8, 1, None, False) == pytest.approx(1.0)
    assert _dp_exposed(zr.collectives(1, 1.0, 2, 4, True), 1.0, 5.0, 4, 8, 1, None, False) == pytest.approx(2.0)
    assert _dp_exposed(zr.collectives(1, 1.0, 2, 4, True), 1.0, 5.0, 4, 1, 1, None, False) == 0.0   # d = 1


def test_step_estimate_pays_the_gather_only_for_zero_1_and_2_with_data_parallelism():
    j, waits = _job(), PRACTICE.with_(exposed_param_gather=True)
    for zero in (1, 2):
        cfg = ParallelConfig(tp=2, pp=1, dp=32, micro_batch=1, zero=zero, sequence_parallel=True)
        a, b = step_estimate(j, cfg, PRACTICE), step_estimate(j, cfg, waits)
        assert b["dp_s"] > a["dp_s"] and b["step_s"] - a["step_s"] == pytest.approx(b["dp_s"] - a["dp_s"])
        assert b["peak_bytes"] == a["peak_bytes"]
    for cfg in (ParallelConfig(tp=2, dp=32, micro_batch=1, zero=0, sequence_parallel=True),
                ParallelConfig(tp=2, dp=32, micro_batch=1, zero=3, sequence_parallel=True),
                ParallelConfig(tp=8, pp=8, dp=1, micro_batch=1, zero=1, sequence_parallel=True)):
        assert step_estimate(j, cfg, waits)["step_s"] == step_estimate(j, cfg, PRACTICE)["step_s"]


def test_tp_backward_exposure_by_hand(monkeypatch):
    """Seconds = bytes. Per layer, X = tokens x h x 2 bytes. With SP, Megatron's rule exposes 2X forward and
    what 2X outlasts the forward GEMMs by; waiting exposes 2X forward, 2X backward and two re-gathers of X."""
    import lib.galvatron.search.cost as C

    monkeypatch.setattr(C.col, "group_s", lambda kind, nbytes, *a: nbytes)
    j, cfg = _job(), ParallelConfig(tp=8, dp=8, micro_batch=1, sequence_parallel=True)
    X = GPT.seq_len * 1 * GPT.hidden * 2
    base = step_estimate(j, cfg, PRACTICE)
    waits = step_estimate(j, cfg, PRACTICE.with_(tp_backward_waits=True))
    assert base["tp_s"] == pytest.approx(2 * X + max(0.0, 2 * X - base["fwd_s"]))
    assert waits["tp_s"] == pytest.approx(6 * X)
    # a run that states the TP overlap waits for none of it; without SP the backward all-reduces were exposed
    both = PRACTICE.with_(tp_backward_waits=True, tp_comm_overlap=True)
    assert step_estimate(j, cfg, both)["tp_s"] == step_estimate(j, cfg, PRACTICE.with_(tp_comm_overlap=True))["tp_s"]
    no_sp = ParallelConfig(tp=8, dp=8, micro_batch=1)
    assert (step_estimate(j, no_sp, PRACTICE.with_(tp_backward_waits=True))["tp_s"]
            == step_estimate(j, no_sp, PRACTICE)["tp_s"] == pytest.approx(4 * X))


def test_only_deepspeed_runs_move_and_by_under_a_point(monkeypatch):
    """No published run names nanotron; only DeepSpeed's runs pay the gather (ZeRO-1 under TP x PP, so each
    GPU gathers a small shard): slower, by under a point."""
    for f in ("calibration.json", "heldout.json", "bloom_topology.json", "sc21_table2.json",
              "torchtitan_sweeps.json"):
        for r in load_runs(f"{ROOT}/data/published_runs/{f}").runs:
            rules = run_rules(r)
            assert rules.exposed_param_gather == (r.stack == "deepspeed") and not rules.tp_backward_waits
    import lib.galvatron.validate as V

    bloom = [(f, r) for f in ("bloom_topology.json",)
             for r in load_runs(f"{ROOT}/data/published_runs/{f}").runs]
    waits = {r["name"]: r["error"] for r in V.validate_runs(bloom, PRACTICE, search=False, progress=False)["runs"]}
    stacks_own = V.run_rules
    monkeypatch.setattr(V, "run_rules", lambda run, rules="practice":
                        stacks_own(run, rules).with_(exposed_param_gather=False))
    hidden = {r["name"]: r["error"] for r in V.validate_runs(bloom, PRACTICE, search=False, progress=False)["runs"]}
    assert all(-0.01 < waits[n] - hidden[n] <= 0 for n in hidden) and any(waits[n] < hidden[n] for n in hidden)


def test_one_param_gather_pays_the_gathers_latency_once(monkeypatch):
    """``one_param_gather`` (nanotron's all_gather_coalesced: one flattened all_gather): with 4 buckets and a
    collective of 1 s latency + its bytes, the step's 2-byte gather costs 4 x (1 + 2 / 4) = 6 s bucketed and
    1 + 2 = 3 s as one collective; the gradient reduce-scatter stays bucketed either way. Only nanotron sets
    it, and it changes nothing without the step gather."""
    import lib.galvatron.search.cost as C

    monkeypatch.setattr(C.col, "group_s", lambda kind, nbytes, *a: 1.0 + nbytes)
    colls = zr.collectives(1, 1.0, 2, 4, True)
    rs = 4 * (1.0 + 4 / 4)                       # the reduce-scatter's 4 buckets, 8 s under a 100 s backward
    bucketed = _dp_exposed(colls, 1.0, 100.0, 4, 8, 1, None, False, buckets=4)
    one = _dp_exposed(colls, 1.0, 100.0, 4, 8, 1, None, False, buckets=4, one_gather=True)
    assert bucketed == pytest.approx(4 * (1.0 + 2 / 4) + max(rs / 4, rs - 100.0))
    assert one == pytest.approx(1.0 + 2.0 + max(rs / 4, rs - 100.0))
    no_step_gather = zr.collectives(1, 1.0, 2, 4)
    assert (_dp_exposed(no_step_gather, 1.0, 100.0, 4, 8, 1, None, False, buckets=4, one_gather=True)
            == _dp_exposed(no_step_gather, 1.0, 100.0, 4, 8, 1, None, False, buckets=4))
    assert _on("one_param_gather") == {"nanotron"}
    assert "all_gather_coalesced" in load_stack("nanotron")["fields"]["one_param_gather"]["source"]
    assert not any(r.one_param_gather for r in ALL_PRESETS.values())
