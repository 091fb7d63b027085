"""The practice search (lib/galvatron/search/practice_search.py): a bounded space, the global batch kept, the
switches of the search dimensions, and a pick that fits and beats the layouts it was compared with."""

import pytest

from lib.galvatron.search.analytic import SHAPES, TransformerShape
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.search.efficiency import load_gpu
from lib.galvatron.search.layout import Job
from lib.galvatron.search.practice_search import layouts, search_practice
from lib.galvatron.search.rules import PRACTICE

H100 = load_gpu("h100-sxm-80gb")


def job(shape, n, B):
    return Job(shape=shape, gpu=H100, n_gpus=n, gpus_per_node=8, port_gb_s=50.0, global_batch=B)


def test_layouts_respect_the_job_and_the_switches():
    j = job(TransformerShape("t", 30, 4096, 32, 4096), 96, 192)
    cfgs = list(layouts(j, PRACTICE))
    assert cfgs and all(c.n_gpus == 96 and c.tp in (1, 2, 4, 8) and 192 % (c.dp * c.micro_batch) == 0
                        for c in cfgs)
    assert {3, 6, 12} & {c.pp for c in cfgs}                        # degrees that are not powers of two
    assert {c.micro_batch for c in cfgs} == {1, 2, 4, 8} and {c.zero for c in cfgs} == {0, 1, 2, 3}
    narrow = list(layouts(j, PRACTICE.with_(any_degrees=False, micro_batch_search=False, zero_stages=False,
                                            context_parallel=False, selective_recompute=False)))
    assert all(c.pp & (c.pp - 1) == 0 for c in narrow)
    assert all(c.micro_batch == min(4, 192 // c.dp) or 192 // c.dp % c.micro_batch == 0 for c in narrow)
    assert {c.micro_batch for c in narrow if 192 // c.dp >= 8} == {4}
    assert {c.zero for c in narrow} == {0, 3} and {c.cp for c in narrow} == {1}
    assert {c.recompute for c in narrow} == {"none", "full"}


def test_pick_fits_and_is_the_fastest_that_fits():
    j = job(SHAPES["llama3-8b"], 64, 256)
    best, est, n = search_practice(j)
    assert best is not None and est["fits"] and n > 100
    for cfg in list(layouts(j, PRACTICE))[::37]:
        e = step_estimate(j, cfg, PRACTICE)
        if e["fits"]:
            assert e["tokens_per_s_per_gpu"] <= est["tokens_per_s_per_gpu"] + 1e-9


def test_nothing_fits():
    big = TransformerShape("huge", 8, 65536, 64, 8192, vocab=32000)
    best, est, n = search_practice(job(big, 8, 8))
    assert best is None and est is None and n > 0


def test_the_layerwise_search_refuses_practice_rules():
    from lib.galvatron.search.engine import search
    from lib.galvatron.search.profiles import load_model, published_cluster

    with pytest.raises(ValueError, match="rules 'practice' switch on embedding_and_head, mixed_precision.*practice_search"):
        search(load_model("bert-huge-32"), published_cluster(8), 16, rules="practice")
