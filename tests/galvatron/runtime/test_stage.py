"""Runtime correctness on CPU with gloo: every strategy of 2 and 4 ranks and mixed per-layer plans give the
single-process loss and updated parameters; bad plans fail on every rank without hanging."""

import pytest
import torch

from lib.galvatron.runtime.grid import Layout, atoms_layout
from lib.galvatron.runtime.launch import spawn_local
from lib.galvatron.runtime.model import ModelConfig, init_params, reference_step
from lib.galvatron.runtime.plan import LayerStrategy as L
from lib.galvatron.runtime.plan import RunPlan, from_galvatron_dict, from_search_plan, load_plan
from lib.galvatron.runtime.tp import plan_transition

TOL = 1e-5
# What "auto" must pick here: FSDP2 whenever this torch has fully_shard and gloo can reduce-scatter (2.13 can).
FSDP2 = "fsdp2" if tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 13) else None


def all_uniform(world, n_layer, bsz):
    """Every pruned strategy (spec §1.2) as a uniform plan: 4 for 2 ranks, 11 for 4 ranks."""
    out, pp = [], 1
    while pp <= world:
        S, tp = world // pp, 1
        while tp <= S:
            dp = S // tp
            for c in ((True, False) if tp > 1 and dp > 1 else (True,)):
                for sdp in ((False, True) if dp > 1 else (False,)):
                    out.append(RunPlan.uniform(world, n_layer, pp, tp, sdp, c, bsz, 2 if pp > 1 else 1))
            tp *= 2
        pp *= 2
    return out


def test_strategy_counts_match_spec():
    assert len(all_uniform(2, 2, 8)) == 4 and len(all_uniform(4, 4, 8)) == 11  # spec §1.3 table


def test_layout_ranks_and_atoms():
    lay = Layout(2, 2, True)  # TP inner: ranks 0,1 share samples
    assert [lay.tp_rank(j) for j in range(4)] == [0, 1, 0, 1]
    assert lay.tp_group(0) == (0, 1) and lay.dp_group(0) == (0, 2)
    lay = Layout(2, 2, False)  # DP inner: DP rank 1 holds the odd atoms
    assert lay.tp_group(0) == (0, 2) and lay.atoms(1) == (1, 3) and Layout(2, 2, True).atoms(2) == (2, 3)


def test_tp4_to_dp4_is_a_free_slice_and_reverse_gathers():
    """The paper's zero-communication case (§4): TP4 -> DP4 only slices; DP4 -> TP4 gathers in the TP group."""
    S = 4
    fam = plan_transition(Layout(4, 1), Layout(1, 4), S)
    assert all(fam(j) == (j,) for j in range(S))
    fam = plan_transition(Layout(1, 4), Layout(4, 1), S)
    assert fam(0) == (0, 1, 2, 3)
    fam = plan_transition(Layout(2, 2, True), Layout(2, 2, False), S)  # flags differ: new TP group
    assert fam(1) == Layout(2, 2, False).tp_group(1)
    assert all(plan_transition(Layout(4, 1), atoms_layout(4), 4)(j) == (j,) for j in range(4))


def test_reference_update_is_large_against_tolerance():
    cfg = ModelConfig(n_layer=2)
    p0 = init_params(cfg, 0)
    _, p1 = reference_step(cfg, p0, 8, 0, 0.5, 2)
    moved = max(float((a - b).abs().max()) for a, b in zip(p0["blocks"][0].values(), p1["blocks"][0].values()))
    assert moved > 1000 * TOL  # so equality within TOL means the gradients were right


def _check(world, plans, cfg, sdp_impl="auto"):
    res = spawn_local({"kind": "check", "plans": [p.to_dict() for p in plans], "model": cfg.to_dict(),
                       "steps": 2, "lr": 0.5, "sdp_impl": sdp_impl}, world, timeout_s=150)
    assert len(res) == world  # spawn_local raised unless every exit code was 0
    want = FSDP2 if sdp_impl == "auto" else sdp_impl
    for i, p in enumerate(plans):
        for r in res:
            c = r["checks"][i]
            assert c["param_err"] < TOL, (p.label(), r["rank"], c)
            assert c["loss_err"] < TOL, (p.label(), r["rank"], c)
            uses_sdp = any(lay.sdp and lay.dp > 1 for lay in p.layers)
            if want is not None or not uses_sdp:  # (older torch: "auto" may fairly pick either)
                assert c["sdp_impl"] == (want if uses_sdp else None), (p.label(), c["sdp_impl"])


@pytest.mark.timeout(150)
def test_every_strategy_and_mixed_plans_2_ranks():
    cfg = ModelConfig(n_layer=2)
    mixed = [RunPlan(2, 1, (L(2, 1), L(1, 2, True)), 8), RunPlan(2, 1, (L(1, 2), L(2, 1)), 8, 2),
             RunPlan(2, 1, (L(2, 1, ckpt=True), L(1, 2, True, ckpt=True)), 8),  # checkpointing, TP and SDP
             RunPlan(2, 2, (L(1, 1, ckpt=True), L(1, 1)), 8, 2)]
    _check(2, all_uniform(2, 2, 8) + mixed, cfg)


