"""Tests for lib/placement/sim_env.py: hand-computed tiny steps, pipeline and monotonicity properties, the
memory model against the write-up's facts, the calibration against the write-up's ~230 ms, noise, and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import hardware as hw
from lib.graph import Graph, Node, colocate, expand, peak_memory_estimate
from lib.placement import baselines
from lib.placement.env import OOM_PENALTY_S, TIMED_STEPS, PlacementEnv
from lib.placement.sim_env import (ADAMW_BYTES_PER_PARAM, ALLOC_OVERHEAD, NodeProfile, NoiseModel,
                                   SimPlacementEnv, calibrate_flops_efficiency)
from tests import ROOT

SEED_SINGLE_T4_S = 0.230  # quoted from the write-up: the everything-on-one-GPU step of the 49m GPT


def toy_profile(n_devices=2, kind="shared-bus", bw=1e9, latency=1e-3, flops=1e12, mem_bw=1e12):
    """A machine with round numbers and no overheads, so step times can be computed by hand."""
    dev = {"name": "toy", "peak_flops": {"fp32": flops}, "mem_bw_bytes_per_s": mem_bw, "mem_bytes": 10**12,
           "usable_mem_bytes": 10**12, "launch_overhead_s": 0.0, "flops_efficiency": 1.0, "mem_bw_efficiency": 1.0}
    topo = {"kind": "none"} if n_devices == 1 else {"kind": kind, "peak_bw_bytes_per_s": bw, "latency_s": latency,
                                                     "efficiency": 1.0}
    return hw.HardwareProfile.from_dict({"name": "toy", "n_devices": n_devices, "device": dev, "topology": topo,
                                         "host_launch_s": 0.0})


def node(i, op, fwd_flops, bwd_flops, out_bytes, inputs, params=0, saved=0, transient=0):
    return Node(i, f"n{i}", op, (1, 1, out_bytes // 4), params, float(fwd_flops), float(bwd_flops), 0.0, 0.0,
                out_bytes, saved, transient, tuple(inputs))


def two_node_graph(batch=1):
    # 1 ms forward and 2 ms backward for node 0; 3 ms and 4 ms for node 1 (at 1e12 FLOP/s); 1 MB edge.
    return Graph("two", (node(0, "embedding", 1e9, 2e9, 10**6, ()), node(1, "add", 3e9, 4e9, 10**6, (0,))),
                 batch=batch, seq=1)


# --- hand-computed tiny cases ---------------------------------------------------------------------------------

def test_two_nodes_on_one_device_is_the_sum_of_their_times():
    env = SimPlacementEnv(two_node_graph(), toy_profile())
    m = env.measure([1, 1])
    assert m.step_s == pytest.approx(1e-3 + 3e-3 + 4e-3 + 2e-3)
    assert m.phase_s["forward"] == pytest.approx(4e-3) and m.phase_s["optimizer"] == pytest.approx(0.0)
    assert not m.oom and m.samples_s == () and "toy" in m.source


def test_two_nodes_on_two_devices_add_a_copy_each_way():
    env = SimPlacementEnv(two_node_graph(), toy_profile(bw=1e9, latency=1e-3))
    copy = 1e-3 + 10**6 / 1e9  # latency + bytes / bandwidth
    m = env.measure([0, 1])
    assert m.step_s == pytest.approx(1e-3 + copy + 3e-3 + 4e-3 + copy + 2e-3)
    assert m.phase_s["forward"] == pytest.approx(1e-3 + copy + 3e-3)


def test_adamw_runs_per_device_in_parallel():
    g = Graph("opt", (node(0, "embedding", 0, 0, 4, (), params=10**6), node(1, "add", 0, 0, 4, (0,), params=3 * 10**6)),
              batch=1, seq=1)
    prof = toy_profile(latency=0.0, mem_bw=1e11)
    per_param = ADAMW_BYTES_PER_PARAM / 1e11
    one = SimPlacementEnv(g, prof).measure([0, 0])
    two = SimPlacementEnv(g, prof).measure([0, 1])
    assert one.phase_s["optimizer"] == pytest.approx(4e6 * per_param)
    assert two.phase_s["optimizer"] == pytest.approx(3e6 * per_param, rel=1e-6)  # the larger device's share


def test_a_shared_bus_serialises_copies_and_a_switch_does_not():
    # node 0 on device 0 feeds nodes 1 and 2 on devices 1 and 2: two copies from one sender.
    g = Graph("fan", (node(0, "embedding", 0, 0, 10**6, ()), node(1, "add", 0, 0, 4, (0,)),
                      node(2, "add", 0, 0, 4, (0, 1))), batch=1, seq=1)
    copy = 10**6 / 1e9
    for kind in ("shared-bus", "switch", "all-to-all"):
        env = SimPlacementEnv(g, toy_profile(3, kind, latency=0.0))
        # PyTorch copies block the source stream, so the two copies of node 0's output are sequential anyway.
        assert env.measure([0, 1, 2]).phase_s["forward"] == pytest.approx(2 * copy + copy / 10**6 * 4)
    # Two independent senders: 0->1 and 2->3 at the same time contend only on the shared bus.
    g = Graph("pairs", (node(0, "embedding", 0, 0, 10**6, ()), node(1, "embedding", 0, 0, 10**6, ()),
                        node(2, "add", 0, 0, 4, (0,)), node(3, "add", 0, 0, 4, (1,))), batch=1, seq=1)
    bus = SimPlacementEnv(g, toy_profile(4, "shared-bus", latency=0.0)).measure([0, 2, 1, 3])
    sw = SimPlacementEnv(g, toy_profile(4, "switch", latency=0.0)).measure([0, 2, 1, 3])
    assert bus.phase_s["forward"] == pytest.approx(2 * copy)
    assert sw.phase_s["forward"] == pytest.approx(copy)


def chain_graph(n_stages, fwd_flops, bwd_flops, batch):
    nodes = [node(0, "mlp", fwd_flops, bwd_flops, 4 * batch, ())]
    nodes += [node(i, "mlp", fwd_flops, bwd_flops, 4 * batch, (i - 1,)) for i in range(1, n_stages)]
    return Graph("chain", tuple(nodes), batch=batch, seq=1)


@pytest.mark.parametrize("n_stages,n_micro", [(1, 4), (2, 1), (2, 4), (3, 2), (4, 8)])
def test_gpipe_fill_and_drain_matches_the_formula(n_stages, n_micro):
    """S equal stages, M micro-batches, free copies: (M + S - 1) x the per-micro-batch stage time."""
    g = chain_graph(n_stages, 8e9, 16e9, batch=8)
    env = SimPlacementEnv(g, toy_profile(n_stages, "switch", bw=1e30, latency=0.0) if n_stages > 1
                          else toy_profile(1), n_micro=n_micro)
    m = env.measure(list(range(n_stages)))
    per_micro = (8e9 + 16e9) / 1e12 / n_micro
    assert m.step_s == pytest.approx((n_micro + n_stages - 1) * per_micro, rel=1e-9)


def test_sync_phases_never_faster_and_equal_without_overlap():
    env = SimPlacementEnv("49m", "4xT4-pcie", n_micro=4)
    sync = SimPlacementEnv("49m", "4xT4-pcie", n_micro=4, sync_phases=True)
    g = env.graph
    for p in ([0] * 40, baselines.human_split(g, 0, 1), baselines.layer_split(g, (0, 1, 2, 3))):
        assert sync.measure(p).step_s >= env.measure(p).step_s - 1e-12
    one = [2] * 40  # one device: syncing only costs the host's re-launch after each wait (microseconds)
    gap = SimPlacementEnv("49m", "4xT4-pcie", sync_phases=True).measure(one).step_s - \
        SimPlacementEnv("49m", "4xT4-pcie").measure(one).step_s
    assert 0 <= gap < 1e-3


def test_phase_timing_synchronises_phases_and_restores_the_plain_step():
    """The write-up's phase table syncs between phases; rewards and the head-to-head time the plain step."""
    from lib.placement.evaluate import phase_timing

    env = SimPlacementEnv("49m", "4xT4-pcie", n_micro=4)
    sync = SimPlacementEnv("49m", "4xT4-pcie", n_micro=4, sync_phases=True)
    p = baselines.layer_split(env.graph, (0, 1, 2, 3))
    plain = env.measure(p).step_s
    assert sync.measure(p).step_s > plain + 1e-4  # this placement overlaps phases across devices
    pt = phase_timing(env, [("split", p)], n_steps=2)
    assert sum(pt.phase_s[0].values()) == pytest.approx(sync.measure(p).step_s)
    assert "synchronised between phases" in pt.source
    assert env.sync_phases is False and env.measure(p).step_s == plain


