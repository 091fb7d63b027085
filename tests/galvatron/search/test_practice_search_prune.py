"""The practice search's pruning (practice_search.search_practice, ``prune``) skips layouts that cannot win and
never changes the answer: the pick and its whole estimate equal those of the search that prices everything."""

import pytest

from lib.galvatron.search.analytic import SHAPES, TransformerShape
from lib.galvatron.search.efficiency import load_gpu
from lib.galvatron.search.layout import Job
from lib.galvatron.search.practice_search import search_practice
from lib.galvatron.search.rules import PRACTICE

H100 = load_gpu("h100-sxm-80gb")
A100 = load_gpu("a100-sxm-80gb")
GPT = TransformerShape("gpt-13b", 40, 5120, 40, 2048, vocab=51200)

CASES = [
    ("llama3-405b on 16,384 (the closing chapter)", SHAPES["llama3-405b"], H100, 16384, 2048, PRACTICE),
    ("llama3-405b on 256 (the slider's smallest)", SHAPES["llama3-405b"], H100, 256, 2048, PRACTICE),
    ("gpt-13b on 64 A100, no ZeRO stages or selective recompute", GPT, A100, 64, 128,
     PRACTICE.with_(zero_stages=False, selective_recompute=False, any_degrees=False)),
    ("gpt-13b on 96 H100, no context parallelism", GPT, H100, 96, 192, PRACTICE.with_(context_parallel=False)),
]


@pytest.mark.parametrize("name, shape, gpu, n, batch, rules", CASES, ids=[c[0] for c in CASES])
def test_pruned_search_gives_the_same_pick_and_estimate(name, shape, gpu, n, batch, rules):
    job = Job(shape=shape, gpu=gpu, n_gpus=n, gpus_per_node=8, port_gb_s=50.0, global_batch=batch,
              dropout=not name.startswith("llama"))
    best, est, priced = search_practice(job, rules, prune=True)
    full_best, full_est, full_priced = search_practice(job, rules, prune=False)
    assert best is not None and best == full_best and est == full_est
    assert priced < full_priced            # it did skip something


@pytest.mark.parametrize("name, shape, gpu, n, batch, rules", CASES[2:], ids=[c[0] for c in CASES[2:]])
def test_search_top_is_the_k_fastest_that_fit(name, shape, gpu, n, batch, rules):
    """search_top's pruning against the k-th best keeps the k fastest of every layout that fits (brute force
    over layouts(), layouts that differ only in recompute counted once, at their fastest that fits),
    fastest first; its first is search_practice's pick."""
    from lib.galvatron.search.cost import step_estimate
    from lib.galvatron.search.practice_search import layouts, search_top

    job = Job(shape=shape, gpu=gpu, n_gpus=n, gpus_per_node=8, port_gb_s=50.0, global_batch=batch)
    top, priced = search_top(job, rules, 4)
    every = [(c, step_estimate(job, c, rules)) for c in layouts(job, rules)]
    best_of = {}
    for c, e in every:
        if e["fits"]:
            base = (c.tp, c.pp, c.dp, c.cp, c.vp, c.micro_batch, c.sequence_parallel, c.zero)
            best_of[base] = max(best_of.get(base, 0.0), e["tokens_per_s_per_gpu"])
    fit = sorted(best_of.values(), reverse=True)
    assert [e["tokens_per_s_per_gpu"] for _, e in top] == pytest.approx(fit[:4], rel=1e-12)
    assert top[0][0] == search_practice(job, rules)[0] and priced < len(every)
    with pytest.raises(ValueError, match="k must be"):
        search_top(job, rules, 0)
