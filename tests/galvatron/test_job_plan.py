"""``python -m lib.galvatron plan --model ...`` (lib/galvatron/job_plan.py): the planner for a reader's own job,
its report, its flags and its one-line errors; and ``--help`` listing ``validate`` and ``plan``."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lib.cli_errors import run_cli
from lib.galvatron.__main__ import main
from lib.galvatron.job_plan import make_job, megatron_flags, plan, read_model
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.search.layout import ParallelConfig
from lib.galvatron.search.rules import PRACTICE
from lib.galvatron.stacks import stack_rules

ROOT = Path(__file__).resolve().parents[2]
LLAMA8B = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "silu", "model_type": "llama"}


def _cli(argv, capsys):
    code = run_cli(main, argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def config(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(LLAMA8B))
    return p


def test_help_lists_validate_and_plan():
    out = subprocess.run([sys.executable, "-m", "lib.galvatron", "--help"], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0 and "validate" in out.stdout and "plan" in out.stdout


def test_an_hf_config_is_read_as_its_shape(config):
    sh = read_model(str(config), 8192)
    assert (sh.n_layers, sh.hidden, sh.n_heads, sh.n_kv_heads) == (32, 4096, 32, 8)
    assert sh.ffn == 14336 and sh.gated_mlp and sh.vocab == 128256 and sh.seq_len == 8192
    assert read_model("llama3-70b", 4096).seq_len == 4096


def test_top_layouts_fit_and_come_fastest_first(config):
    job = make_job(read_model(str(config), 8192), "h100-sxm-80gb", 64, 256)
    rep = plan(job, top=4)
    rows = rep["layouts"]
    assert len(rows) == 4 and rep["priced"] >= 4
    speeds = [r["tokens_per_s_per_gpu"] for r in rows]
    assert speeds == sorted(speeds, reverse=True)
    for r in rows:
        cfg = ParallelConfig(**r["config"])
        assert cfg.n_gpus == 64 and r["fits"] and r["peak_gb"] <= rep["usable_gb"]
        est = step_estimate(job, cfg, stack_rules(PRACTICE))   # the cost model's own numbers, default stack
        assert r["tokens_per_s_per_gpu"] == pytest.approx(est["tokens_per_s_per_gpu"], rel=1e-6)
        assert r["mfu"] == pytest.approx(est["tflops_per_gpu"] / rep["peak_tflops"], abs=1e-4)
        assert 0 < r["mfu"] < 1
        assert sum(r["step_by_kind_s"].values()) == pytest.approx(r["step_s"], rel=1e-3)


def test_flags_and_toml_say_the_first_layout(config):
    job = make_job(read_model(str(config), 8192), "h100-sxm-80gb", 64, 256)
    rep = plan(job, top=1)
    c = ParallelConfig(**rep["layouts"][0]["config"])
    flags = " ".join(rep["megatron"])
    assert f"--tensor-model-parallel-size {c.tp}" in flags and f"--pipeline-model-parallel-size {c.pp}" in flags
    assert f"--micro-batch-size {c.micro_batch}" in flags and "--global-batch-size 256" in flags
    toml = tomllib.loads(rep["torchtitan"])
    p = toml["parallelism"]
    assert p["tensor_parallel_degree"] == c.tp and p["pipeline_parallel_degree"] == c.pp
    assert p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"] == c.dp
    assert toml["training"]["global_batch_size"] == 256 and toml["training"]["seq_len"] == 8192
    assert rep["nemo"]["tensor_model_parallel_size"] == c.tp


def test_zero_stages_and_recompute_map_to_megatron_flags():
    job = make_job(read_model("llama3-8b", 2048), "h100-sxm-80gb", 16, 64)
    for zero, flag in ((1, "--use-distributed-optimizer"), (3, "optim_grads_params")):
        cfg = ParallelConfig(tp=2, pp=1, dp=8, zero=zero, recompute="full", sequence_parallel=True)
        f = " ".join(megatron_flags(job, cfg, step_estimate(job, cfg, "practice")))
        assert flag in f and "--recompute-granularity full" in f and "--sequence-parallel" in f


def test_the_cli_prints_the_table_and_json(config, capsys):
    argv = ["plan", "--model", str(config), "--gpus", "16", "--global-batch", "64", "--seq-len", "4096",
            "--top", "2"]
    code, out, err = _cli(argv, capsys)
    assert code == 0 and "Megatron-LM flags for #1" in out and "[parallelism]" in out and "MFU" in out
    code, out, err = _cli(argv + ["--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and len(rep["layouts"]) == 2 and rep["gpus"] == 16 and rep["stack"] == "megatron-lm"


@pytest.mark.parametrize("extra, needle", [
    (["--gpu", "tpu-v5"], "--gpu 'tpu-v5': unknown GPU type; allowed: a100-sxm-80gb, h100-sxm-80gb"),
    (["--top", "0"], "--top"),
    (["--stack", "jax"], "--stack: unknown stack 'jax'"),
    (["--gpus", "12"], "--gpus 12: whole nodes of 8 GPUs"),
    (["--seq-len", "0"], "--seq-len"),
])
def test_bad_flags_are_one_line_naming_the_flag(config, capsys, extra, needle):
    argv = ["plan", "--model", str(config), "--gpus", "16", "--global-batch", "64", "--seq-len", "2048"]
    for i in range(0, len(extra), 2):        # replace a flag given above, else add it
        if extra[i] in argv:
            argv[argv.index(extra[i]) + 1] = extra[i + 1]
        else:
            argv += extra[i:i + 2]
    code, out, err = _cli(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_bad_models_name_the_file_or_field(tmp_path, capsys):
    base = ["plan", "--gpus", "8", "--global-batch", "8", "--seq-len", "2048"]
    code, _, err = _cli(base + ["--model", "no-such-model"], capsys)
    assert code == 2 and "--model 'no-such-model': not a file and not a known model" in err
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({**LLAMA8B, "hidden_size": "big"}))
    code, _, err = _cli(base + ["--model", str(bad)], capsys)
    assert code == 2 and "field hidden_size: 'big'; allowed: an integer in [1, " in err
    bad.write_text(json.dumps({**LLAMA8B, "num_hidden_layers": 10**9}))  # issue 38: validate's bounds here too
    code, _, err = _cli(base + ["--model", str(bad)], capsys)
    assert code == 2 and "field num_hidden_layers: 1000000000; allowed: an integer in [1, 4096]" in err
    code, _, err = _cli(["plan", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "2048"], capsys)
    assert code == 2 and "--global-batch: required with --model" in err
    code, _, err = _cli(["plan", "--model", "llama3-405b", "--gpus", "8", "--global-batch", "8",
                         "--seq-len", "8192"], capsys)
    assert code == 2 and "no layout fits: none of llama3-405b" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli(["plan", "--model", "llama3-8b", "--search", "bert-huge-32"], capsys)
    assert code == 2 and "exactly one of --plan FILE, --search MODEL or --model MODEL" in err


def test_plausibility_sets_each_pick_beside_the_best_published_mfu():
    from lib.galvatron.job_plan import best_published_mfu
    from lib.galvatron.published import load_runs, to_shape
    from lib.galvatron.search.cost import model_flops_per_token

    best = best_published_mfu("h100-sxm-80gb")
    run = next(r for f in (ROOT / "data" / "published_runs").glob("*.json") for r in load_runs(str(f)).runs
               if r.name == best["run"])
    by_hand = run.measured.tokens_per_s_per_gpu * model_flops_per_token(to_shape(run)) / 989.5e12
    assert best["mfu"] == pytest.approx(by_hand, abs=2e-3) and 0.3 < best["mfu"] < 0.7
    assert best_published_mfu("a100-sxm-80gb", "llm-foundry")["run"] == "torchtitan-llama2-13b-64a100#ac-none"
    # Megatron-DeepSpeed runs Megatron-LM's kernels (its family): Megatron-LM's best bounds it, here on H100
    assert best_published_mfu("h100-sxm-80gb", "deepspeed") == best_published_mfu("h100-sxm-80gb", "megatron-lm")
    # the plausibility bar on Llama 3 405B at 16,384 GPUs: no pick above the best published MFU
    job = make_job(read_model("llama3-405b", 8192), "h100-sxm-80gb", 16384, 2048)
    rep = plan(job, top=1)
    assert rep["layouts"][0]["mfu"] <= rep["best_published_mfu"]["mfu"]


def test_price_is_plans_row_and_shows_what_a_stack_waits_for():
    """``price`` gives a layout of ``plan``'s report back as plan priced it; the same SP layout with ZeRO-1
    costs more TP and DP time under nanotron (which waits for both) than under Megatron-LM."""
    from lib.galvatron.job_plan import _stack_rules
    from lib.cli_errors import UserError
    from lib.galvatron.job_plan import price

    job = make_job(read_model("llama3-70b", 4096), "h100-sxm-80gb", 64, 128)
    rep = plan(job, "nanotron", 3)
    for row in rep["layouts"]:
        assert price(job, row["config"], "nanotron") == {k: v for k, v in row.items() if k != "plausibility"}
    cfg = ParallelConfig(tp=4, pp=2, dp=8, micro_batch=1, sequence_parallel=True, zero=1)
    mega, nano = price(job, cfg, "megatron"), price(job, cfg, "nanotron")
    assert nano["step_by_kind_s"]["tp"] > mega["step_by_kind_s"]["tp"] > 0
    assert nano["step_by_kind_s"]["dp"] > mega["step_by_kind_s"]["dp"]
    assert nano["tokens_per_s_per_gpu"] < mega["tokens_per_s_per_gpu"]
    # nanotron splits stages by cost, the head's included: the first stage holds more layers, and with 1F1B
    # their activations of pp micro-batches, so its peak is higher
    assert step_estimate(job, cfg, _stack_rules("nanotron")[1])["stage_layers"][0] > 40
    assert nano["peak_gb"] > mega["peak_gb"]
    with pytest.raises(UserError, match=r"^--stack: .*'jax'"):
        price(job, cfg, "jax")


def test_across_stacks_pairs_each_layout_of_the_stack_with_its_price_under_the_other():
    from lib.galvatron.job_plan import across_stacks, across_stacks_table, price

    job = make_job(read_model("llama3-70b", 4096), "h100-sxm-80gb", 64, 128)
    pairs = across_stacks(job, "nanotron", top=3)
    labels = [r["label"] for r in plan(job, "nanotron", 3)["layouts"]]
    assert [n["label"] for _, n in pairs] == [m["label"] for m, _ in pairs] == labels
    assert all(m == price(job, n["config"], "megatron-lm") for m, n in pairs)
    t = across_stacks_table(pairs, "nanotron")
    assert len(t.rows) == 3 and "nanotron tokens/s/GPU" in t.header


def test_fabric_flag_prices_the_job_on_its_published_measurements():
    """``plan --fabric``: the fabric's line rate per GPU and its measured collectives (efa-p5: the Ultra-Scale
    Playbook's benchmark); data parallelism across 64 nodes costs more there than on the default port."""
    from lib.cli_errors import UserError
    from lib.galvatron.job_plan import price, text

    shape = read_model("llama3-8b", 4096)
    efa = make_job(shape, "h100-sxm-80gb", 512, 256, fabric="efa-p5")
    plain = make_job(shape, "h100-sxm-80gb", 512, 256)
    assert efa.fabric == "efa-p5" and efa.port_gb_s == 50.0 and plain.fabric == ""
    cfg = ParallelConfig(tp=4, dp=128, micro_batch=2, sequence_parallel=True)
    assert price(efa, cfg)["step_by_kind_s"]["dp"] > price(plain, cfg)["step_by_kind_s"]["dp"]
    rep = plan(efa, "nanotron", 1)
    assert rep["fabric"] == "efa-p5" and "efa-p5 fabric" in text(rep).splitlines()[0]
    with pytest.raises(UserError, match=r"^--fabric 'efa-p6': unknown fabric; allowed: .*efa-p5"):
        make_job(shape, "h100-sxm-80gb", 512, 256, fabric="efa-p6")
