"""Memory, estimated against measured: the runtime counts each rank's peak by category (``memory``) and the
cost model's estimate (``memory_report``) must land within ``TOLERANCE`` of it for DP, SDP (FSDP2 and the
hand-written fallback), TP and a 2-stage pipeline with 4 micro-batches in flight, on gloo. A deliberately
wrong estimate (no optimizer states, one micro-batch's activations) must fail the same check."""

import dataclasses
import time

import pytest
import torch

from lib.galvatron.runtime import memory_report as mr
from lib.galvatron.runtime.launch import spawn_local
from lib.galvatron.runtime.memory import CATEGORIES, MemoryRecord, StepMemory, mark_gathered, region
from lib.galvatron.runtime.model import ModelConfig
from lib.galvatron.runtime.plan import RunPlan
from lib.galvatron.runtime.profiler import memory_profile

CFG = ModelConfig(d_model=64, n_layer=4, n_head=4, seq_len=32)
B = 16
PLANS = {
    "dp": RunPlan.uniform(2, 4, 1, 1, False, True, B, 1),
    "sdp": RunPlan.uniform(2, 4, 1, 1, True, True, B, 1),
    "tp": RunPlan.uniform(2, 4, 1, 2, False, True, B, 1),
    "pp, 4 micro-batches": RunPlan.uniform(2, 4, 2, 1, False, True, B, 4),
}


@pytest.fixture(scope="module")
def runs():
    """Every plan once on 2 gloo ranks (one spawn), Adam so that the model states are the cost model's four
    copies; SDP under both implementations."""
    out = {}
    for impl in ("fsdp2", "manual"):
        plans = list(PLANS.values()) if impl == "fsdp2" else [PLANS["sdp"]]
        job = {"kind": "train", "plans": [p.to_dict() for p in plans], "model": CFG.to_dict(), "steps": 1,
               "warmup": 0, "optimizer": "adam", "sdp_impl": "auto" if impl == "fsdp2" else impl}
        ranks = spawn_local(job, 2, timeout_s=240)
        names = list(PLANS) if impl == "fsdp2" else ["sdp manual"]
        for i, name in enumerate(names):
            out[name] = [{"rank": r["rank"], "stage": r["runs"][i]["stage"], "memory": r["runs"][i]["memory"],
                          "sdp_impl": r["runs"][i]["sdp_impl"]} for r in ranks]
    return out


@pytest.fixture(scope="module")
def profile():
    return memory_profile(CFG)


def _plan(name):
    return PLANS[name.replace(" manual", "")]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(PLANS))
def test_estimate_within_tolerance_of_measured(runs, profile, name):
    rows = mr.memory_comparison(_plan(name), profile, runs[name])
    assert len(rows) == 2 * len(mr.TERMS)
    assert mr.within(rows), [(r["rank"], r["term"], round(r["error"], 3)) for r in rows]


@pytest.mark.timeout(300)
def test_pipeline_keeps_every_micro_batch_in_flight(runs, profile):
    """GPipe keeps the activations of all 4 micro-batches: the estimate of one micro-batch's (1/4) fails."""
    plan = PLANS["pp, 4 micro-batches"]
    assert plan.chunks == 4 and {r["stage"] for r in runs["pp, 4 micro-batches"]} == {0, 1}
    one_mb = dataclasses.replace(profile.layer_types[0], act_mb_per_sample={
        k: v / plan.chunks for k, v in profile.layer_types[0].act_mb_per_sample.items()})
    wrong = dataclasses.replace(profile, layer_types=(one_mb,),
                                other_act_mb_per_sample=profile.other_act_mb_per_sample / plan.chunks)
    rows = mr.memory_comparison(plan, wrong, runs["pp, 4 micro-batches"])
    assert not mr.within(rows, terms=("activations",))
    assert mr.worst(rows, ("activations",))["error"] < -0.5


