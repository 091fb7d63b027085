"""Honest fills (lib/galvatron/fills.py): a null field is searched alone for the fastest setting that fits;
stated fields never change; validate reports what it filled with what."""

from dataclasses import replace
from pathlib import Path

import pytest

from lib.galvatron.fills import SEARCHED, candidates, fill_by_search
from lib.galvatron.published import load_runs, to_config, to_job
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.validate import estimate_run, run_rules, validate_runs

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "data" / "published_runs" / "calibration.json"


@pytest.fixture(scope="module")
def by():
    return {r.name: r for r in load_runs(str(CAL)).runs}


def test_a_null_zero_stage_is_filled_with_the_fastest_that_fits(by):
    """Hand-made: Llama 3 on 16,384 GPUs with its ZeRO stage and interleaving unstated, on a GPU too small for
    ZeRO-0/1: the search must pick a stage that fits, and every stage it did not pick is slower or does not
    fit."""
    r = by["llama3-405b-16384-8192"]
    job, rules = to_job(r), run_rules(r)
    small = replace(job, gpu=replace(job.gpu, usable_mem_bytes=78e9))
    cfg = replace(to_config(r), zero=0)
    got, est, values = fill_by_search(small, cfg, ["zero"], rules)
    assert est["fits"] and set(values) == {"zero"} and got.zero == values["zero"]
    for z in (0, 1, 2, 3):
        e = step_estimate(small, replace(cfg, zero=z), rules)
        assert not e["fits"] or e["tokens_per_s_per_gpu"] <= est["tokens_per_s_per_gpu"]
    assert not step_estimate(small, cfg, rules)["fits"]          # the default (ZeRO-0) would not fit


def test_stated_fields_are_never_changed(by):
    r = by["sc21-gpt-18.4b"]                                      # every config field stated but vp
    e = estimate_run(r)
    c, s = e["config"], r.config
    assert (c.micro_batch, c.zero, c.recompute, c.sequence_parallel) == \
        (s.micro_batch, s.zero, s.recompute, bool(s.sequence_parallel))
    assert set(e["searched"]) == {"vp"}
    # nothing null: the published configuration itself
    cfg = to_config(r)
    got, est, values = fill_by_search(to_job(r), cfg, [], run_rules(r))
    assert got == cfg and values == {} and est == step_estimate(to_job(r), cfg, run_rules(r))


def test_llama3_is_filled_with_one_layer_chunks_and_fits(by):
    """With the ZeRO stage its paper states (2), the search fills Llama 3's unstated interleaving with the
    one-layer chunks of its section 3.3.2 (VP 8), which fit; plain 1F1B (the old default) is slower."""
    for name in ("llama3-405b-8192-8192", "llama3-405b-16384-8192"):
        r = by[name]
        e, one = estimate_run(r), estimate_run(r, fill="one")
        assert r.config.zero == 2 and e["searched"]["vp"] == 8 and e["fits"]
        assert e["tokens_per_s_per_gpu"] > one["tokens_per_s_per_gpu"]


def test_candidates():
    job = to_job(load_runs(str(CAL)).runs[-1])                   # Llama 3 on 16,384: 16 sequences a replica
    cfg = to_config(load_runs(str(CAL)).runs[-1])
    assert candidates("micro_batch", cfg, job) == [1]             # m >= pp = 16 leaves only 1
    assert candidates("vp", cfg, job) == [1, 2, 4, 8]             # 16 x 8 = 128 <= 126 + 2
    assert candidates("sequence_parallel", replace(cfg, tp=1), job) == [False]
    with pytest.raises(ValueError, match="field must be one of"):
        candidates("tp", cfg, job)
    # a stack's limits bound the fill: nanotron (ZeRO-1 at most, no interleaving, no selective recompute),
    # SC'21's Megatron-LM (no ZeRO, no sequence parallelism)
    from lib.galvatron.search.rules import PRACTICE
    from lib.galvatron.stacks import stack_rules

    nano, old = stack_rules(PRACTICE, "nanotron"), stack_rules(PRACTICE, "megatron-lm-2021")
    assert candidates("zero", cfg, job, nano) == [0, 1] and candidates("zero", cfg, job, old) == [0]
    assert candidates("vp", cfg, job, nano) == [1] and candidates("recompute", cfg, job, nano) == ["none", "full"]
    assert candidates("sequence_parallel", cfg, job, old) == [False]
    assert candidates("zero", cfg, job, PRACTICE) == [0, 1, 2, 3]
    assert SEARCHED == ("zero", "recompute", "sequence_parallel", "vp", "micro_batch")


def test_the_report_says_what_was_filled_with_what(by):
    rep = validate_runs([("cal", by["llama3-405b-16384-8192"])], search=False, progress=False)
    filled = rep["runs"][0]["filled"]
    assert "vp=8 (searched)" in filled and "micro_batch=1 (searched)" in filled
    assert not any(f.startswith("vp=1") for f in filled)
    assert rep["runs"][0]["config"].startswith("TP 8, PP 16, DP 128, VP 8")