# --- properties ---------------------------------------------------------------------------------------------

placements_49m = st.lists(st.integers(0, 3), min_size=40, max_size=40)


@settings(max_examples=60, deadline=None)
@given(p=placements_49m, factor=st.floats(1.01, 100.0), n_micro=st.sampled_from([1, 2, 4]))
def test_more_bandwidth_is_never_slower(p, factor, n_micro):
    base = hw.load("4xT4-pcie")
    fast = base.replace(topology={**base.topology, "peak_bw_bytes_per_s": base.topology["peak_bw_bytes_per_s"] * factor})
    slow_s = SimPlacementEnv("49m", base, n_micro=n_micro).measure(p).step_s
    fast_s = SimPlacementEnv("49m", fast, n_micro=n_micro).measure(p).step_s
    assert fast_s <= slow_s + 1e-12


@settings(max_examples=40, deadline=None)
@given(p=placements_49m, factor=st.floats(1.01, 10.0))
def test_faster_devices_are_never_slower(p, factor):
    base = hw.load("4xT4-pcie")
    d = base.devices[0].to_dict()
    quick = hw.Device.from_dict({**d, "peak_flops": {k: v * factor for k, v in d["peak_flops"].items()},
                                 "mem_bw_bytes_per_s": d["mem_bw_bytes_per_s"] * factor})
    faster = base.replace(devices=[quick] * 4)
    assert SimPlacementEnv("49m", faster).measure(p).step_s <= SimPlacementEnv("49m", base).measure(p).step_s + 1e-12


