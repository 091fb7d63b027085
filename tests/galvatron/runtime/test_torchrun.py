"""Plans a practitioner can use: ``Plan.to_torchrun`` prints a command that torchrun's own parser and ours
accept and that runs the same plan; ``python -m lib.galvatron plan`` prints it (and Megatron-LM's flags);
``megatron_settings`` maps what Megatron-LM can express and names what it cannot."""

import json
import shlex

import pytest
from torch.distributed.run import get_args_parser

from lib.galvatron.__main__ import _parser, main, read_plan
from lib.galvatron.runtime.megatron import megatron_settings, megatron_table
from lib.galvatron.runtime.plan import from_search_plan, load_plan
from lib.galvatron.search.plan import Plan
from tests.cli_helpers import assert_one_line, call_main


def _plan(pp, tps, sdps, consec=None, ckpt=(), B=16, chunks=1, world=8, division=()):
    n = len(tps)
    return Plan(pp_deg=pp, tp_sizes_enc=tuple(tps), tp_consecutive_flags=tuple(consec or (1,) * n),
                dp_types_enc=tuple(sdps), global_bsz=B, chunks=chunks, world_size=world,
                checkpoint=tuple(ckpt), pp_division=tuple(division))


PLANS = {
    "dp": _plan(1, [1] * 4, [0] * 4),
    "sdp": _plan(1, [1] * 4, [1] * 4),
    "tp x dp": _plan(1, [2] * 4, [0] * 4),
    "pp": _plan(2, [1] * 4, [0] * 4, chunks=4),
    "mixed": _plan(2, [4, 4, 2, 1], [0, 0, 1, 0], consec=(1, 1, 0, 1), ckpt=(1, 0, 0, 1), chunks=2),
}


def _parse(cmd: str):
    """torchrun's parser on the command, then ours on the module's arguments."""
    argv = shlex.split(cmd.replace("$NODE_RANK", "0"))
    assert argv[0] == "torchrun"
    tr = get_args_parser().parse_args(argv[1:])
    assert tr.module and tr.training_script == "lib.galvatron"
    return tr, _parser().parse_args(tr.training_script_args)


@pytest.mark.parametrize("name", list(PLANS))
@pytest.mark.parametrize("nnodes", [1, 2])
def test_printed_command_parses_and_names_the_same_plan(tmp_path, name, nnodes):
    plan = PLANS[name]
    path = tmp_path / "my plan.json"  # a space: the command must quote it
    path.write_text(plan.to_json())
    tr, args = _parse(plan.to_torchrun(str(path), nnodes=nnodes, device="cuda"))
    assert int(str(tr.nnodes).split(":")[-1]) == nnodes and int(tr.nproc_per_node) * nnodes == plan.world_size
    assert (tr.master_addr == "HOST") == (nnodes > 1)
    assert args.cmd == "run" and args.plan == str(path) and args.device == "cuda"
    got = read_plan(args.plan)
    assert Plan.from_dict(got) == plan
    assert load_plan(got, plan.world_size) == from_search_plan(plan)


def test_command_without_a_device_runs_on_cpu_and_passes_run_flags():
    tr, args = _parse(PLANS["dp"].to_torchrun("p.json", run_args=("--steps", "10")))
    assert args.device == "cpu" and args.steps == 10 and int(tr.nproc_per_node) == 8


def test_bad_arguments_are_one_line_naming_them():
    with pytest.raises(ValueError, match="nnodes 3 does not divide world_size 8"):
        PLANS["dp"].to_torchrun(nnodes=3)
    with pytest.raises(ValueError, match="nnodes"):
        PLANS["dp"].to_torchrun(nnodes=0)
    with pytest.raises(ValueError, match="device 'tpu'"):
        PLANS["dp"].to_torchrun(device="tpu")


