"""Software stacks as data (data/stacks/, lib/galvatron/stacks.py) and the SC'21 Table 2 runs they price
(data/published_runs/sc21_table2.json)."""

import json
from pathlib import Path

import numpy as np
import pytest

from lib.cli_errors import run_cli
from lib.galvatron.published import load_runs
from lib.galvatron.search.rules import PRACTICE, STACK_FIELDS, STACK_NUMBERS
from lib.galvatron.stacks import DEFAULT_STACK, load_stack, stack_names, stack_rules
from lib.galvatron.validate import estimate_run, main, run_rules

ROOT = Path(__file__).resolve().parents[2]
T2 = ROOT / "data" / "published_runs" / "sc21_table2.json"


def test_every_stack_value_has_a_source():
    assert DEFAULT_STACK in stack_names() and {"deepspeed", "fsdp"} <= set(stack_names())
    for name in stack_names():
        d = load_stack(name)
        assert d["name"] == name and d["description"]
        assert set(d["fields"]) == set(STACK_FIELDS + STACK_NUMBERS)
        for k, v in d["fields"].items():
            kind = int if k in STACK_NUMBERS else bool
            assert type(v["value"]) is kind and len(v["source"]) > 20
    with pytest.raises(ValueError, match="unknown stack 'nemo-9'"):
        load_stack("nemo-9")


def test_the_default_stack_adds_its_buckets_and_limit_and_deepspeed_flattens_zero3():
    assert stack_rules(PRACTICE) == PRACTICE.with_(name="practice", dp_bucket_params=40_000_000,
                                                   dp_bucket_per_rank=1_000_000, without_op_recompute=True)
    ds = stack_rules(PRACTICE, "deepspeed")
    assert ds.flat_zero3_collectives and not PRACTICE.flat_zero3_collectives


def test_table2_transcribes_the_source():
    rs = load_runs(str(T2)).runs
    assert len(rs) == 12
    tflops = {r.name: r.measured.tflops_per_gpu for r in rs}
    assert [tflops[f"sc21-t2-175b-{n}gpu#zero3"] for n in (384, 768, 1536)] == [144, 88, 44]
    assert [tflops[f"sc21-t2-530b-{n}gpu#zero3"] for n in (640, 1120, 2240)] == [138, 98, 48]
    assert [tflops[f"sc21-t2-175b-{n}gpu#ptdp"] for n in (384, 768, 1536)] == [153, 149, 141]
    assert [tflops[f"sc21-t2-530b-{n}gpu#ptdp"] for n in (560, 1120, 2240)] == [171, 167, 159]
    for r in rs:                          # tokens/s from eq. (3): 96 l h^2 (1 + s/6h + V/16lh) per token
        m = r.model
        per_token = 96 * m.layers * m.hidden ** 2 * (1 + m.seq_len / (6 * m.hidden)
                                                     + m.vocab / (16 * m.layers * m.hidden))
        assert r.measured.tokens_per_s_per_gpu == pytest.approx(r.measured.tflops_per_gpu * 1e12 / per_token,
                                                                 abs=0.06)
        assert (r.stack == "deepspeed") == (r.config.zero == 3)


def test_zero3_at_scale_is_priced_by_its_mechanism():
    """The issue's miss: priced hierarchically, the ZeRO-3 rows are 20-291% too fast and flat while the
    measured rate halves per doubling; with DeepSpeed's flat rings every row is within 30% and the estimate
    falls as the measurement does. (Within 25% before buckets: DeepSpeed's 5e8-element buckets, each paying a flat ring's
    latency over up to 2,240 ranks, took the 2,240-GPU rows from -14% to -22% and -26%.)"""
    rs = [r for r in load_runs(str(T2)).runs if r.config.zero == 3]
    flat = [estimate_run(r)["error"] for r in rs]
    hier = [estimate_run(r.model_copy(update={"stack": None}))["error"] for r in rs]
    assert max(np.abs(flat)) <= 0.30 and min(hier) > 0.15 and max(hier) > 2.5
    # the estimate falls with each doubling of the GPUs as the measurement does (ratios 0.61, 0.50, 0.71 and
    # 0.49), not flat as the hierarchical rule prices it
    est = [estimate_run(r)["tokens_per_s_per_gpu"] for r in rs]
    meas = [r.measured.tokens_per_s_per_gpu for r in rs]
    for i in (0, 1, 3, 4):
        ratio, measured = est[i + 1] / est[i], meas[i + 1] / meas[i]
        assert ratio < 0.75 and abs(ratio - measured) < 0.15, (i, ratio, measured)
    assert run_rules(rs[0]).flat_zero3_collectives


