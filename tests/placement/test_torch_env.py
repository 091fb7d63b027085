"""Tests for lib/placement/torch_env.py on CPU logical devices: every placement computes the single-device loss
and gradients (also with micro-batches), the timing protocol, input validation, and 1,000 out-of-memory
recoveries in a row followed by a normal measurement."""

import gc

import numpy as np
import pytest
import torch

from lib import hardware as hw
from lib.gpt import preset
from lib.graph import peak_memory_estimate
from lib.placement.baselines import all_baselines, pipeline
from lib.placement.env import OOM_PENALTY_S, PHASES, PlacementEnv
from lib.placement.memory import ALLOC_OVERHEAD, accounted_peak_bytes
from lib.placement.sim_env import SimPlacementEnv
from lib.placement.torch_env import T4_VISIBLE_BYTES, TorchPlacementEnv

CPU3 = ["cpu"] * 3
N = preset("ci").n_nodes


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: thread start-up and contention on a shared 2-core machine cost more than the maths."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def grads_of(env):
    return {k: p.grad.detach().clone() for k, p in env.model.named_parameters()}


def random_placements(n, k=4, seed=0):
    rng = np.random.default_rng(seed)
    ps = [tuple(int(x) for x in rng.integers(0, n, N)) for _ in range(k)]
    return ps + [tuple(i % n for i in range(N)), (0,) * (N - 1) + (2,)]  # alternating; the loss alone


@pytest.fixture(scope="module")
def reference():
    env = TorchPlacementEnv("ci", ["cpu"], seed=0)
    loss = env.forward_backward((0,) * N)
    return loss, grads_of(env)


@pytest.mark.parametrize("n_micro", [1, 2])
def test_every_placement_gives_the_single_device_loss_and_gradients(reference, n_micro):
    ref_loss, ref_grads = reference
    env = TorchPlacementEnv("ci", CPU3, n_micro=n_micro, seed=0)
    for p in random_placements(3):
        loss = env.forward_backward(p)
        assert loss == pytest.approx(ref_loss, rel=1e-6, abs=1e-7)
        got = grads_of(env)
        assert got.keys() == ref_grads.keys()
        for k in ref_grads:
            assert torch.allclose(got[k], ref_grads[k], rtol=1e-5, atol=1e-7), (p, n_micro, k)


def test_training_steps_match_the_single_device_run():
    one = TorchPlacementEnv("ci", ["cpu"], seed=1)
    split = TorchPlacementEnv("ci", CPU3, n_micro=2, seed=1)
    p = random_placements(3, seed=5)[0]
    for _ in range(3):
        assert split.train_step(p) == pytest.approx(one.train_step((0,) * N), rel=1e-5)
    for (k, a), b in zip(one.model.named_parameters(), split.model.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), k


def test_one_adamw_per_device_over_exactly_its_nodes_parameters():
    env = TorchPlacementEnv("ci", CPU3)
    p = (0,) * 5 + (2,) * (N - 5)  # device 1 unused
    env.place(p)
    assert len(env.opts) == 2
    expected = [{id(q) for i, m in enumerate(env.model.nodes) if p[i] == d for q in m.parameters()} for d in (0, 2)]
    assert [{id(q) for g in o.param_groups for q in g["params"]} for o in env.opts] == expected


def test_measure_follows_the_protocol():
    env = TorchPlacementEnv("ci", CPU3, warmup=1, timed=3)
    assert isinstance(env, PlacementEnv) and env.n_nodes == N and env.n_devices == 3
    p = pipeline(env.graph, (0, 1, 2))
    m = env.measure(p)
    assert not m.oom and len(m.samples_s) == 3 and m.step_s == sorted(m.samples_s)[1]
    assert set(m.phase_s) == set(PHASES) and all(v > 0 for v in m.phase_s.values())
    assert m.peak_mem_bytes == accounted_peak_bytes(env.graph, p, 3)  # the simulator's accounting
    assert "cpu" in m.source and "3 logical devices" in env.describe()
    assert np.isfinite(env.last_loss)