@pytest.mark.timeout(300)
def test_model_states_without_the_optimizer_fail(runs, profile):
    """Counting weights and gradients only (2 x P instead of 4 x P) misses Adam's moments by far."""
    layer = profile.layer_types[0]
    wrong = dataclasses.replace(profile, layer_types=(dataclasses.replace(layer, param_mb=layer.param_mb / 2),),
                                other_model_states_mb=profile.other_model_states_mb / 2)
    rows = mr.memory_comparison(PLANS["dp"], wrong, runs["dp"])
    assert not mr.within(rows, terms=("model_states",))


@pytest.mark.timeout(300)
def test_sdp_gathered_weights_are_transient_and_bounded(runs):
    """FSDP2 reshards after each layer's forward: at most one layer's full weights are gathered at a time
    (plus its backward re-gather); the hand-written fallback keeps every layer's gathered weights until
    backward, dp times what the cost model's 0.025 bias allows for."""
    layer_bytes = CFG.block_param_count() * 4
    for r in runs["sdp"]:
        assert r["sdp_impl"] == "fsdp2"
        assert 0 < r["memory"]["maxima"]["gathered_params"] <= 2 * layer_bytes
    for r in runs["sdp manual"]:
        assert r["sdp_impl"] == "manual"
        g = r["memory"]["maxima"]["gathered_params"]
        assert CFG.n_layer * layer_bytes <= g <= CFG.n_layer * layer_bytes * 1.01


@pytest.mark.timeout(300)
def test_every_record_is_valid_and_ends_with_the_model_states(runs):
    for name, ranks in runs.items():
        for r in ranks:
            rec = MemoryRecord.from_dict(r["memory"])
            assert rec.end_bytes == rec.at_peak["model_states"] == rec.maxima["model_states"], name
            assert rec.peak_bytes > rec.end_bytes


def test_counting_sees_saved_activations_and_frees():
    """One linear layer: what autograd saves (the input) is activations; the weight is a model state; a freed
    temporary leaves the count; a buffer made in region("comm") is a communication buffer."""
    w = torch.nn.Parameter(torch.randn(256, 256))
    x = torch.randn(64, 256, requires_grad=True)
    tracker = StepMemory()
    tracker.register_model_states([w])
    with tracker:
        y = torch.nn.functional.linear(x, w)
        with region("comm"):
            buf = torch.empty(1000)
        tmp = torch.ones(4096) * 2
        del tmp
        y.sum().backward()
        del buf
    rec = tracker.record()
    assert rec.maxima["model_states"] == 256 * 256 * 4
    assert rec.maxima["activations"] == 64 * 256 * 4        # x, saved for the weight's gradient
    assert rec.maxima["comm_buffers"] == 4000
    assert rec.maxima["other_transient"] >= 4096 * 4
    assert rec.end_bytes < rec.peak_bytes


def test_gathered_mark_and_nesting():
    t = torch.randn(100)
    with StepMemory() as tracker:
        full = t * 1
        mark_gathered([full])
        with pytest.raises(RuntimeError, match="already counting"):
            StepMemory().__enter__()
    assert tracker.record().maxima["gathered_params"] == 400
    with pytest.raises(ValueError, match="memory region must be one of"):
        with region("gather"):
            pass


def test_a_record_that_does_not_add_up_is_refused():
    split = dict.fromkeys(CATEGORIES, 0)
    good = {"peak_bytes": 10, "at_peak": dict(split, activations=10), "maxima": dict(split, activations=10),
            "end_bytes": 0}
    assert MemoryRecord.from_dict(good).peak_bytes == 10
    with pytest.raises(ValueError, match="at_peak sums to 10 bytes, not peak_bytes = 11"):
        MemoryRecord.from_dict(dict(good, peak_bytes=11))
    with pytest.raises(ValueError, match="maxima.activations = 5 must lie between"):
        MemoryRecord.from_dict(dict(good, maxima=dict(split, activations=5)))
    with pytest.raises(ValueError, match="at_peak.model_states = -1"):
        MemoryRecord.from_dict(dict(good, at_peak=dict(split, activations=11, model_states=-1)))
    with pytest.raises(ValueError, match="unknown fields \\['extra'\\]"):
        MemoryRecord.from_dict(dict(good, extra=1))
    with pytest.raises(ValueError, match="exactly the categories"):
        MemoryRecord.from_dict(dict(good, maxima={"activations": 10}))