def test_an_unknown_stack_is_one_line_naming_run_and_field(tmp_path, capsys):
    d = json.loads(T2.read_text())
    d["runs"][0]["stack"] = "jax"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    code = run_cli(main, ["--runs", str(p), "--no-search"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "run 'sc21-t2-175b-384gpu#zero3': field stack: unknown stack 'jax'" in err and "deepspeed" in err


def _layouts_under(run_name: str, *stacks) -> tuple:
    """(the calibration run's job, the search's layouts for it under each of ``stacks``)."""
    from lib.galvatron.published import to_job
    from lib.galvatron.search.practice_search import layouts

    run = next(r for r in load_runs(str(ROOT / "data" / "published_runs" / "calibration.json")).runs
               if r.name == run_name)
    job = to_job(run)
    return job, [list(layouts(job, stack_rules(PRACTICE, s))) for s in stacks]


def test_a_stacks_limits_leave_its_missing_features_out_of_the_search():
    """megatron-lm-2021 (SC'21's Megatron-LM): no layout with SP, selective recompute, a ZeRO stage, CP or
    uneven stages; today's stack offers each of them on the same job."""
    from lib.galvatron.search.practice_search import layouts
    from lib.galvatron.published import to_job

    job, (old, new) = _layouts_under("sc21-gpt-145.6b", "megatron-lm-2021", "megatron-lm")
    assert old and len(old) < len(new)
    L = job.shape.n_layers
    for c in old:
        assert not c.sequence_parallel and c.recompute in ("none", "full") and c.zero == 0 and c.cp == 1
        assert L % c.pp == 0 and (L // c.pp) % c.vp == 0
    assert any(c.sequence_parallel for c in new) and any(c.recompute == "selective" for c in new)
    assert any(c.zero > 0 for c in new) and any(c.cp > 1 for c in new) and any(L % c.pp for c in new)
    # the published layout is in 2021's space (vp 3 on 3 layers a stage included for the 530B run)
    for name in ("sc21-gpt-145.6b", "sc21-gpt-529.6b"):
        r = next(x for x in load_runs(str(ROOT / "data" / "published_runs" / "calibration.json")).runs
                 if x.name == name)
        cfg = estimate_run(r)["config"]
        assert cfg in set(layouts(to_job(r), run_rules(r)))


def test_only_the_fused_attention_limit_changes_a_price():
    """The search-only limits leave every estimate as it was; without_fused_attention keeps the scores and
    prices the whole square at the GEMMs' rate, so the step is slower and, without recompute, fuller."""
    from dataclasses import replace as dc_replace

    from lib.galvatron.published import to_job
    from lib.galvatron.search.cost import step_estimate
    from lib.galvatron.search.layout import ParallelConfig
    from lib.galvatron.search.rules import STACK_LIMITS

    run = next(r for r in load_runs(str(ROOT / "data" / "published_runs" / "calibration.json")).runs
               if r.name == "sc21-gpt-18.4b")
    job, cfg = to_job(run), ParallelConfig(tp=8, pp=1, dp=32, micro_batch=1, recompute="none")
    base = step_estimate(job, cfg, PRACTICE)
    for f in STACK_LIMITS:
        e = step_estimate(job, cfg, dc_replace(PRACTICE, **{f: True}))
        if f == "without_fused_attention":
            assert e["step_s"] > base["step_s"] and e["peak_bytes"] > base["peak_bytes"]
        else:
            assert e == base, f


def test_a_stack_of_another_year_shares_its_familys_mfu_bound():
    from lib.galvatron.plausibility import best_published_mfu
    from lib.galvatron.stacks import stack_family

    assert stack_family("megatron-lm-2021") == "megatron-lm" == stack_family(None)
    # a quoted MFU (no layout stated) counts for its family: Korthikanti et al.'s 54.2% on A100
    assert best_published_mfu("a100-sxm-80gb", "megatron-lm")["mfu"] == 0.542
    assert stack_family("deepspeed") == "megatron-lm" and stack_family("llm-foundry") == "fsdp"
    assert stack_family("fsdp") == "fsdp"
    assert best_published_mfu("a100-sxm-80gb", "megatron-lm-2021") == best_published_mfu("a100-sxm-80gb",
                                                                                          "megatron-lm")


def test_a_stack_file_with_a_bad_family_or_quoted_mfu_is_refused(tmp_path, monkeypatch):
    import lib.galvatron.stacks as st

    good = load_stack("megatron-lm")
    for f in ("megatron-lm",):
        (tmp_path / f"{f}.json").write_text(json.dumps(good))
    bad = {"zz-no-family": {**good, "name": "zz-no-family", "family": "nemo-9", "family_source": "x"},
           "zz-no-source": {**good, "name": "zz-no-source", "family": "megatron-lm"},
           "zz-bad-mfu": {**good, "name": "zz-bad-mfu", "quoted_mfu": [{"gpu": "a100-sxm-80gb", "mfu": 54.2,
                                                                        "what": "x", "source": "y"}]},
           "zz-bad-chosen": {**good, "name": "zz-bad-chosen",
                             "fields": {**good["fields"], "queued_collectives": {
                                 "value": True, "source": "a quote", "chosen_on": "llama3-405b-8192-8192"}}},
           "zz-bad-bucket": {**good, "name": "zz-bad-bucket",
                             "fields": {**good["fields"], "dp_bucket_params": {"value": True, "source": "x"}}},
           "zz-neg-bucket": {**good, "name": "zz-neg-bucket",
                             "fields": {**good["fields"], "dp_bucket_layers": {"value": -1, "source": "x"}}}}
    for name, d in bad.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(d))
    monkeypatch.setattr(st, "STACK_DIR", tmp_path)
    st.load_stack.cache_clear()
    try:
        with pytest.raises(ValueError, match="field family"):
            st.load_stack("zz-no-family")
        with pytest.raises(ValueError, match="field family"):
            st.load_stack("zz-no-source")
        with pytest.raises(ValueError, match=r"quoted_mfu\[0\]"):
            st.load_stack("zz-bad-mfu")
        with pytest.raises(ValueError, match=r"'zz-bad-chosen': field fields.queued_collectives.chosen_on: must be a "
                                             r"list of run names"):
            st.load_stack("zz-bad-chosen")
        with pytest.raises(ValueError, match=r"'zz-bad-bucket': field fields.dp_bucket_params: needs a whole number"):
            st.load_stack("zz-bad-bucket")
        with pytest.raises(ValueError, match=r"fields.dp_bucket_layers: .*got -1"):
            st.load_stack("zz-neg-bucket")
    finally:
        st.load_stack.cache_clear()


def test_aliases_name_their_stack_in_runs_and_in_plan(tmp_path, capsys):
    """The issue's own example says `--stack megatron`: an alias resolves to its stack in plan and in a runs
    file (where the run then carries the stack's own name); an unknown name lists stacks and aliases."""
    from lib.galvatron.stacks import resolve_stack, stack_aliases

    aliases = stack_aliases()
    assert aliases["megatron"] == aliases["nemo"] == "megatron-lm" and aliases["torchtitan"] == "fsdp"
    assert not set(aliases) & set(stack_names())                      # no alias is itself a stack
    assert resolve_stack(None) == DEFAULT_STACK and resolve_stack("megatron-deepspeed") == "deepspeed"
    assert resolve_stack("Megatron-LM") == resolve_stack("NeMo") == resolve_stack("megatron_lm") == "megatron-lm"
    assert resolve_stack(" TorchTitan ") == "fsdp"
    assert load_stack("nemo") == load_stack("megatron-lm")
    with pytest.raises(ValueError, match=r"unknown stack 'jax'; allowed: .*nanotron.*; or an alias: "
                                         r".*torchtitan \(fsdp\)"):
        resolve_stack("jax")
    d = json.loads(T2.read_text())
    d["runs"][0]["stack"] = "megatron-deepspeed"
    p = tmp_path / "alias.json"
    p.write_text(json.dumps(d))
    run = load_runs(str(p)).runs[0]
    assert run.stack == "deepspeed" and run_rules(run).flat_zero3_collectives
    from lib.galvatron.__main__ import main as galvatron_main

    code = run_cli(galvatron_main, ["plan", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64",
                                    "--seq-len", "4096", "--stack", "megatron", "--top", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["stack"] == "megatron-lm"


def test_nanotron_is_planned_within_what_it_can_run():
    """nanotron: ZeRO-1 at most, no interleaving, no selective recompute; today's Megatron-LM offers each of
    them on the same job."""
    _, (nano, mega) = _layouts_under("mcore-h100-70b", "nanotron", "megatron-lm")
    assert nano and len(nano) < len(mega)
    assert all(c.zero <= 1 and c.vp == 1 and c.recompute != "selective" for c in nano)
    assert any(c.zero == 1 for c in nano) and any(c.cp > 1 for c in nano) and any(c.sequence_parallel for c in nano)
    assert any(c.zero >= 2 for c in mega) and any(c.vp > 1 for c in mega)
    assert any(c.recompute == "selective" for c in mega)


def test_stack_allows_reads_each_limit_and_refuses_another_field():
    from lib.galvatron.search.rules import stack_allows

    nano, old = stack_rules(PRACTICE, "nanotron"), stack_rules(PRACTICE, "megatron-lm-2021")
    assert [z for z in range(4) if stack_allows(nano, "zero", z)] == [0, 1]
    assert [z for z in range(4) if stack_allows(old, "zero", z)] == [0]
    assert not stack_allows(nano, "vp", 2) and stack_allows(nano, "vp", 1) and stack_allows(PRACTICE, "vp", 8)
    assert not stack_allows(old, "sequence_parallel", True) and stack_allows(old, "sequence_parallel", False)
    assert not stack_allows(nano, "recompute", "selective") and stack_allows(nano, "recompute", "full")
    with pytest.raises(ValueError, match="field must be one of zero, recompute, sequence_parallel, vp; got 'tp'"):
        stack_allows(PRACTICE, "tp", 2)


def test_deepspeed_keeps_fp16_gradients_in_two_bytes():
    """DeepSpeed's fp16 engine holds and reduces 16-bit gradients (``fp16_gradients``): an fp16 BLOOM layout
    holds 2 bytes less per parameter of its stage than with fp32 gradients; a bf16 run and a Megatron-LM run
    are priced as before."""
    from dataclasses import replace

    from lib.galvatron.published import to_config, to_job
    from lib.galvatron.search.cost import step_estimate

    run = load_runs(str(ROOT / "data" / "published_runs" / "bloom_tp_sweep.json")).runs[0]
    assert run.precision == "fp16" and run_rules(run).fp16_gradients
    assert not stack_rules(PRACTICE).fp16_gradients
    job, cfg, rules = to_job(run), to_config(run), run_rules(run)
    on, off = step_estimate(job, cfg, rules), step_estimate(job, cfg, replace(rules, fp16_gradients=False,
                                                                               keeps_16bit_grads=False))
    # the peak is the first stage's: its layers and the vocabulary-parallel embedding
    params = ((run.model.layers // cfg.pp) * to_job(run).shape.layer_params()
              + run.model.vocab * run.model.hidden) / cfg.tp
    gap = off["peak_bytes"] - on["peak_bytes"]
    assert gap == pytest.approx(2 * params, rel=0.05)
    assert on["step_s"] < off["step_s"]                    # half the bytes in ZeRO-1's reduce-scatter
    bf = replace(job, dtype="bf16")
    assert step_estimate(bf, cfg, rules)["peak_bytes"] == step_estimate(
        bf, cfg, replace(rules, fp16_gradients=False))["peak_bytes"]