@settings(max_examples=40, deadline=None)
@given(p=placements_49m, n_micro=st.sampled_from([1, 2, 4, 8]))
def test_memory_is_the_graph_estimate_times_the_allocator_overhead(p, n_micro):
    env = SimPlacementEnv("49m", "4xT4-pcie", n_micro=n_micro)
    est = peak_memory_estimate(env.graph, p, 4, n_micro)
    assert env.peak_memory(p) == tuple(int(x * ALLOC_OVERHEAD) for x in est)
    # and the model's parts: every device holds at least the AdamW state of its parameters
    for d in range(4):
        assert env.peak_memory(p)[d] >= 16 * sum(n.params for n in env.graph.nodes if p[n.index] == d)


def test_step_is_at_least_the_busiest_devices_work():
    env = SimPlacementEnv("49m", "4xT4-pcie")
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.integers(0, 4, 40)
        work = [sum(env.engine.fwd_s[i][d] + env.engine.bwd_s[i][d] for i in range(40) if p[i] == d) for d in range(4)]
        assert env.measure(p).step_s >= max(work)


def test_trace_agrees_with_measure():
    env = SimPlacementEnv("49m", "4xT4-pcie", n_micro=2)
    p = baselines.human_split(env.graph, 0, 1)
    events = env.trace(p)
    assert max(e.end_s for e in events) == pytest.approx(env.measure(p).step_s)
    for lane in {e.lane for e in events}:  # a lane never runs two things at once
        spans = sorted((e.start_s, e.end_s) for e in events if e.lane == lane)
        assert all(b[0] >= a[1] - 1e-12 for a, b in zip(spans, spans[1:]))
    assert sum(e.kind == "forward" for e in events) == 2 * 40


