"""Op-level selective checkpointing (recompute "op", torchtitan's "selective op"): what a layer keeps and
recomputes by hand, which stacks may pick it, and the torchtitan rows that run it."""

import pytest

from lib.galvatron.published import load_runs
from lib.galvatron.search import activations as act
from lib.galvatron.search.rules import PRACTICE
from lib.galvatron.stacks import stack_names, stack_rules
from lib.galvatron.validate import estimate_run
from tests import ROOT

H, KV, FFN = 8192, 1024, 28672          # Llama 2 70B


def test_what_a_layer_keeps_by_hand():
    # the input, the attention output, and the 1st, 3rd, 5th, 7th projections: Q, V, the gate, the down
    assert act.op_kept_widths(H, KV, FFN, gated=True) == H + H + H + KV + FFN + H
    # TP 8 without SP: column-parallel outputs split, the input and the row-parallel down projection whole
    assert act.op_kept_widths(H, KV, FFN, True, t=8) == pytest.approx(H + H / 8 + H / 8 + KV / 8 + FFN / 8 + H)
    assert act.op_kept_widths(H, KV, FFN, True, t=8, sp=True) == pytest.approx((4 * H + KV + FFN) / 8)
    # without a gate: Q, V and the first MLP projection (the 1st, 3rd, 5th of six)
    assert act.op_kept_widths(H, H, 4 * H, gated=False) == H + H + H + H + 4 * H
    b = act.layer_activation_bytes(4096, 1, H, 64, FFN, gated=True, recompute="op", fused_attention=True,
                                   kv_hidden=KV, dropout=False)
    assert b == 2 * 4096 * (4 * H + KV + FFN)
    sel = act.layer_activation_bytes(4096, 1, H, 64, FFN, gated=True, recompute="selective",
                                     fused_attention=True, kv_hidden=KV, dropout=False)
    assert b < 0.5 * sel


def test_what_a_layer_recomputes_by_hand():
    # K, out and up of 2 h^2 + 2 h kv + 3 h f projection FLOPs
    share = (H * KV + H * H + H * FFN) / (2 * H * H + 2 * H * KV + 3 * H * FFN)
    assert act.op_recompute_share(H, KV, FFN, True) == pytest.approx(share) and 0.3 < share < 0.4
    assert act.op_recompute_share(H, H, 4 * H, False) == pytest.approx((H * H + H * H + 4 * H * H) / (12 * H * H))


def test_only_torchtitans_stack_may_pick_it():
    from lib.galvatron.published import to_job
    from lib.galvatron.search.practice_search import layouts

    run = next(r for r in load_runs(f"{ROOT}/data/published_runs/torchtitan_sweeps.json").runs
               if r.name.endswith("bs1-selective-op"))
    job = to_job(run)
    offers = {n for n in stack_names() if not stack_rules(PRACTICE, n).without_op_recompute}
    assert offers == {"fsdp"}
    assert any(c.recompute == "op" for c in layouts(job, stack_rules(PRACTICE, "fsdp")))
    assert not any(c.recompute == "op" for c in layouts(job, stack_rules(PRACTICE, "megatron-lm")))


def test_the_torchtitan_rows_that_ran_it_now_fit():
    """Read as Korthikanti's selective recompute the 70B row at batch 1 needed 114 GB; as the op-level
    policy it ran, it fits, and both rows are slower than under selective recompute (more is recomputed)."""
    runs = {r.name.split("#")[1]: r for r in load_runs(f"{ROOT}/data/published_runs/torchtitan_sweeps.json").runs}
    sel = {}
    for key in ("ac-selective-op", "bs1-selective-op"):
        r = runs[key]
        assert r.config.recompute == "op"
        op = estimate_run(r)
        sel[key] = estimate_run(r.model_copy(update={"config": r.config.model_copy(update={"recompute": "selective"})}))
        assert op["fits"] and op["peak_gb"] < sel[key]["peak_gb"] and op["step_s"] > sel[key]["step_s"]
    assert not sel["bs1-selective-op"]["fits"]


def test_the_torchtitan_file_asks_for_it():
    from lib.galvatron.job_plan import make_job, read_model, torchtitan_toml
    from lib.galvatron.search.layout import ParallelConfig

    toml = torchtitan_toml(make_job(read_model("llama3-8b", 4096), "h100-sxm-80gb", 64, 128),
                           ParallelConfig(dp=64, zero=3, recompute="op"))
    assert 'mode = "selective"' in toml and 'selective_ac_option = "op"' in toml
