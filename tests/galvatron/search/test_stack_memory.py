"""Two stack fields for what a stack keeps in memory (rules.STACK_FIELDS, data/stacks/): ``keeps_stage_outputs``
(DeepSpeed's PipelineEngine and torch.distributed.pipelining keep each in-flight micro-batch's stage output until
its backward) and ``keeps_16bit_grads`` (DeepSpeed's BF16_Optimizer zeroes the 16-bit grads rather than freeing
them, beside its fp32 copy). Both change the peak only, never the step time."""

from dataclasses import replace

import numpy as np
import pytest

from lib.galvatron import practice_picks as pp
from lib.galvatron.published import load_runs, to_config, to_job
from lib.galvatron.search import schedules as sch
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.search.rules import ALL_PRESETS
from lib.galvatron.stacks import load_stack, stack_names
from lib.galvatron.validate import run_rules

FIELDS = ("keeps_stage_outputs", "keeps_16bit_grads")


def _on(field):
    return {n for n in stack_names() if load_stack(n)["fields"][field]["value"]}


def _run(file, name):
    return next(r for r in load_runs(str(pp.RUNS_DIR / file)).runs if r.name == name)


def _with(run, **fields):
    job, cfg = to_job(run), to_config(run)
    return job, cfg, step_estimate(job, cfg, replace(run_rules(run), **fields))


def test_fields_off_in_every_preset_and_on_where_the_code_keeps_the_memory():
    assert not any(getattr(r, f) for r in ALL_PRESETS.values() for f in FIELDS)
    assert _on("keeps_stage_outputs") == {"deepspeed", "fsdp", "megatron-lm-2021"}
    assert _on("keeps_16bit_grads") == {"deepspeed"}
    assert "pipe_buffers['outputs']" in load_stack("deepspeed")["fields"]["keeps_stage_outputs"]["source"]
    assert "deallocate_pipeline_outputs" in load_stack("megatron-lm")["fields"]["keeps_stage_outputs"]["source"]
    assert "lp.grad.zero_()" in load_stack("deepspeed")["fields"]["keeps_16bit_grads"]["source"]


def test_kept_stage_outputs_are_one_boundary_tensor_per_micro_batch_in_flight():
    """An fp16 BLOOM layout (TP 8, PP 6, DeepSpeed's 1F1B): stage i holds min(m, pp - i) outputs of
    s x mb x h x 2 bytes more; the last stage (its output is the loss) nothing more; the step time not at all."""
    run = _run("bloom_topology.json", "bloom-prequel-181b-48n#dp8-pp6-mbs4")
    job, cfg, on = _with(run, keeps_stage_outputs=True)
    _, _, off = _with(run, keeps_stage_outputs=False)
    m = on["micro_batches"]
    boundary = cfg.micro_batch * job.shape.seq_len * job.shape.hidden * 2
    added = np.subtract(on["stage_peak_bytes"], off["stage_peak_bytes"])
    want = [sch.in_flight("1f1b", cfg.pp, m, i) * boundary for i in range(cfg.pp - 1)] + [0.0]
    assert added == pytest.approx(want, rel=1e-9)
    assert added[0] > 0 and on["step_s"] == off["step_s"]


def test_kept_stage_outputs_need_a_pipeline_and_are_sharded_under_sequence_parallelism():
    run = _run("bloom_topology.json", "bloom-prequel-181b-48n#dp8-pp6-mbs4")
    job, cfg = to_job(run), to_config(run)
    rules = run_rules(run)
    flat, whole = replace(cfg, pp=1, dp=cfg.dp * cfg.pp), replace(job, global_batch=1920)  # 10 x dp 48 x mb 4
    assert (step_estimate(whole, flat, rules)["peak_bytes"]
            == step_estimate(whole, flat, replace(rules, keeps_stage_outputs=False))["peak_bytes"])
    sp, rsp = replace(cfg, sequence_parallel=True), replace(rules, without_sequence_parallel=False)
    gap = lambda c, r: (step_estimate(job, c, r)["stage_peak_bytes"][0]
                        - step_estimate(job, c, replace(r, keeps_stage_outputs=False))["stage_peak_bytes"][0])
    assert gap(sp, rsp) == pytest.approx(gap(cfg, rules) / cfg.tp, rel=1e-9)


def test_bf16_optimizer_holds_two_more_bytes_per_parameter_and_fp16_runs_are_unchanged():
    """The BF16 optimizer's 16-bit grads, on every rank (not sharded): 2 bytes a parameter of the stage."""
    run = _run("bloom_bf16_sweeps.json", "bloom-prequel-176b-48n-bf16#dp8-tp4-pp12-mbs2")
    assert run.precision == "bf16"
    job, cfg, on = _with(run, keeps_16bit_grads=True)
    _, _, off = _with(run, keeps_16bit_grads=False)
    middle = len(on["stage_peak_bytes"]) // 2
    params = on["stage_layers"][middle] * job.shape.layer_params() / cfg.tp     # a middle stage's layers
    assert on["stage_peak_bytes"][middle] - off["stage_peak_bytes"][middle] == pytest.approx(2 * params, rel=0.05)
    assert on["step_s"] == off["step_s"]
    # ZeRO-2/3 take DeepSpeed's ZeRO optimizer, not the BF16 one: nothing more
    z2 = replace(cfg, zero=2)
    assert (step_estimate(job, z2, replace(run_rules(run), keeps_16bit_grads=True))["peak_bytes"]
            == step_estimate(job, z2, replace(run_rules(run), keeps_16bit_grads=False))["peak_bytes"])
    fp16 = _run("bloom_tp_sweep.json", load_runs(str(pp.RUNS_DIR / "bloom_tp_sweep.json")).runs[0].name)
    assert fp16.precision == "fp16"
    assert _with(fp16, keeps_16bit_grads=True)[2]["peak_bytes"] == _with(fp16, keeps_16bit_grads=False)[2][
        "peak_bytes"]


def test_memory_errors_with_a_field_switched_off():
    """What the field adds to the BF16-optimizer rows, against nvidia-smi's memory: without it every row is
    further below; a name that is no stack field is refused, naming it."""
    on = pp.memory_errors("bloom_bf16_sweeps.json")
    off = pp.memory_errors("bloom_bf16_sweeps.json", without=("keeps_16bit_grads",))
    assert len(on) == len(off) == 8 and all(b < a < 0 for a, b in zip(on, off))
    with pytest.raises(ValueError, match="without: 'nope' is not a stack field"):
        pp.memory_errors("bloom_bf16_sweeps.json", without=("nope",))