# --- the write-up's machine -------------------------------------------------------------------------------------

def test_single_t4_step_is_within_20_percent_of_the_seed():
    m = SimPlacementEnv("49m", "4xT4-pcie").measure([0] * 40)
    assert abs(m.step_s - SEED_SINGLE_T4_S) <= 0.2 * SEED_SINGLE_T4_S
    assert isinstance(SimPlacementEnv("49m", "4xT4-pcie"), PlacementEnv)


def test_calibration_recovers_the_profiles_constant():
    eff = calibrate_flops_efficiency("49m", "4xT4-pcie", SEED_SINGLE_T4_S)
    assert eff == pytest.approx(hw.load("4xT4-pcie").devices[0].flops_efficiency, abs=0.005)
    with pytest.raises(ValueError, match="outside"):
        calibrate_flops_efficiency("49m", "4xT4-pcie", 0.001)


def test_the_logits_wall():
    """Moving only the head or only the loss copies the 823 MB logits both ways: far slower than moving both."""
    env = SimPlacementEnv("49m", "4xT4-pcie")
    one = env.measure([0] * 40).step_s
    only_loss = env.measure([0] * 39 + [1]).step_s
    only_head = env.measure([0] * 38 + [1, 0]).step_s
    both = env.measure([0] * 38 + [1, 1]).step_s
    copy = hw.load("4xT4-pcie").link(0, 1).copy_s(16 * 256 * 50257 * 4)
    # two logits copies, less what the moved node's parallel AdamW saves (under 10 ms)
    assert only_loss - one >= 2 * copy - 0.01
    assert only_head - one >= 2 * copy - 0.01
    assert both < one + 0.2 * copy


def test_memory_facts_of_the_seed():
    g = SimPlacementEnv("49m", "4xT4-pcie").graph
    free = SimPlacementEnv(g, "4xT4-pcie")
    capped = SimPlacementEnv(g, "4xT4-pcie", mem_cap=0.24)
    single = [0] * 40
    assert not free.measure(single).oom  # the 49m GPT fits on one T4
    m = capped.measure(single)
    assert m.oom and m.step_s == OOM_PENALTY_S and m.peak_mem_bytes[0] > capped.cap_bytes[0]
    assert capped.measure(baselines.human_split(g, 0, 1)).oom  # every two-GPU split runs out of memory
    four = capped.measure(baselines.layer_split(g, (0, 1, 2, 3)))
    assert not four.oom and max(four.peak_mem_bytes) <= capped.cap_bytes[0]  # the four-way split fits


def test_colocated_random_placements_are_much_cheaper_than_free_ones():
    """The seed: a random batch averages 530 ms over 40 nodes, 247 ms over the 13 co-location groups."""
    env = SimPlacementEnv("49m", "4xT4-pcie")
    rng = np.random.default_rng(1)
    groups = colocate(env.graph)
    free = np.mean([env.measure(rng.integers(0, 4, 40)).step_s for _ in range(300)])
    grouped = np.mean([env.measure(expand(rng.integers(0, 4, len(groups)), groups, 40)).step_s for _ in range(300)])
    assert abs(free - 0.530) <= 0.2 * 0.530
    assert abs(grouped - 0.247) <= 0.2 * 0.247
    assert grouped < 0.6 * free