def test_bad_input_raises_value_error_naming_the_problem():
    env = TorchPlacementEnv("ci", CPU3, warmup=0, timed=1)
    with pytest.raises(ValueError, match=f"has {N - 1} entries.*{N} nodes"):
        env.measure((0,) * (N - 1))
    with pytest.raises(ValueError, match="out of range: devices are 0..2"):
        env.measure((0,) * (N - 1) + (3,))
    with pytest.raises(ValueError, match="unknown GPT preset 'huge'"):
        TorchPlacementEnv("huge", CPU3)
    for cap in (0.0, -0.1, 1.5, True):
        with pytest.raises(ValueError, match=r"outside \(0, 1\]"):
            TorchPlacementEnv("ci", CPU3, mem_cap=cap)
    with pytest.raises(ValueError, match="n_micro=3"):
        TorchPlacementEnv("ci", CPU3, n_micro=3)  # the ci batch is 4
    with pytest.raises(ValueError, match="devices is empty"):
        TorchPlacementEnv("ci", [])


def live_tensors() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor))


def test_a_thousand_out_of_memory_recoveries_then_a_normal_measurement():
    probe = TorchPlacementEnv("ci", CPU3)
    one, split = (0,) * N, pipeline(probe.graph, (0, 1, 2))
    single_peak = accounted_peak_bytes(probe.graph, one, 3)[0]
    assert max(accounted_peak_bytes(probe.graph, split, 3)) < single_peak
    # a card just too small for everything on one device: experiment C in miniature
    env = TorchPlacementEnv("ci", CPU3, mem_cap=0.5, cpu_capacity_bytes=2 * (single_peak - 1), warmup=0, timed=1)
    env.measure(split)  # warm the allocator before counting tensors
    before = live_tensors()
    for _ in range(1000):
        m = env.measure(one)
        assert m.oom and m.step_s == OOM_PENALTY_S and m.phase_s == {}
    assert env.n_oom == 1000 and m.peak_mem_bytes[0] == single_peak
    assert live_tensors() - before < 20  # nothing the failed steps allocated survives
    ok = env.measure(split)
    assert not ok.oom and ok.step_s < OOM_PENALTY_S and max(ok.peak_mem_bytes) <= env.budget_bytes


def test_the_injected_oom_strikes_mid_step_after_the_first_nodes_ran():
    one = (0,) * N
    est = accounted_peak_bytes(TorchPlacementEnv("ci", CPU3).graph, one, 3)[0]
    env = TorchPlacementEnv("ci", CPU3, mem_cap=1.0, cpu_capacity_bytes=est - 1, warmup=0, timed=1)
    calls, check = [], env._check_budget

    def spy(i):
        calls.append(i)
        check(i)

    env._check_budget = spy
    assert env.measure(one).oom
    assert calls == list(range(N))  # the loss, the last node to save activations, tips it over


def budget_check_verdict(env, p) -> bool:
    """Run the injected CPU budget check over one forward pass of ``p`` without any tensors: True if it fires."""
    env.placement, env._fixed = tuple(p), env._fixed_bytes(tuple(p))
    env._running = [0] * env.n_devices
    try:
        for _ in range(env.n_micro):
            for i in range(env.n_nodes):
                env._check_budget(i)
    except torch.cuda.OutOfMemoryError:
        return True
    return False


def test_a_logical_card_is_a_t4_as_the_hardware_profile_describes_it():
    t4 = hw.load("4xT4-pcie").devices[0]
    assert T4_VISIBLE_BYTES == t4.usable_mem_bytes == int(14.75 * 2**30)
    env = TorchPlacementEnv("ci", CPU3, mem_cap=0.24)
    assert env.budget_bytes == SimPlacementEnv("ci", "4xT4-pcie", mem_cap=0.24).cap_bytes[0]


