"""The simulator's sharded-AdamW baseline: its step time against a hand computation, its memory, its wrapper."""

import numpy as np
import pytest

from lib import hardware as hw
from lib.placement.evaluate import head_to_head
from lib.placement.sharded_adamw import shard_assignment
from lib.placement.sim_engine import ADAMW_BYTES_PER_PARAM, ADAMW_KERNELS
from lib.placement.sim_env import NoiseModel, SimPlacementEnv
from lib.placement.sim_sharded import ShardedOptimizerEnv, shards, sharded_peaks, sharded_step


@pytest.fixture(scope="module")
def env():
    return SimPlacementEnv("ci", "4xT4-pcie")


def test_step_time_equals_a_hand_computation_on_the_shared_bus(env):
    prof = hw.load("4xT4-pcie")
    top, dev = prof.topology, prof.devices
    bw = top["peak_bw_bytes_per_s"] * top["efficiency"]  # one bus: every copy waits for the one before

    def copy(n_params):
        return top["latency_s"] + 4 * n_params / bw

    def adamw(d, n_params):
        return (ADAMW_KERNELS * dev[d].launch_overhead_s
                + n_params * ADAMW_BYTES_PER_PARAM / dev[d].achievable_mem_bw_bytes_per_s)

    counts = [n.params for n in env.graph.nodes]
    owners = shard_assignment(counts, 4)
    P = [sum(c for c, o in zip(counts, owners) if o == d) for d in range(4)]
    assert all(P) and sum(P) == sum(counts)
    f, b, _ = env.engine.simulate((2,) * env.n_nodes)
    # model on GPU 2: grads out to 0, 1, 3 (one after another), each updates; 2 updates its own; params back
    t, ends = b, {}
    for d in (0, 1, 3):
        t += copy(P[d])
        ends[d] = t + adamw(d, P[d])
    t += adamw(2, P[2])
    for d in (0, 1, 3):
        t = max(t, ends[d]) + copy(P[d])
    st = sharded_step(env, 2)
    assert st.shard_params == tuple(P)
    assert st.forward_s == pytest.approx(f) and st.backward_s == pytest.approx(b - f)
    assert st.step_s == pytest.approx(t, rel=1e-12)
    assert env.measure((2,) * env.n_nodes).step_s == pytest.approx(b + st.single_gpu_optimizer_s)


def test_cheaper_links_make_the_sharded_phase_cheaper():
    pcie, nv = SimPlacementEnv("49m", "4xT4-pcie"), SimPlacementEnv("49m", "4xA100-nvlink")
    ratio = [sharded_step(e, 0).optimizer_s / sharded_step(e, 0).single_gpu_optimizer_s for e in (pcie, nv)]
    assert ratio[1] < ratio[0]


def test_memory_moves_the_moments_off_the_model_gpu(env):
    single = env.memory.peaks((0,) * env.n_nodes)
    sh = sharded_peaks(env, 0)
    assert sh[0] < single[0] and all(x > 0 for x in sh[1:])
    assert sum(shards(env)) == sum(n.params for n in env.graph.nodes) and len(shards(env, 2)) == 2


def test_wrapper_measures_single_gpu_as_sharded_and_the_rest_as_before(env):
    w = ShardedOptimizerEnv(env)
    one = (1,) * env.n_nodes
    assert w.measure(one).step_s == pytest.approx(sharded_step(env, 1).step_s)
    split = tuple(i % 2 for i in range(env.n_nodes))
    assert w.measure(split).step_s == env.measure(split).step_s
    assert "sharded over all 4 GPUs" in w.describe()
    with pytest.raises(ValueError, match="gpu 7"):
        sharded_step(env, 7)


def test_the_head_to_head_runs_on_the_wrapper_with_noise():
    noisy = SimPlacementEnv("ci", "4xT4-pcie", noise=NoiseModel(), seed=1)
    w = ShardedOptimizerEnv(noisy)
    n = noisy.n_nodes
    h = head_to_head(w, {"rl": [("split", tuple(i % 2 for i in range(n)))],
                         "sharded": [(f"gpu{g}", (g,) * n) for g in range(4)]}, rounds_select=1,
                     rounds_confirm=2, steps_per_round=2, rng=np.random.default_rng(0))
    assert {e.side for e in h.entries} == {"rl", "sharded"} and all(not e.oom for e in h.entries)