def test_every_profile_and_preset_simulates():
    for name in hw.names():
        for preset in ("ci", "49m"):
            env = SimPlacementEnv(preset, name)
            m = env.measure([env.n_devices - 1] * env.n_nodes)
            assert 0 < m.step_s < 20 and not m.oom
    h200 = SimPlacementEnv("49m", "1xH200").measure([0] * 40).step_s
    t4 = SimPlacementEnv("49m", "4xT4-pcie").measure([0] * 40).step_s
    assert h200 < t4 / 5


def test_node_profile_replaces_the_roofline():
    g = two_node_graph()
    prof = NodeProfile("two", 1, "toy", (0.01, 0.02), (0.03, 0.04), 0.0, "test")
    env = SimPlacementEnv(g, toy_profile(1), node_profile=prof)
    assert env.measure([0, 0]).step_s == pytest.approx(0.1)
    assert NodeProfile.from_dict(prof.to_dict()) == prof
    with pytest.raises(ValueError, match="node_profile"):
        SimPlacementEnv(g, toy_profile(1), n_micro=1, node_profile=NodeProfile("other", 1, "toy", (0,), (0,), 0.0))
    with pytest.raises(ValueError, match="measured on 'H200'"):
        SimPlacementEnv(g, toy_profile(1), node_profile=NodeProfile("two", 1, "H200", (0.01, 0.02), (0.03, 0.04), 0.0))
    half = prof.scaled_to(1)
    assert half is prof and prof.scaled_to(2).fwd_s == (0.02, 0.04) and "scaled linearly" in prof.scaled_to(2).source


def test_a_gpu_check_report_feeds_the_simulator_through_the_cli(tmp_path):
    """A (fabricated, GPU-shaped) gpu_check report: its node profile replaces the roofline on the matching
    profile, scaled for micro-batches, and says so; a dry-run report is refused."""
    import json

    from lib.placement.experiment import EnvSpec, make_env

    t4 = SimPlacementEnv("ci", "4xT4-pcie")
    n = t4.n_nodes
    node = NodeProfile(t4.graph.name, t4.graph.batch, t4.profile.devices[0].name, (1e-3,) * n, (2e-3,) * n, 0.0,
                       "profiled on cuda:0 (T4)")
    rep = {"kind": "gpu_check", "dry_run": False, "single_device": [{"preset": "ci", "node_profile": node.to_dict()}]}
    path = tmp_path / "gpu_check_x.json"
    path.write_text(json.dumps(rep))
    env = make_env(EnvSpec(preset="ci", node_profile=str(path)))
    assert "measured profile: profiled on cuda:0 (T4)" in env.describe()
    one = env.measure([0] * n)
    assert one.phase_s["forward"] == pytest.approx(n * 1e-3, rel=0.05)  # measured times, not the roofline
    assert one.phase_s["forward"] != pytest.approx(t4.measure([0] * n).phase_s["forward"], rel=0.05)
    env2 = make_env(EnvSpec(preset="ci", n_micro=2, node_profile=str(path)))
    assert "scaled linearly" in env2.describe()
    path.write_text(json.dumps({**rep, "dry_run": True}))
    with pytest.raises(ValueError, match="dry run"):
        make_env(EnvSpec(preset="ci", node_profile=str(path)))
    path.write_text(json.dumps(rep))
    with pytest.raises(ValueError, match="no node profile for"):
        NodeProfile.from_report(str(path), "gpt-49m-not-there")


# --- noise -----------------------------------------------------------------------------------------------------

def test_noise_is_off_by_default_and_reproducible_with_a_seed():
    p = [0] * 20 + [1] * 20
    a = SimPlacementEnv("49m", "4xT4-pcie")
    assert a.measure(p) == a.measure(p)
    n1 = SimPlacementEnv("49m", "4xT4-pcie", noise=NoiseModel(), seed=7)
    n2 = SimPlacementEnv("49m", "4xT4-pcie", noise=NoiseModel(), seed=np.random.default_rng(7))
    m1, m2 = n1.measure(p), n2.measure(p)
    assert m1 == m2 and len(m1.samples_s) == TIMED_STEPS
    assert m1.step_s == pytest.approx(float(np.median(m1.samples_s)))
    assert n1.measure(p).step_s != m1.step_s  # fresh jitter per measurement
    assert sum(m1.phase_s.values()) == pytest.approx(m1.step_s)  # the phases carry the jitter too
    assert m1.phase_s != a.measure(p).phase_s


