"""Collectives at scale as data (data/hardware/fabrics/fabrics.json, lib/galvatron/search/fabrics.py) and their
use by the hierarchical network (collectives.group_s) under rules.measured_collectives (a candidate: off in every
preset), against hand calculations."""

import math
from dataclasses import replace

import pytest

from lib.galvatron.search import collectives as col
from lib.galvatron.search import fabrics as fb
from lib.galvatron.search.analytic import TransformerShape
from lib.galvatron.search.cost import network_of, step_estimate
from lib.galvatron.search.efficiency import load_gpu
from lib.galvatron.search.layout import Job, ParallelConfig
from lib.galvatron.search.rules import ALL_PRESETS, PRACTICE

MC = PRACTICE.with_(name="practice+mc", measured_collectives=True)


def test_every_point_quotes_its_source():
    d = fb._load()
    for name, f in d["fabrics"].items():
        assert f["points"] and all(p["source"] and p["nodes"] >= 2 for p in f["points"]), name
    assert all(v["source"] for v in d["nvlink"].values())
    assert set(fb.fabric_names()) >= {"ib-hdr-200", "ib-ndr-400", "roce-100", "efa-400"}


def test_fractions_by_hand():
    # EFA on p4dn: 57.17 / 4 NICs above the 12.5 GB/s line rate at 2 nodes (tree): capped; 31.77 / 4 / 12.5
    pts = fb.fraction_points("efa-400")
    assert pts[0] == (2, 1.0) and pts[1] == (3, pytest.approx(7.94 / 12.5))
    assert fb.port_fraction("efa-400", 64) == pytest.approx(7.40 / 12.5)       # flat beyond the last point
    assert fb.port_fraction("efa-400", 1) == 1.0
    # NDR between 2 (47 / 50) and 4 nodes (45.73 / 50): linear in log2(nodes)
    f2, f4 = 47 / 50, 45.73 / 50
    assert fb.port_fraction("ib-ndr-400", 3) == pytest.approx(f2 + (math.log2(3) - 1) * (f4 - f2))
    assert fb.nvlink_allreduce_bw("a100-sxm-80gb") == 230.77e9
    with pytest.raises(ValueError, match="unknown fabric"):
        fb.fraction_points("token-ring")


def test_group_s_with_measured_fabric_by_hand():
    pts = ((2, 0.5), (8, 0.25))
    net = col.Network(gpus_per_node=8, nvlink_bw=200e9, port_bw=40e9, nvlink_latency=0.0, port_latency=1e-5,
                      port_fraction_points=pts, nvlink_allreduce_bw=400e9, tree_allreduce=True)
    S = 8e9
    # one node: an all-reduce at the published NVLink all-reduce figure, other kinds at nvlink_bw
    assert col.group_s("all-reduce", S, 8, 1, net) == pytest.approx(2 * 7 / 8 * S / 400e9)
    assert col.group_s("all-gather", S, 8, 1, net) == pytest.approx(7 / 8 * S / 200e9)
    # 16 ranks on 2 nodes: RS + AG inside, the all-reduce of S / 8 across at 40 GB/s x 0.5, ring latency
    hand = 2 * 7 / 8 * S / 200e9 + 2 * 0.5 * (S / 8) / 20e9 + 2 * 1 * 1e-5
    assert col.group_s("all-reduce", S, 16, 1, net) == pytest.approx(hand)
    # 8 ranks one per node (stride 8): the port at 0.25, and the tree's 2 x 3 hops instead of the ring's 2 x 7
    hand = 2 * 7 / 8 * S / 10e9 + 2 * 3 * 1e-5
    assert col.group_s("all-reduce", S, 8, 8, net) == pytest.approx(hand)
    # a reduce-scatter keeps the ring's latency (NCCL has no tree for it)
    assert col.group_s("reduce-scatter", S, 8, 8, net) == pytest.approx(7 / 8 * S / 10e9 + 7 * 1e-5)


def test_switch_off_in_presets_and_on_changes_the_network():
    assert not any(r.measured_collectives for r in ALL_PRESETS.values())
    gpu = load_gpu("h100-sxm-80gb")
    sh = TransformerShape("gpt-13b", 8, 5120, 40, 2048, vocab=51200)
    job = Job(shape=sh, gpu=gpu, n_gpus=64, gpus_per_node=8, port_gb_s=50.0, global_batch=64)
    off, on = network_of(job, PRACTICE), network_of(job, MC)
    assert off.port_fraction_points == () and off.port_bw == pytest.approx(50e9 * gpu.link_efficiency)
    assert on.port_bw == 50e9 and on.port_fraction_points == fb.fraction_points("ib-ndr-400")
    assert on.nvlink_allreduce_bw == 479.41e9 and on.tree_allreduce
    # without the hierarchical network the switch does nothing
    assert network_of(job, MC.with_(hierarchical_network=False)) == network_of(
        job, PRACTICE.with_(hierarchical_network=False))
    cfg = ParallelConfig(tp=1, dp=64, micro_batch=1)
    a, b = step_estimate(job, cfg, PRACTICE), step_estimate(job, cfg, MC)
    assert a["fwd_s"] == b["fwd_s"] and a["dp_s"] != b["dp_s"]
    assert replace(PRACTICE, measured_collectives=False) == PRACTICE


