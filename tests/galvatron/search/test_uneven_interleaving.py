"""Interleaved 1F1B on uneven stages and chunks (schedules.chunked_step_s, layout.chunk_layers and their use
in cost.step_estimate): hand calculations, the even case unchanged, the switch off (any_degrees) giving the
previous behaviour, and agreement with the event simulation of lib/galvatron/practice_figures.py."""

import numpy as np
import pytest

from lib.galvatron import practice_figures as pf
from lib.galvatron.search import schedules as sch
from lib.galvatron.search.analytic import SHAPES, TransformerShape
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.search.efficiency import load_gpu
from lib.galvatron.search.layout import Job, ParallelConfig, chunk_layers, stage_layers
from lib.galvatron.search.practice_search import layouts
from lib.galvatron.search.rules import PRACTICE

H100 = load_gpu("h100-sxm-80gb")
LLAMA = SHAPES["llama3-405b"]


def llama_job(n=16384):
    return Job(shape=LLAMA, gpu=H100, n_gpus=n, gpus_per_node=8, port_gb_s=50.0, global_batch=2048,
               dropout=False)


def test_four_stages_vp2_by_hand():
    """pp 4, vp 2, m 8; every chunk's forward 1 unit, backward 2 (3 a chunk), except the last chunk of the
    last stage, which also runs the head: 1.65 forward, 4.95 a chunk. Stage totals T = 6, 6, 6, 7.95: the
    last stage is the slowest and busy m T = 8 x 7.95 = 63.6; the fill and drain pass the slowest chunk of
    each other stage, 3 + 3 + 3 = 9: the step is 72.6 units. The event simulation gives the same."""
    chunk_fwd = [[1, 1], [1, 1], [1, 1], [1, 1.65]]
    chunk_s = [[3 * t for t in row] for row in chunk_fwd]
    assert sch.chunked_step_s("interleaved", chunk_s, 8) == pytest.approx(72.6)
    ops = pf.pipeline_timeline("interleaved", 4, 8, 2, chunk_fwd=chunk_fwd)
    assert pf.step_length(ops) == pytest.approx(72.6)


def test_equal_chunks_reduce_to_the_even_formula():
    for pp, vp, m, t in ((4, 2, 8, 1.0), (16, 8, 16, 0.2), (8, 4, 32, 0.37), (6, 1, 12, 2.5)):
        rows = [[t / vp] * vp for _ in range(pp)]
        sched = "interleaved" if vp > 1 else "1f1b"
        assert sch.chunked_step_s(sched, rows, m) == pytest.approx(sch.step_s(sched, [t] * pp, m, vp), rel=1e-12)
    # vp 1 with uneven stages is the previous 1F1B formula m max + sum of the others
    assert sch.chunked_step_s("1f1b", [[1.0], [2.0], [1.5]], 4) == pytest.approx(4 * 2 + 1 + 1.5)


def test_chunked_step_rejects_bad_rows():
    with pytest.raises(ValueError, match="chunk_s must be pp lists"):
        sch.chunked_step_s("interleaved", [[1.0, 1.0], [1.0]], 4)
    with pytest.raises(ValueError, match="times >= 0"):
        sch.chunked_step_s("interleaved", [[1.0, -1.0], [1.0, 1.0]], 4)


def test_llama3_chunks_as_meta_describes():
    # 126 layers, PP 16, VP 8: 128 chunks of one layer, the first only the embedding, the last only the head
    ch = chunk_layers(126, 16, 8)
    assert ch[0] == [0] + [1] * 7 and ch[-1] == [1] * 7 + [0]
    assert all(row == [1] * 8 for row in ch[1:-1])
    assert [sum(r) for r in ch] == stage_layers(126, 16)
    # vp 2: slices of 4, the first and the last 3
    assert chunk_layers(126, 16, 2)[0] == [3, 4] and chunk_layers(126, 16, 2)[-1] == [4, 3]
    with pytest.raises(ValueError, match="exceeds the 126 layers"):
        chunk_layers(126, 16, 16)


@pytest.mark.parametrize("pp, vp, m", [(4, 2, 8), (8, 2, 16), (16, 8, 16), (16, 4, 32)])
def test_uneven_chunks_against_the_event_simulation(pp, vp, m):
    """A layer-per-unit model with Llama 3's ends (an embedding-only first chunk, 0.02, and a head chunk
    of 0.65 of a layer) and chunks jittered by up to 20%: the formula is never below the simulated step, and
    above it by at most 12% at pp 4-8 (the light first chunk still pays a whole chunk of the ramp) and 5% at
    pp 16 (Meta's PP 16, VP 8: 1.4% with equal chunks)."""
    rng = np.random.default_rng(pp * 100 + vp)
    for rows in (np.ones((pp, vp)), rng.uniform(0.8, 1.2, size=(pp, vp))):
        rows = rows.copy()
        rows[0, 0], rows[-1, -1] = 0.02, 0.65
        sim = pf.step_length(pf.pipeline_timeline("interleaved", pp, m, vp, chunk_fwd=rows.tolist()))
        est = sch.chunked_step_s("interleaved", (3 * rows).tolist(), m)
        assert 0.0 <= est / sim - 1 <= (0.05 if pp >= 16 else 0.12)