def test_multi_device_timings_are_noisier_and_best_of_many_flatters():
    env = SimPlacementEnv("49m", "4xT4-pcie", noise=NoiseModel(device_speed_sd=0.0), seed=3)
    single = [env.measure([0] * 40).step_s for _ in range(200)]
    split = [env.measure([0] * 20 + [1] * 20).step_s for _ in range(200)]
    assert np.std(single) < 0.001 < np.std(split)  # the write-up: under 1 ms vs 5-15 ms
    truth = SimPlacementEnv("49m", "4xT4-pcie").measure([0] * 20 + [1] * 20).step_s
    assert min(split) < truth - 0.005  # the best of many is flattered by luck
    assert abs(np.mean(split) - truth) < 0.002


def test_machines_differ_in_device_speed():
    a = SimPlacementEnv("49m", "4xT4-pcie", noise=NoiseModel(), seed=1)
    b = SimPlacementEnv("49m", "4xT4-pcie", noise=NoiseModel(), seed=2)
    assert a.device_time_factors != b.device_time_factors
    assert np.argmin(a.device_time_factors) != np.argmin(b.device_time_factors) or \
        np.argmax(a.device_time_factors) != np.argmax(b.device_time_factors)
    assert NoiseModel.from_dict(NoiseModel().to_dict()) == NoiseModel()
    with pytest.raises(ValueError, match="multi_device_sd_s"):
        NoiseModel(multi_device_sd_s=-1.0)


# --- bad input ------------------------------------------------------------------------------------------------

def test_bad_input_raises_value_errors_naming_the_problem():
    env = SimPlacementEnv("49m", "4xT4-pcie")
    with pytest.raises(ValueError, match="40 nodes"):
        env.measure([0] * 39)
    with pytest.raises(ValueError, match="out of range"):
        env.measure([0] * 39 + [4])
    with pytest.raises(ValueError, match="out of range"):
        env.measure([-1] + [0] * 39)
    with pytest.raises(ValueError, match="unknown GPT preset"):
        SimPlacementEnv("50m", "4xT4-pcie")
    with pytest.raises(ValueError, match="unknown hardware profile"):
        SimPlacementEnv("49m", "4xT4")
    for cap in (0, 0.0, -0.1, 1.01, 24):
        with pytest.raises(ValueError, match="mem_cap"):
            SimPlacementEnv("49m", "4xT4-pcie", mem_cap=cap)
    for n_micro in (0, 3, 2.5, -4):
        with pytest.raises(ValueError, match="n_micro"):
            SimPlacementEnv("49m", "4xT4-pcie", n_micro=n_micro)
    with pytest.raises(ValueError, match="NoiseModel"):
        SimPlacementEnv("49m", "4xT4-pcie", noise={"multi_device_sd_s": 0.01})
    assert SimPlacementEnv("49m", "4xT4-pcie", mem_cap=1.0).cap_bytes[0] == hw.load("4xT4-pcie").devices[0].usable_mem_bytes


def test_memory_breakdown_adds_up_and_names_the_logits():
    env = SimPlacementEnv("49m", "4xT4-pcie")
    p = baselines.human_split(env.graph, 0, 1)
    parts = env.memory_breakdown(p)
    assert tuple(sum(v[d] for v in parts.values()) for d in range(4)) == env.peak_memory(p)
    logits = 16 * 256 * 50257 * 4
    assert parts["largest output + transient"][1] == 2 * logits + 4  # softmax and gradient of the logits
    assert parts["model states"][0] + parts["model states"][1] == 16 * env.graph.params


