"""Tests for lib/galvatron/search/strategies.py: counts, the artifact's 22-strategy list, names, trees, baselines."""

import itertools

import pytest

from lib.galvatron.search.strategies import SPACES, Strategy, ascii_tree, count_formula, generate, restrict

# The 22 strategies of the VLDB artifact for 8 GPUs, in its order (spec section 1.5): [pp, tp, dp, info].
ARTIFACT_22 = [
    (1, 1, 8, None, 0), (1, 1, 8, None, 1),
    (1, 2, 4, 0, 0), (1, 2, 4, 1, 0), (1, 2, 4, 0, 1), (1, 2, 4, 1, 1),
    (1, 4, 2, 0, 0), (1, 4, 2, 1, 0), (1, 4, 2, 0, 1), (1, 4, 2, 1, 1),
    (1, 8, 1, None, None),
    (2, 1, 4, None, 0), (2, 1, 4, None, 1),
    (2, 2, 2, 0, 0), (2, 2, 2, 1, 0), (2, 2, 2, 0, 1), (2, 2, 2, 1, 1),
    (2, 4, 1, None, None),
    (4, 1, 2, None, 0), (4, 1, 2, None, 1),
    (4, 2, 1, None, None),
    (8, 1, 1, None, None),
]


def _brute_count(n_gpus, pruned):
    """Independent count: every ordered tuple of distinct kinds with power-of-two degrees >= 2."""
    total = 0
    p = 1
    while p <= n_gpus:
        rest = n_gpus // p
        for k in range(0, 4):
            for kinds in itertools.permutations(("dp", "sdp", "tp"), k):
                if pruned and "dp" in kinds and "sdp" in kinds:
                    continue
                degs = [2 ** e for e in range(1, 7)]
                total += sum(1 for ds in itertools.product(degs, repeat=k) if _prod(ds) == rest)
        p *= 2
    return total


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


@pytest.mark.parametrize("n,pruned,unpruned", [(4, 11, 13), (8, 22, 34), (16, 37, 73), (32, 56, 136), (64, 79, 229)])
def test_counts_match_spec(n, pruned, unpruned):
    assert len(generate(n)) == pruned
    assert len(generate(n, pruned=False)) == unpruned
    assert len(generate(n, ckpt=True)) == 2 * pruned
    assert len(generate(n, pruned=False, ckpt=True)) == 2 * unpruned
    assert count_formula(n) == pruned and count_formula(n, pruned=False) == unpruned


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_counts_match_brute_force(n):
    assert len(generate(n)) == _brute_count(n, True)
    assert len(generate(n, pruned=False)) == _brute_count(n, False)


def test_exact_artifact_list_and_order():
    got = generate(8)
    assert len(got) == 22
    for s, (pp, tp, dp, consec, fsdp) in zip(got, ARTIFACT_22):
        assert (s.pp, s.tp, s.dp) == (pp, tp, dp)
        if consec is not None:
            assert s.tp_consec == bool(consec)
        assert s.sdp == bool(fsdp)
    assert [sum(1 for s in got if s.pp == p) for p in (1, 2, 4, 8)] == [11, 7, 3, 1]


def test_rules_hold_for_every_strategy():
    for n in (2, 4, 8, 16, 64):
        for s in generate(n, pruned=False):
            kinds = [k for k, _ in s.levels]
            assert len(kinds) == len(set(kinds))
            assert all(d >= 2 and d & (d - 1) == 0 for _, d in s.levels)
            assert s.n_gpus == n
        assert not any(s.mixed_dp_sdp for s in generate(n))
        assert len(set(generate(n))) == len(generate(n))


def test_printed_form_and_names():
    s = Strategy.from_shape(1, 2, 4, sdp=True, tp_consec=True)
    assert s.code == "1-2*-4f" and s.name == "SDP4 > TP2"
    s = Strategy.from_shape(1, 2, 4, sdp=False, tp_consec=False)
    assert s.code == "1-2-4*" and s.name == "TP2 > DP4"
    assert Strategy.from_shape(8, 1, 1).name == "PP8"
    assert Strategy.from_shape(2, 4, 1, ckpt=True).code == "2-4-1-c"


def test_groups_are_consecutive_for_inner_level():
    s = Strategy.from_shape(1, 2, 4, tp_consec=True)
    assert s.groups("tp") == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert s.groups("dp") == [(0, 2, 4, 6), (1, 3, 5, 7)]
    s = Strategy.from_shape(2, 2, 2, tp_consec=False)
    assert s.groups("dp") == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert s.groups("pp") == [(0, 4), (1, 5), (2, 6), (3, 7)]
    # every level partitions the GPUs
    for st in generate(16):
        for k in ("pp", "dp", "sdp", "tp"):
            g = st.groups(k)
            if g:
                assert sorted(x for grp in g for x in grp) == list(range(16))


def test_tree_and_roundtrip():
    for s in generate(8, ckpt=True):
        assert Strategy.from_dict(s.to_dict()) == s
        assert "GPUs" in ascii_tree(s) or s.n_gpus == 1


def test_baseline_spaces():
    sizes = {sp: len(generate(8, space=sp)) for sp in SPACES}
    assert sizes == {"full": 22, "dp": 1, "sdp": 1, "tp": 1, "pp": 1, "dp+tp": 4, "dp+pp": 4, "3d": 10}
    full = generate(8)
    for sp in SPACES:
        assert set(restrict(full, sp)) <= set(full)


@pytest.mark.parametrize("bad", [0, 3, 6, 12, -8, 2.0, "8", True])
def test_bad_gpu_count(bad):
    with pytest.raises(ValueError, match="power of two"):
        generate(bad)


def test_bad_space_and_levels():
    with pytest.raises(ValueError, match="space must be one of"):
        generate(8, space="zero")
    with pytest.raises(ValueError, match="one level only"):
        Strategy(1, (("tp", 2), ("tp", 2)))