def test_meta_layout_priced_interleaved_and_switch_off_refuses():
    j = llama_job()
    cfg = ParallelConfig(tp=8, pp=16, dp=128, vp=8, sequence_parallel=True, zero=1)
    on = step_estimate(j, cfg, PRACTICE)
    plain = step_estimate(j, cfg.with_(vp=1), PRACTICE)
    assert on["schedule"] == "interleaved" and on["chunk_layers"][0][0] == 0
    # the bubble shrinks from (pp - 1)/m = 15/16 toward (pp - 1)/(vp m)
    ideal = on["micro_batches"] * max(on["stage_s"])
    assert on["pipeline_s"] / ideal - 1 < 0.15 < 0.9 < plain["pipeline_s"] / ideal - 1
    # m = pp = 16: 1F1B's stage 1 holds 15 micro-batches, interleaved min(vp m, 2 (pp - 2) + (vp - 1) pp
    # + 1) / vp = 16 (all of them, as stage 0 under both)
    assert on["stage_peak_bytes"][0] == plain["stage_peak_bytes"][0]
    assert on["stage_peak_bytes"][1] > plain["stage_peak_bytes"][1] and on["peak_bytes"] > plain["peak_bytes"]
    # switched off (no uneven stages), an interleaving that does not divide the stages is refused, as before
    with pytest.raises(ValueError, match="pp x vp = 128 exceeds the 126 layers"):
        step_estimate(j, cfg, PRACTICE.with_(any_degrees=False))
    with pytest.raises(ValueError, match="vp=2 must divide every stage's layers"):
        step_estimate(j, cfg.with_(vp=2), PRACTICE.with_(any_degrees=False))


def test_even_interleaving_keeps_the_previous_formula():
    """Where vp divides every stage's layers the step is step_s over stage totals, bit for bit."""
    sh = TransformerShape("gpt-13b", 40, 5120, 40, 2048, vocab=51200)
    j = Job(shape=sh, gpu=H100, n_gpus=64, gpus_per_node=8, port_gb_s=50.0, global_batch=128)
    for rules in (PRACTICE, PRACTICE.with_(any_degrees=False)):
        e = step_estimate(j, ParallelConfig(tp=4, pp=4, dp=4, vp=2, sequence_parallel=True, zero=1), rules)
        assert e["chunk_layers"] == [[5, 5]] * 4
        assert e["pipeline_s"] == sch.step_s("interleaved", e["stage_s"], e["micro_batches"], 2)


def test_search_offers_uneven_interleaving_only_with_uneven_stages():
    j = llama_job(8192)
    small = j.__class__(**{**j.__dict__, "n_gpus": 128})
    on = {(c.pp, c.vp) for c in layouts(small, PRACTICE) if c.tp == 8 and c.cp == 1}
    off = {(c.pp, c.vp) for c in layouts(small, PRACTICE.with_(any_degrees=False)) if c.tp == 8 and c.cp == 1}
    assert (16, 8) in on and (16, 2) in on
    assert (16, 8) not in off and (16, 2) not in off and (2, 1) in off


def test_layers_in_flight_by_hand():
    """pp 4, vp 2, m 8, stage 0 with chunks of 1 and 2 layers: its warm-up runs 2 (pp - 1) + (vp - 1) pp + 1
    = 11 forwards, pp = 4 micro-batches per chunk in turn: 4 of chunk 0 (4 layers), 4 of chunk 1 (8), 3 of
    chunk 0 (3): 15 layer-micro-batches, where spreading the stage's 3 layers evenly would say 11/2 x 3 =
    16.5. An embedding-only first chunk holds nothing: chunks [0, 1], 4 x 0 + 4 x 1 + 3 x 0 = 4."""
    assert sch.layers_in_flight("interleaved", [1, 2], 4, 8, 0) == 15
    assert sch.layers_in_flight("interleaved", [0, 1], 4, 8, 0) == 4
    assert sch.layers_in_flight("interleaved", [2, 2], 4, 8, 0) == pytest.approx(
        sch.in_flight("interleaved", 4, 8, 0, 2) * 4)
    assert sch.layers_in_flight("1f1b", [3], 4, 8, 1) == 3 * 3


def test_uneven_chunks_set_the_first_stage_memory():
    # Llama 3 405B with 32 micro-batches per pipeline (DP 64 on 16,384): stage 0 (chunks 0, 1 x 7) runs
    # 2 x 15 + 7 x 16 + 1 = 143 forwards before its first backward: 8 rounds of 16 (7 x 16 = 112 layers)
    # and 15 more of the empty chunk: 112 layer-micro-batches, not 143/8 x 7 = 125.1
    j = llama_job()
    e = step_estimate(j, ParallelConfig(tp=8, pp=16, dp=64, cp=2, vp=8, sequence_parallel=True, zero=1),
                      PRACTICE)
    assert e["micro_batches"] == 32
    assert sch.layers_in_flight("interleaved", e["chunk_layers"][0], 16, 32, 0) == 112
    # stage 1 (8 one-layer chunks) holds 2 x 14 + 112 + 1 = 141: 29 layer-micro-batches more than stage 0
    gap = e["stage_peak_bytes"][1] - e["stage_peak_bytes"][0]
    assert gap > 25 * e["activation_bytes_per_layer"]