def test_stage_estimate_matches_the_cost_model_terms(profile):
    """The per-stage estimate is the cost model's own functions: DP holds 4 x all parameters, SDP over 2
    ranks (1/2 + 0.025) of the layers', a pipeline stage half the layers but every micro-batch."""
    lay, P = profile.layer_types[0], profile.layer_types[0].param_mb
    dp = mr.stage_estimate(PLANS["dp"], profile, 0)
    assert dp["model_states"] == pytest.approx(4 * 4 * P + profile.other_model_states_mb)
    assert dp["activations"] == pytest.approx(4 * lay.act_mb(1) * B / 2 + profile.other_act_mb_per_sample * B / 2)
    sdp = mr.stage_estimate(PLANS["sdp"], profile, 0)
    assert sdp["model_states"] == pytest.approx(4 * 4 * P * 0.525 + profile.other_model_states_mb)
    pp = [mr.stage_estimate(PLANS["pp, 4 micro-batches"], profile, s) for s in (0, 1)]
    assert pp[0] == pp[1] and pp[0]["activations"] == pytest.approx(
        2 * lay.act_mb(1) * B + profile.other_act_mb_per_sample * B)
    with pytest.raises(ValueError, match="stage 2 is not a stage"):
        mr.stage_estimate(PLANS["pp, 4 micro-batches"], profile, 2)



@pytest.mark.timeout(300)
def test_the_hand_written_sdp_misses_the_peak_by_its_gathered_weights(runs, profile):
    """The documented gap: the fallback keeps every layer's gathered weights until backward, which the cost
    model (a 0.025 bias per layer) does not charge, so its peak is under-estimated by more than the
    tolerance; adding back the gathered weights beyond the bias brings it within."""
    plan = PLANS["sdp"]
    rows = mr.memory_comparison(plan, profile, runs["sdp manual"])
    assert mr.within(rows, terms=("model_states", "activations"))
    assert not mr.within(rows, terms=("peak",))
    for r, m in zip([r for r in rows if r["term"] == "peak"], runs["sdp manual"]):
        bias_mb = CFG.n_layer * 4 * profile.layer_types[0].param_mb * 0.025
        gathered = m["memory"]["maxima"]["gathered_params"] / mr.MB
        assert abs((r["estimated_mb"] + gathered - bias_mb) / r["measured_mb"] - 1) <= mr.TOLERANCE


@pytest.mark.timeout(120)
def test_cli_run_report_holds_each_rank_memory_by_category(tmp_path):
    """``python -m lib.galvatron run`` (one rank in this process) writes the record in its summary, checked;
    a summary whose categories do not add up is refused naming the rank."""
    import json

    from lib.galvatron.__main__ import main

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"pp_deg": 1, "tp_sizes_enc": "1,1", "tp_consecutive_flags": "1,1",
                                "dp_types_enc": "0,0", "global_bsz": 4, "chunks": 1, "world_size": 1}))
    out = tmp_path / "out.json"
    assert main(["run", "--plan", str(plan), "--steps", "1", "--warmup", "0", "--optimizer", "adam",
                 "--out", str(out)]) == 0
    summary = json.loads(out.read_text())
    rec = MemoryRecord.from_dict(summary["ranks"][0]["runs"][0]["memory"])
    cfg = ModelConfig(n_layer=2)  # the CLI's default model
    params = (cfg.n_layer * cfg.block_param_count() + cfg.other_param_count()) * 4
    n_tensors = cfg.n_layer * 12 + 2 + 3  # Adam also keeps a 4-byte step count per parameter tensor
    assert rec.maxima["model_states"] == 4 * params + 4 * n_tensors  # weights, gradients, two moments
    assert rec.maxima["activations"] > 0
    bad = json.loads(out.read_text())
    bad["ranks"][0]["runs"][0]["memory"]["peak_bytes"] += 1
    with pytest.raises(ValueError, match="rank 0, plan 0: memory record: at_peak sums"):
        mr.validate_summary(bad)