@pytest.mark.timeout(200)
def test_every_strategy_and_mixed_plans_4_ranks():
    cfg = ModelConfig(n_layer=4)
    mixed = [RunPlan(4, 1, (L(4, 1), L(1, 4, True), L(2, 2, False, False), L(2, 2, True, True)), 8),
             RunPlan(4, 2, (L(2, 1), L(1, 2, True), L(1, 2), L(2, 1)), 16, 2),
             RunPlan(4, 2, (L(1, 2), L(2, 1), L(2, 1), L(2, 1)), 8, 2, (1, 3))]
    _check(4, all_uniform(4, 4, 8) + mixed, cfg)


@pytest.mark.timeout(150)
def test_hand_written_sdp_fallback_matches_reference_too():
    """The fallback for torch without FSDP2 (or gloo without reduce-scatter), forced, on every SDP shape."""
    cfg = ModelConfig(n_layer=4)
    plans = [p for p in all_uniform(4, 4, 8) if p.layers[0].sdp]
    plans.append(RunPlan(4, 1, (L(1, 4, True, ckpt=True), L(2, 2, True), L(2, 2, True, False), L(4, 1)), 8, 2))
    _check(4, plans, cfg, sdp_impl="manual")


def test_unknown_sdp_impl_is_refused():
    from lib.galvatron.runtime.sdp import resolve_sdp_impl

    with pytest.raises(ValueError, match="sdp_impl must be one of"):
        resolve_sdp_impl("zero3")


def test_galvatron_json_and_search_plan_adapter():
    d = {"pp_deg": 1, "tp_sizes_enc": "2,1", "tp_consecutive_flags": "1,1", "dp_types_enc": "0,1",
         "global_bsz": 8, "chunks": 1}
    p = from_galvatron_dict(d, 2)
    assert [s.tp for s in p.layers] == [2, 1] and p.layers[1].sdp and p.layers[1].dp == 2
    assert load_plan(p.to_dict()) == p
    assert from_galvatron_dict(dict(d, checkpoint="0,1"), 2).layers[1].ckpt
    search = pytest.importorskip("lib.galvatron.search.engine")
    sp = search.Plan.from_dict(dict(d, world_size=2))
    assert from_search_plan(sp) == p
    with pytest.raises(ValueError, match="world size 2, but 4"):
        from_search_plan(sp).validate(4, 2, world_size=4)


def test_bad_plans_raise_clear_errors_before_any_rank_waits():
    with pytest.raises(ValueError, match="missing fields"):
        from_galvatron_dict({"pp_deg": 1, "tp_sizes_enc": "1,1"}, 2)
    with pytest.raises(ValueError, match="world size 4"):
        RunPlan.uniform(4, 2, tp=2).validate(4, 2, world_size=2)
    with pytest.raises(ValueError, match="head count 3"):
        RunPlan.uniform(2, 2, tp=2).validate(3, 2, world_size=2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("plan, model, match", [
    ({"pp_deg": 1, "tp_sizes_enc": "1,1,1,1", "tp_consecutive_flags": "1,1,1,1", "dp_types_enc": "0,0,0,0",
      "global_bsz": 8, "chunks": 1, "world_size": 4}, {"n_layer": 4}, "world size 4"),
    (RunPlan.uniform(2, 2, tp=2).to_dict(), {"n_layer": 2, "n_head": 3, "d_model": 33}, "head count 3"),
    ({"world_size": 2, "pp": 1, "layers": [{"tp": 2}, {"tp": 1, "dp": 2}], "global_bsz": 8}, {"n_layer": 2},
     r"missing field layers\[0\]\.dp"),
    ({"world_size": 2, "pp": 1, "layers": "2,1", "global_bsz": 8}, {"n_layer": 2}, "layers: \"2,1\" is not a list"),
])
def test_bad_plan_fails_on_every_rank(plan, model, match):
    with pytest.raises(ValueError, match=match) as e:
        spawn_local({"kind": "train", "plan": plan, "model": ModelConfig(**model).to_dict()}, 2, timeout_s=60)
    assert "ranks [0, 1]" in str(e.value) and "exit codes [1, 1]" in str(e.value)


@pytest.mark.timeout(150)
def test_fsdp2_and_hand_written_sdp_train_alike_with_adam():
    """Adam is elementwise, so sharding must not change it: both SDP implementations give the same losses."""
    from lib.galvatron.runtime.sdp import SDP_IMPLS

    assert SDP_IMPLS == ("auto", "fsdp2", "manual")
    if FSDP2 is None:
        pytest.skip("FSDP2 on gloo is only asserted for torch >= 2.13")
    cfg = ModelConfig(n_layer=2)
    plan = RunPlan(2, 1, (L(1, 2, True), L(2, 1)), 8, 2).to_dict()
    losses = {}
    for impl in ("fsdp2", "manual"):
        res = spawn_local({"kind": "train", "plans": [plan], "model": cfg.to_dict(), "optimizer": "adam",
                           "lr": 0.01, "steps": 3, "warmup": 1, "sdp_impl": impl}, 2, timeout_s=120)
        assert {r["runs"][0]["sdp_impl"] for r in res} == {impl}
        losses[impl] = res[0]["runs"][0]["losses"]
    assert losses["fsdp2"] == pytest.approx(losses["manual"], abs=1e-5)
    assert losses["fsdp2"][-1] < losses["fsdp2"][0]  # and it trains