def test_simulator_speed_bound_with_margin():
    """The benchmark's bounds (1,000 placements/s at n_micro=1; 250/s at n_micro=4), timed by its own ``rate``."""
    import importlib.util
    import os

    path = os.path.join(ROOT, "benchmarks", "bench_sim_env.py")
    spec = importlib.util.spec_from_file_location("bench_sim_env", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(0)
    for (preset, n_micro, noise), bound in bench.BOUNDS.items():
        env = SimPlacementEnv(preset, "4xT4-pcie", n_micro=n_micro)
        best = bench.rate(env, rng.integers(0, 4, (200, 40)).tolist())
        assert best >= bound, f"n_micro={n_micro}: {best:.0f} placements/s < {bound}"


# --- benchmarks/gpu_check.py ----------------------------------------------------------------------------------

def _gpu_check():
    import importlib.util
    import os

    path = os.path.join(ROOT, "benchmarks", "gpu_check.py")
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_exits_cleanly_without_cuda(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gpu_check.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "no CUDA device" in r.stdout
    assert list(tmp_path.iterdir()) == []  # nothing measured, nothing written


def test_gpu_check_helpers(tmp_path):
    import datetime as dt
    import json

    gc = _gpu_check()
    assert gc.profile_for_gpu("NVIDIA H200") == "1xH200"
    assert gc.profile_for_gpu("Tesla T4") == "4xT4-pcie"
    assert gc.profile_for_gpu("NVIDIA A100-SXM4-80GB") == "4xA100-nvlink"
    assert gc.profile_for_gpu("NVIDIA L4") is None
    assert gc.profile_for_gpu("NVIDIA H100 80GB HBM3") == "8xH100-nvlink"
    for other in ("NVIDIA GH200 480GB", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA RTX A1000",
                  "NVIDIA A100-PCIE-40GB", "NVIDIA H200 NVL"):  # not what those profiles describe
        assert gc.profile_for_gpu(other) is None, other
    for name in ("1xH200", "4xT4-pcie", "4xA100-nvlink", "8xH100-nvlink"):
        assert name in hw.names()
    path = gc.report_path(str(tmp_path), "my host/1", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    assert path.endswith("gpu_check_my_host_1_20260102T030405Z.json")
    gc.write_json_atomic(path, {"a": 1})
    assert json.load(open(path)) == {"a": 1} and len(list(tmp_path.iterdir())) == 1


def test_gpu_check_steps_run_on_cpu():
    """The GPU check's preset check and OOM loop, on CPU (logical devices, injected memory budget)."""
    gc = _gpu_check()
    lines = []
    row = gc.check_preset("ci", "cpu", repeats=1, log=lines.append, device="cpu", profile_repeats=1, profile_warmup=1)
    assert row["measured_step_s"] > 0 and not row["oom"] and row["profile"] == "cpu"
    assert np.isfinite(row["sim_error"]) and row["sim_step_s"] > 0 and len(row["node_profile"]["fwd_s"]) == 16
    prof = NodeProfile.from_dict(row["node_profile"])  # the profiler's output feeds the simulator
    assert min(prof.fwd_s) > 0 and prof.optimizer_s_per_param > 0 and prof.device_name == "x86 CPU, 2 cores"
    env = SimPlacementEnv("ci", "cpu", node_profile=prof)
    expected = sum(prof.fwd_s) + sum(prof.bwd_s) + prof.optimizer_s_per_param * env.graph.params
    assert env.measure([0] * 16).step_s >= expected - 1e-12  # plus host launch gaps at most
    oom = gc.oom_recovery("ci", attempts=3, log=lines.append, device="cpu")
    assert oom["ooms"] == 3 and oom["error"] is None and oom["healthy_step_after_s"] > 0
    assert len(lines) == 2 and "OOM loop" in lines[1]


def test_the_parts_live_in_their_own_modules_and_are_re_exported():
    """sim_env is the environment; memory, noise and the event engine are modules of their own, one source each."""
    from lib.placement import memory, sim_engine, sim_env, sim_noise

    for name in sim_env.__all__:
        assert hasattr(sim_env, name), name
    assert sim_env.ALLOC_OVERHEAD is memory.ALLOC_OVERHEAD
    assert sim_env.NoiseModel is sim_noise.NoiseModel and sim_env.NodeProfile is sim_engine.NodeProfile
    env = SimPlacementEnv("ci", "4xT4-pcie", n_micro=2)
    p = [i % 4 for i in range(env.n_nodes)]
    assert env.peak_memory(p) == memory.accounted_peak_bytes(env.graph, p, 4, 2)
    assert env.measure(p).step_s == env.engine.simulate(tuple(p))[2]


def test_jittered_steps_are_the_protocols_timed_steps():
    from lib.placement.sim_noise import jittered_steps

    rng = np.random.default_rng(0)
    steps = jittered_steps(0.2, [0, 1], NoiseModel(multi_device_sd_s=1.0), rng)
    assert len(steps) == TIMED_STEPS and min(steps) >= 0.1  # never below half the noiseless step
    assert np.all(jittered_steps(0.2, [0, 0], NoiseModel(single_device_sd_s=0.0), rng) == 0.2)


def test_noise_is_a_share_of_the_step_on_other_machines():
    """The noise model's sizes describe the T4s; a faster machine gets the same share of its own step."""
    from lib.placement.experiment import EnvSpec, make_env

    t4 = make_env(EnvSpec(profile="4xT4-pcie", noise=True))
    h100 = make_env(EnvSpec(profile="8xH100-nvlink", noise=True))
    assert t4.noise_scale == 1.0
    single = (0,) * h100.n_nodes
    quiet = SimPlacementEnv(h100.graph, h100.profile)
    ratio = quiet.measure(single).step_s / SimPlacementEnv(t4.graph, t4.profile).measure(single).step_s
    assert h100.noise_scale == pytest.approx(ratio) and h100.noise_scale < 0.5
    split = (0,) * 20 + (1,) * (h100.n_nodes - 20)
    spread = np.std([h100.measure(split).step_s for _ in range(200)])
    assert spread < 0.5 * NoiseModel().multi_device_sd_s  # an H100 step is not T4 noise on a faster machine
    unscaled = SimPlacementEnv(h100.graph, h100.profile, noise=NoiseModel(reference_profile=None), seed=0)
    assert unscaled.noise_scale == 1.0


def test_noise_reference_must_be_a_name():
    with pytest.raises(ValueError, match="reference_profile"):
        NoiseModel(reference_profile="")


def test_the_committed_h200_report_reproduces_its_own_node_profile_estimate():
    """The real gpu_check report from one H200 (data/runs/): fed back through the CLI's path, its measured node
    times give the step the report printed as 'from node profile', and that step is closer to the measured one
    than the roofline's for both GPTs that are not launch-bound."""
    import glob
    import json
    import os

    from lib.placement.experiment import EnvSpec, make_env

    paths = sorted(glob.glob(os.path.join(ROOT, "data", "runs", "gpu_check_*.json")))
    reports = [p for p in paths if not json.load(open(p)).get("dry_run", True)]
    assert reports, "no real gpu_check report in data/runs"
    rep = json.load(open(reports[0]))
    for row in rep["single_device"]:
        if row["preset"] == "ci":
            continue
        env = make_env(EnvSpec(preset=row["preset"], profile=rep["profile"], node_profile=reports[0]))
        step = env.measure([0] * env.n_nodes).step_s
        assert step == pytest.approx(row["sim_node_profile_step_s"], rel=0.01)
        assert abs(step / row["measured_step_s"] - 1) < abs(row["sim_error"])
