"""Two stack fields read from nanotron's code (rules.STACK_FIELDS, data/stacks/): ``stages_by_cost`` (pipeline
stages split by a cost per block, the output head's included: layout.stage_layers_by_cost) and
``tp_overlap_own_shard`` (what its asynchronous TP hides: only the GEMM on a rank's own slice runs under a
forward all-gather, the forward reduce-scatters wait). Hand-worked splits and exposure, and which stacks set
them."""

import pytest

from lib.galvatron.search import collectives as col
from lib.galvatron.search.activations import tp_linear_shares
from lib.galvatron.search.analytic import TransformerShape
from lib.galvatron.search.cost import network_of, stages_of, step_estimate
from lib.galvatron.search.efficiency import load_gpu
from lib.galvatron.search.layout import Job, LayoutError, ParallelConfig, stage_layers_by_cost
from lib.galvatron.search.practice_search import layouts
from lib.galvatron.search.rules import ALL_PRESETS, PRACTICE, STACK_FIELDS
from lib.galvatron.stacks import load_stack, stack_names

H100 = load_gpu("h100-sxm-80gb")
FIELDS = ("stages_by_cost", "tp_overlap_own_shard")
# nanotron's 1B benchmark model (scripts/scaling_benchmarks.py): 16 layers, hidden 2048, 32 heads, FFN 8192
ONE_B = TransformerShape("nanotron-1b", 16, 2048, 32, 4096, vocab=131072, ffn_hidden=8192, gated_mlp=True)


def test_fields_off_in_presets_on_only_for_nanotron_and_quoted():
    assert set(FIELDS) <= set(STACK_FIELDS)
    assert not any(getattr(r, f) for r in ALL_PRESETS.values() for f in FIELDS)
    for f in FIELDS:
        assert {n for n in stack_names() if load_stack(n)["fields"][f]["value"]} == {"nanotron"}
    assert "get_block_compute_costs" in load_stack("nanotron")["fields"]["stages_by_cost"]["source"]
    assert "_RowLinearAsyncCommunication" in load_stack("nanotron")["fields"]["tp_overlap_own_shard"]["source"]


def test_split_by_cost_by_hand():
    # a layer 4 h^2 + 3 ffn h = 67,108,864; the head 131072 x 2048 = 268,435,456 (4 layers); half the total,
    # 671,088,640, is reached exactly after 10 layers and not passed, so the 11th still goes to stage 0
    layer, head = 4 * 2048**2 + 3 * 8192 * 2048, 131072 * 2048
    assert stage_layers_by_cost(16, 2, layer, head) == [11, 5]
    assert stage_layers_by_cost(16, 2, layer, 0.0) == [9, 7]          # no head: passed after the 9th
    assert stage_layers_by_cost(8, 4, 1.0, 0.0) == [3, 2, 2, 1]
    with pytest.raises(LayoutError, match="stage 1 without a layer"):
        stage_layers_by_cost(4, 2, 1.0, 4.0)                          # the head outweighs a stage's share
    with pytest.raises(ValueError, match="layer_cost"):
        stage_layers_by_cost(4, 2, 0.0, 1.0)


def test_cost_split_applies_only_where_the_stack_says_and_balances_the_head():
    nano = PRACTICE.with_(stages_by_cost=True)
    assert stages_of(ONE_B, 2, 1, nano) == [11, 5] and stages_of(ONE_B, 2, 1, PRACTICE) == [8, 8]
    assert stages_of(ONE_B, 2, 2, nano) == [8, 8]                      # interleaved: by count
    job = Job(shape=ONE_B, gpu=H100, n_gpus=8, gpus_per_node=8, port_gb_s=50.0, global_batch=256)
    cfg = ParallelConfig(tp=1, pp=2, dp=4, micro_batch=4)
    even, split = step_estimate(job, cfg, PRACTICE), step_estimate(job, cfg, nano)
    assert split["stage_layers"] == [11, 5] and even["stage_layers"] == [8, 8]
    # the last stage carries the head: 8 layers + head is the slower stage; 11 layers against 5 + head is
    # closer to even, so the step is shorter
    assert split["step_s"] < even["step_s"]
    # the search offers no pp whose split empties a stage (4 layers, pp 4: the head takes the last share)
    tiny = TransformerShape("t", 4, 2048, 32, 4096, vocab=131072, ffn_hidden=8192, gated_mlp=True)
    jt = Job(shape=tiny, gpu=H100, n_gpus=4, gpus_per_node=8, port_gb_s=50.0, global_batch=16)
    assert all(c.pp < 4 for c in layouts(jt, nano)) and any(c.pp == 4 for c in layouts(jt, PRACTICE))


def test_tp_linear_shares_by_hand():
    cols, rows = tp_linear_shares(3072, 3072, 8192, True)
    # q, k, v: 3 h^2; attention out: h^2; gate + up: 2 h ffn; down: h ffn
    total = 4 * 3072**2 + 3 * 3072 * 8192
    assert cols == pytest.approx((3 * 3072**2 / total, 2 * 3072 * 8192 / total))
    assert rows == pytest.approx((3072**2 / total, 3072 * 8192 / total))
    assert sum(cols) + sum(rows) == pytest.approx(1.0)


def test_own_shard_overlap_by_hand():
    """tp 8 on one node: forward exposes each column gather beyond its own slice's GEMM and both row
    reduce-scatters; backward only what outlasts the GEMMs it runs under."""
    sh = TransformerShape("nanotron-3b", 28, 3072, 32, 4096, vocab=131072, ffn_hidden=8192, gated_mlp=True)
    job = Job(shape=sh, gpu=H100, n_gpus=8, gpus_per_node=8, port_gb_s=50.0, global_batch=18)
    cfg = ParallelConfig(tp=8, dp=1, micro_batch=18, sequence_parallel=True)
    mega = PRACTICE.with_(tp_comm_overlap=True)
    nano = mega.with_(tp_overlap_own_shard=True)
    waits = PRACTICE.with_(tp_backward_waits=True)        # nanotron without its asynchronous TP
    e_m, e_n, e_w = (step_estimate(job, cfg, r) for r in (mega, nano, waits))
    assert e_n["fwd_s"] == e_m["fwd_s"]
    net = network_of(job, nano)
    act = 18 * 4096 * 3072 * 2
    ag = col.group_s("all-gather", act, 8, 1, net, True)
    rs = col.group_s("reduce-scatter", act, 8, 1, net, True)
    g = e_n["fwd_s"] - e_n["attention_s"]
    cols, rows = tp_linear_shares(3072, 3072, 8192, True)
    hand = (sum(max(0.0, ag - g * c / 8) for c in cols) + 2 * rs
            + sum(max(0.0, ag - g * c) + max(0.0, rs - g * c) for c in cols)
            + sum(max(0.0, ag - g * r / 8) for r in rows))
    assert e_n["tp_s"] == pytest.approx(hand)
    # Megatron's chunked overlap hides all of it here; nanotron's leaves at least the two reduce-scatters,
    # and less than nanotron waits for without it
    assert e_m["tp_s"] == 0.0 < 2 * rs <= e_n["tp_s"] < e_w["tp_s"]
    # the field says what the overlap hides: without the run's overlap it changes nothing
    assert (step_estimate(job, cfg, PRACTICE.with_(tp_overlap_own_shard=True))["tp_s"]
            == step_estimate(job, cfg, PRACTICE)["tp_s"])