def test_efa_p5_quotes_the_playbook_and_gathers_fall_faster():
    """The Ultra-Scale Playbook's collective benchmark (256 MB over every GPU of 1-64 nodes, EFA): all-reduce
    points from its labels, all-gather / reduce-scatter read off the figure, per NIC of the node's 32."""
    f = fb._load()["fabrics"]["efa-p5"]
    assert all("Ultra-Scale Playbook" in p["source"] for p in f["points"] + f["gather_points"])
    assert fb.port_gb_s_per_gpu("efa-p5") == 12.5 * 32 / 8 == 50.0
    assert fb.port_gb_s_per_gpu("ib-ndr-400") == 50.0                 # one NIC per GPU where unstated
    # a job that states no fabric: its GPU type's default fabric's line rate (HDR 25, NDR 50 GB/s per GPU)
    assert (fb.port_for("a100-sxm-80gb"), fb.port_for("h100-sxm-80gb")) == (25.0, 50.0)
    assert fb.port_for("a100-sxm-80gb", "efa-p5") == 50.0
    ar, ag = dict(fb.fraction_points("efa-p5")), dict(fb.fraction_points("efa-p5", "gather"))
    assert ar[64] == pytest.approx(32.9 / 32 / 12.5, abs=1e-4) and ar[2] == pytest.approx(361.7 / 400, abs=1e-4)
    assert all(ag[n] < ar[n] for n in ar) and sorted(ar, key=ar.get, reverse=True) == sorted(ar)
    # a fabric without gather points prices every kind at its all-reduce points
    assert fb.fraction_points("ib-ndr-400", "gather") == fb.fraction_points("ib-ndr-400")
    with pytest.raises(ValueError, match="kind"):
        fb.fraction_points("efa-p5", "broadcast")


def test_a_job_that_states_its_fabric_is_priced_on_it_in_any_preset_with_the_network():
    gpu = load_gpu("h100-sxm-80gb")
    sh = TransformerShape("gpt-13b", 8, 5120, 40, 2048, vocab=51200)
    plain = Job(shape=sh, gpu=gpu, n_gpus=64, gpus_per_node=8, port_gb_s=50.0, global_batch=64)
    efa = replace(plain, fabric="efa-p5")
    net = network_of(efa, PRACTICE)
    # efa-p5 is read by latency: the port at its fewest-nodes all-reduce fraction for every kind and node
    # count, the rest per-step latency by nodes
    assert fb.shortfall("efa-p5") == "latency" and fb.shortfall("ib-ndr-400") == "bandwidth"
    assert net.port_fraction_points == fb.fraction_points("efa-p5")[:1] and net.port_bw == 50e9
    assert net.port_fraction_points_gather == () and not net.tree_allreduce
    assert [n for n, _ in net.port_latency_points] == [n for n, _ in fb.fraction_points("efa-p5")]
    assert network_of(plain, PRACTICE).port_fraction_points == ()
    # the layer-wise presets have no hierarchical network: a stated fabric changes nothing there
    lw = PRACTICE.with_(hierarchical_network=False)
    assert network_of(efa, lw) == network_of(plain, lw)
    # 8 ranks one per node (stride 8): the ring's bandwidth at the 2-node fraction, 7 steps per phase of
    # the per-step latency published at 8 nodes
    S = 1e9
    f2 = fb.fraction_points("efa-p5")[0][1]
    ar8, ag8 = dict(net.port_latency_points)[8], dict(net.port_latency_points_gather)[8]
    assert col.group_s("all-gather", S, 8, 8, net) == pytest.approx(7 / 8 * S / (50e9 * f2) + 7 * ag8)
    assert col.group_s("all-reduce", S, 8, 8, net) == pytest.approx(2 * 7 / 8 * S / (50e9 * f2) + 2 * 7 * ar8)
    cfg = ParallelConfig(tp=1, dp=64, micro_batch=1)
    assert step_estimate(efa, cfg, PRACTICE)["dp_s"] != pytest.approx(step_estimate(plain, cfg, PRACTICE)["dp_s"])