def test_cli_prints_the_command_and_megatron_flags(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(PLANS["tp x dp"].to_json())
    rc, out, err = call_main(main, ["plan", "--plan", str(path), "--print-torchrun", "--megatron"])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == PLANS["tp x dp"].summary()
    tr, args = _parse(lines[1])
    assert args.plan == str(path)
    assert lines[2].startswith("megatron-lm: --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1")


def test_cli_searches_writes_and_prints_a_plan_that_parses(tmp_path):
    out_path = tmp_path / "searched.json"
    rc, out, err = call_main(main, ["plan", "--search", "bert-huge-32", "--gpus", "8", "--budget-gb", "16",
                                    "--out", str(out_path), "--print-torchrun"])
    assert rc == 0, err
    plan = Plan.from_json(out_path.read_text())
    _, args = _parse(out.splitlines()[1])
    assert Plan.from_dict(read_plan(args.plan)) == plan and plan.n_layers == 32


def test_cli_search_takes_the_cost_rules():
    """At 8 GB the artifact's rules (vldb2023) pipeline BERT-Huge-32 in 2 stages; today's (galvatron2) do not."""
    from lib.galvatron.search.engine import search
    from lib.galvatron.search.profiles import load_model, published_cluster

    for rules in ("vldb2023", "galvatron2"):
        rc, out, err = call_main(main, ["plan", "--search", "bert-huge-32", "--budget-gb", "8", "--rules", rules])
        want = search(load_model("bert-huge-32"), published_cluster(8), 8.0, rules=rules).plan
        assert rc == 0 and out.splitlines()[0] == want.summary(), (rules, out, err)
    assert "pp=2" in call_main(main, ["plan", "--search", "bert-huge-32", "--budget-gb", "8", "--rules",
                                      "vldb2023"])[1]


@pytest.mark.parametrize("argv,words", [
    (["plan"], ["exactly one of --plan", "--search"]),
    (["plan", "--search", "gpt-9"], ["--search", "gpt-9", "bert-huge-32"]),
    (["plan", "--search", "bert-huge-32", "--budget-gb", "0"], ["--budget-gb"]),
    (["plan", "--search", "bert-huge-32", "--rules", "nope"], ["--rules", "nope", "vldb2023"]),
])
def test_cli_plan_errors_are_one_line(argv, words):
    rc, _, err = call_main(main, argv)
    assert_one_line(rc, err, *words)


def test_megatron_maps_uniform_plans_exactly():
    dp = megatron_settings(PLANS["dp"])
    assert dp.exact and dp.flags[:2] == ("--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1")
    assert "--micro-batch-size 2" in dp.flags and "--global-batch-size 16" in dp.flags
    sdp = megatron_settings(PLANS["sdp"])
    assert sdp.exact and "--use-torch-fsdp2" in sdp.flags
    assert any("--use-distributed-optimizer shards only the optimizer states" in n for n in sdp.notes)
    pp = megatron_settings(PLANS["pp"])
    assert pp.exact and "--pipeline-model-parallel-size 2" in pp.flags and "--micro-batch-size 1" in pp.flags
    assert any("1F1B" in n for n in pp.notes)
    ck = megatron_settings(_plan(1, [2] * 4, [0] * 4, ckpt=(1,) * 4))
    assert ck.exact and "--recompute-method uniform" in ck.flags


def test_megatron_names_what_has_no_equivalent():
    m = megatron_settings(PLANS["mixed"])
    text = " ".join(m.none)
    assert not m.exact
    for words in ("per-layer TP degrees (1, 2, 4)", "TP on strided ranks (1 of 4 layers)", "per-layer SDP",
                  "per-layer recompute"):
        assert words in text, (words, text)
    assert not any(f.startswith("--tensor-model-parallel-size") for f in m.flags)
    block = megatron_settings(_plan(2, [1] * 4, [0] * 4, ckpt=(1, 0, 1, 0), chunks=2))
    assert block.exact and "--recompute-method block" in block.flags and "--recompute-num-layers 1" in block.flags
    uneven = megatron_settings(_plan(2, [1] * 4, [0] * 4, division=(3, 1), chunks=2))
    assert "--decoder-first-pipeline-num-layers 3" in uneven.flags
    sdp_pp = megatron_settings(_plan(2, [1] * 4, [1] * 4, chunks=2))
    assert any("does not work with PP" in n for n in sdp_pp.none)


def test_megatron_table_has_a_row_per_plan():
    t = megatron_table(PLANS, "caption")
    assert [r[0] for r in t.rows] == list(PLANS)
    assert "TP size --tensor-model-parallel-size" in t.caption
    row = dict(zip(t.head, t.rows[list(PLANS).index("sdp")]))
    assert row["TP size"] == "1" and row["FSDP2"] == "yes"
    assert row["recompute"] == "-" and row["micro-batch"] == "2"
    assert row["no Megatron-LM equivalent"] == "none"
    mixed = dict(zip(t.head, t.rows[-1]))
    assert mixed["TP size"] == "-" and "per-layer TP" in mixed["no Megatron-LM equivalent"]
    ck = megatron_table({"ck": _plan(1, [2] * 4, [0] * 4, ckpt=(1,) * 4)}).rows[0]
    assert ck[4] == "uniform, 1 layer(s)"
    assert "<table" in t._repr_html_()


def test_a_wrapped_command_is_the_same_command():
    from lib.galvatron.runtime.report import wrap_command

    cmd = PLANS["mixed"].to_torchrun("a plan.json", nnodes=2, device="cuda", run_args=("--steps", "10"))
    text = wrap_command(cmd, 60)
    assert all(len(line) <= 60 for line in text.splitlines()) and len(text.splitlines()) > 1
    joined = text.replace(" \\\n    ", " ")
    assert joined == cmd and _parse(joined)[1].plan == "a plan.json"
