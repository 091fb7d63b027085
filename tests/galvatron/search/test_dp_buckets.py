"""The stack numbers rules.STACK_NUMBERS: how a stack splits a stage's data-parallel collectives into buckets
(data/stacks/), each bucket paying the collective's latency and at least one exposed. Hand-worked counts and
exposure, and what each stack states."""

import pytest

from lib.galvatron.search.cost import _dp_exposed, dp_buckets
from lib.galvatron.search.rules import ALL_PRESETS, PRACTICE, STACK_NUMBERS, CostRules
from lib.galvatron.stacks import load_stack, stack_names, stack_rules

MEGATRON = PRACTICE.with_(dp_bucket_params=40_000_000, dp_bucket_per_rank=1_000_000)


def test_bucket_counts_by_hand():
    # Megatron-Core: max(40M, 1M x d) parameters a bucket
    assert dp_buckets(100e6, 5e6, 8, MEGATRON) == 3          # 40M buckets
    assert dp_buckets(100e6, 5e6, 64, MEGATRON) == 2         # 64M buckets
    assert dp_buckets(30e6, 5e6, 8, MEGATRON) == 1           # one bucket, smaller than its size
    # FSDP: one Transformer block a unit
    assert dp_buckets(95e6, 10e6, 8, PRACTICE.with_(dp_bucket_layers=1)) == 10
    # no rule: one collective, priced as before buckets
    assert dp_buckets(100e6, 5e6, 8, PRACTICE) == 0 and all(getattr(r, f) == 0 for r in ALL_PRESETS.values()
                                                            for f in STACK_NUMBERS)
    with pytest.raises(ValueError, match="dp_bucket_params"):
        CostRules(dp_bucket_params=-1)


def test_bucket_exposure_by_hand(monkeypatch):
    """A collective of B bytes costs B + 1 s (1 s of latency). An 8-byte gradient all-reduce under a 20 s
    backward: one collective (9 s) hides; in 4 buckets it costs 4 x (2 + 1) = 12 s, and the last bucket's 3 s
    waits for the backward's end. Under a 5 s backward: 12 - 5 = 7 s."""
    import lib.galvatron.search.cost as C

    monkeypatch.setattr(C.col, "group_s", lambda kind, nbytes, *a: nbytes + 1.0)
    ar = {"per_step": [("all-reduce", 8.0, "bwd")], "per_micro_batch": []}
    assert _dp_exposed(ar, 1.0, 20.0, 4, 8, 1, None, False) == 0.0
    assert _dp_exposed(ar, 1.0, 20.0, 4, 8, 1, None, False, buckets=4) == pytest.approx(3.0)
    assert _dp_exposed(ar, 1.0, 5.0, 4, 8, 1, None, False, buckets=4) == pytest.approx(7.0)
    # per micro-batch (ZeRO-3's gather under a 4 s forward): 2 buckets of (3 + 1) s, 4 s left each of m = 3
    z3 = {"per_step": [], "per_micro_batch": [("all-gather", 6.0, "fwd")]}
    assert _dp_exposed(z3, 4.0, 20.0, 3, 8, 1, None, False, buckets=2) == pytest.approx(3 * 4.0)
    assert _dp_exposed(z3, 4.0, 20.0, 3, 8, 1, None, False) == pytest.approx(3 * 3.0)


def test_every_stack_states_its_buckets_with_a_source():
    want = {"megatron-lm": (40_000_000, 1_000_000, 0), "nanotron": (12_500_000, 0, 0),
            "deepspeed": (500_000_000, 0, 0), "fsdp": (0, 0, 1), "llm-foundry": (0, 0, 1),
            "meta-llama3": (0, 0, 1), "megatron-lm-2021": (0, 0, 0)}
    assert set(want) == set(stack_names())
    for name, values in want.items():
        f = load_stack(name)["fields"]
        assert tuple(f[k]["value"] for k in STACK_NUMBERS) == values and all(f[k]["source"] for k in STACK_NUMBERS)
        r = stack_rules(PRACTICE, name)
        assert tuple(getattr(r, k) for k in STACK_NUMBERS) == values
    assert "max(40000000, 1000000 * dp_size)" in load_stack("megatron-lm")["fields"]["dp_bucket_params"]["source"]
    assert "ddp_bucket_cap_mb" in load_stack("nanotron")["fields"]["dp_bucket_params"]["source"]