@pytest.mark.parametrize("n_micro", [1, 4])
def test_both_executors_give_the_same_oom_verdicts_for_the_baselines_at_cap_024(n_micro):
    """Experiment C on the 49m GPT, from the estimate only (no 49m step runs): the CPU executor used the raw
    estimate, so it let the human two-GPU split fit where the simulator (and the write-up) run out of memory."""
    env = TorchPlacementEnv("49m", ["cpu"] * 4, n_micro=n_micro, mem_cap=0.24)
    sim = SimPlacementEnv("49m", "4xT4-pcie", n_micro=n_micro, mem_cap=0.24)
    verdicts = {}
    for label, p in all_baselines(env.graph, 4).items():
        assert env.estimated_peak_bytes(p) == sim.peak_memory(p)
        verdicts[label] = sim.measure(p).oom
        assert env.estimated_oom(p) == budget_check_verdict(env, p) == verdicts[label], label
    if n_micro == 1:  # the write-up's facts of experiment C
        assert verdicts["human 2-GPU split on 0,1"] and not verdicts["4-way layer split"]


def test_a_run_step_and_the_simulator_agree_where_only_the_allocator_overhead_decides():
    """On the ci GPT with a card sized between the raw and the accounted peak of one placement."""
    one = (0,) * N
    graph = TorchPlacementEnv("ci", CPU3).graph
    raw, accounted = max(peak_memory_estimate(graph, one, 3)), max(accounted_peak_bytes(graph, one, 3))
    capacity = (raw + accounted) // 2
    assert raw < capacity < accounted and ALLOC_OVERHEAD > 1
    env = TorchPlacementEnv("ci", CPU3, mem_cap=1.0, cpu_capacity_bytes=capacity, warmup=0, timed=1)
    t4 = hw.load("4xT4-pcie")
    dev = hw.Device.from_dict({**t4.devices[0].to_dict(), "usable_mem_bytes": capacity})
    sim = SimPlacementEnv(graph, t4.replace(devices=[dev] * 3), mem_cap=1.0)
    for p in [one, pipeline(graph, (0, 1, 2))] + random_placements(3, k=3):
        m = env.measure(p)
        assert m.oom == env.estimated_oom(p) == sim.measure(p).oom, p
        assert m.peak_mem_bytes == sim.peak_memory(p)
    assert env.measure(one).oom  # the raw estimate alone would have let it fit


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_logical_devices_match_cpu(reference):
    ref_loss, ref_grads = reference
    env = TorchPlacementEnv("ci", ["cuda:0"] * 3, n_micro=2, seed=0)
    for p in random_placements(3, k=2):
        assert env.forward_backward(p) == pytest.approx(ref_loss, rel=1e-4)
        for k, q in env.model.named_parameters():
            assert torch.allclose(q.grad.cpu(), ref_grads[k], rtol=1e-3, atol=1e-5), k
    m = env.measure(p)
    assert not m.oom and all(b > 0 for b in m.peak_mem_bytes)


def test_sharded_adamw_trains_exactly_as_per_device_adamw():
    """Chapter 4's human baseline: the model on one device, AdamW's state over all four; same updates."""
    plain = TorchPlacementEnv("ci", ["cpu"] * 4, seed=2)
    sharded = TorchPlacementEnv("ci", ["cpu"] * 4, seed=2, optimizer="sharded")
    one = (0,) * N
    for _ in range(3):
        assert sharded.train_step(one) == pytest.approx(plain.train_step(one), rel=1e-6)
    for (k, a), b in zip(plain.model.named_parameters(), sharded.model.parameters()):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7), k
    (opt,) = sharded.opts
    assert sorted(set(opt.owners)) == [0, 1, 2, 3] and "sharded AdamW" in sharded.describe()


def test_sharded_adamw_refuses_what_it_cannot_account():
    with pytest.raises(ValueError, match="^optimizer 'sharded' with a mem_cap"):
        TorchPlacementEnv("ci", ["cpu"] * 2, optimizer="sharded", mem_cap=0.5)
    with pytest.raises(ValueError, match="^optimizer 'zero'"):
        TorchPlacementEnv("ci", ["cpu"] * 2, optimizer="zero")