def test_latency_reading_reproduces_each_published_point_and_grows_with_steps_not_bytes():
    """Read by latency, the network prices the playbook's own benchmark (256 MB over every GPU of n nodes)
    at the time its published bus bandwidth implies, at every point; a 16x larger message pays the same
    latency and 16x the bandwidth term, so its bus bandwidth is far higher than the published one at 64
    nodes (a bandwidth reading would keep it at the published 32.9 GB/s)."""
    gpu = load_gpu("h100-sxm-80gb")
    sh = TransformerShape("gpt-13b", 8, 5120, 40, 2048, vocab=51200)
    job = Job(shape=sh, gpu=gpu, n_gpus=512, gpus_per_node=8, port_gb_s=50.0, global_batch=512, fabric="efa-p5")
    net = network_of(job, PRACTICE)
    S = fb.message_bytes("efa-p5")
    assert S == 256 * 2 ** 20
    for kind, pts in (("all-reduce", fb.busbw_points("efa-p5")), ("all-gather", fb.busbw_points("efa-p5", "gather"))):
        phases = 2 if kind == "all-reduce" else 1
        for nodes, busbw in pts:
            n = 8 * nodes
            measured = phases * (n - 1) / n * S / busbw
            alpha = dict(net.port_latency_points if phases == 2 else net.port_latency_points_gather)[nodes]
            if alpha > gpu.port_latency_s:             # not floored: the point is reproduced exactly
                assert col.group_s(kind, S, n, 1, net) == pytest.approx(measured, rel=1e-9), (kind, nodes)
    # the figure's 64-node all-reduce label, per GPU as nccl-tests reports it
    assert dict(fb.busbw_points("efa-p5"))[64] == pytest.approx(32.9e9, rel=1e-3)
    big = 16 * S
    t = col.group_s("all-reduce", big, 512, 1, net)
    assert 2 * 511 / 512 * big / t > 3 * 32.9e9
    # per-step latencies between 5 and 50 microseconds: what a network's small-message latency is
    assert all(5e-6 <= a <= 50e-6 for _, a in net.port_latency_points + net.port_latency_points_gather)


def test_fabric_fields_are_checked_in_one_line():
    d = fb._load()
    saved = dict(d["fabrics"]["efa-p5"])
    try:
        d["fabrics"]["efa-p5"]["shortfall"] = "jitter"
        with pytest.raises(ValueError, match=r"fabric 'efa-p5': field shortfall: 'jitter'; allowed"):
            fb.shortfall("efa-p5")
        del d["fabrics"]["efa-p5"]["message_bytes"]
        with pytest.raises(ValueError, match="field message_bytes: missing"):
            fb.message_bytes("efa-p5")
    finally:
        d["fabrics"]["efa-p5"].clear()
        d["fabrics"]["efa-p5"].update(saved)
    assert fb.busbw_points("efa-400")[0] == (2, pytest.approx(57.17e9, rel=1e-3))     # 14.29 x 4 NICs


def test_fabric_reading_is_a_what_if_of_the_rules():
    """``rules.fabric_reading``: "file" (every preset) reads each fabric as its file says; "bandwidth" gives
    efa-p5 its published fractions by nodes and no latency points, as before the file read it as latency."""
    assert all(r.fabric_reading == "file" for r in ALL_PRESETS.values())
    gpu = load_gpu("h100-sxm-80gb")
    sh = TransformerShape("gpt-13b", 8, 5120, 40, 2048, vocab=51200)
    efa = Job(shape=sh, gpu=gpu, n_gpus=64, gpus_per_node=8, port_gb_s=50.0, global_batch=64, fabric="efa-p5")
    as_file, as_bw = network_of(efa, PRACTICE), network_of(efa, PRACTICE.with_(fabric_reading="bandwidth"))
    assert as_file == network_of(efa, PRACTICE.with_(fabric_reading="latency")) and as_file.port_latency_points
    assert as_bw.port_fraction_points == fb.fraction_points("efa-p5") and as_bw.port_latency_points == ()
    assert as_bw.tree_allreduce and as_bw.port_fraction_points_gather == fb.fraction_points("efa-p5", "gather")
    # a fabric without a message size cannot be read as latency: one line naming the field
    ndr = replace(efa, fabric="ib-ndr-400")
    with pytest.raises(ValueError, match="fabric 'ib-ndr-400': field message_bytes: missing"):
        network_of(ndr, PRACTICE.with_(fabric_reading="latency"))
    with pytest.raises(ValueError, match="CostRules.fabric_reading must be one of"):
        PRACTICE.with_(fabric_reading="both")