@pytest.mark.timeout(300)
def test_cli_memory_prints_and_writes_the_comparison(tmp_path):
    """``python -m lib.galvatron memory`` on 2 gloo ranks, a tiny model: a row per plan and stage, the JSON
    written whole, every record valid; a bad flag is one line."""
    import json

    from lib.galvatron.__main__ import main
    from tests.cli_helpers import assert_one_line, call_main

    out = tmp_path / "mem.json"
    rc, text, err = call_main(main, ["memory", "--d-model", "32", "--seq-len", "8", "--n-layer", "2",
                                     "--global-bsz", "8", "--out", str(out)])
    assert rc == 0, err
    d = json.loads(out.read_text())
    names = [r["name"] for r in d["rows"]]
    assert names[:3] == ["dp", "sdp", "tp"] and "pp, m=4, stage 1" in names and names[-1] == "sdp, hand-written"
    for name, ranks in d["measured"].items():
        for r in ranks:
            MemoryRecord.from_dict(r["memory"])
    flat = [r for r in d["rows"] if not r["name"].startswith("pp")]
    assert all(abs(r["err_model_states"]) <= mr.TOLERANCE for r in flat)
    # the documented gap, large at this tiny size: the embedding and head charged to every stage
    first = next(r for r in d["rows"] if r["name"] == "pp, m=2, stage 0")
    assert first["err_activations"] > mr.TOLERANCE
    assert "pp, m=2, stage 0" in text and "estimated by the cost model" in text
    rc, _, err = call_main(main, ["memory", "--n-head", "3"])
    assert_one_line(rc, err, "--n-head 3")


@pytest.mark.timeout(300)
def test_charging_the_other_memory_where_it_lives_fixes_the_first_stage(runs, profile):
    """The VLDB rule charges embedding and head to every stage; with the measured split (embedding to the
    first stage, head to the last) both pipeline stages come within 2 % for model states and activations."""
    from lib.galvatron.runtime.profiler import other_split

    plan, measured = PLANS["pp, 4 micro-batches"], runs["pp, 4 micro-batches"]
    split = other_split(CFG)
    assert sum(split["states"]) == pytest.approx(1) and split["act"][1] > 0.9  # the head saves the most
    before = mr.memory_comparison(plan, profile, measured)
    after = mr.memory_comparison(plan, profile, measured, split)
    first = lambda rows: next(r for r in rows if r["stage"] == 0 and r["term"] == "activations")  # noqa: E731
    assert first(after)["error"] < first(before)["error"]
    assert mr.within(after, 0.02, terms=("model_states", "activations"))
    assert not mr.within(before, 0.02, terms=("model_states", "activations"))
    one = mr.memory_comparison(PLANS["dp"], profile, runs["dp"], split)  # one stage holds all of it
    assert one == mr.memory_comparison(PLANS["dp"], profile, runs["dp"])


def test_the_end_count_waits_for_a_buffer_another_thread_lets_go_of():
    """A communication thread may drop its last reference to a bucket a moment after the step (CI once counted
    such a 41 KB buffer of the hand-written SDP as live): ``record`` gives transients ``settle_s`` to go, and a
    buffer still held after it counts."""
    import threading

    w = torch.nn.Parameter(torch.randn(64))
    for hold_s, settle_s, counted in ((0.2, 2.0, False), (1.0, 0.1, True)):
        tracker = StepMemory()
        tracker.register_model_states([w])
        held = []
        with tracker:
            with region("comm"):
                held.append(torch.empty(10_000))
        threading.Timer(hold_s, held.clear).start()
        rec = tracker.record(settle_s=settle_s)
        assert rec.end_bytes == 64 * 4 + (40_000 if counted else 0)
        time.sleep(hold_s)
