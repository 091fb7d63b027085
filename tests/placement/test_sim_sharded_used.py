"""A practitioner's sharded AdamW for a split model: the optimizer state dealt over the GPUs it uses."""

import pytest

from lib.gpt import gpt_graph, preset
from lib.placement import baselines
from lib.placement.sim_env import SimPlacementEnv
from lib.placement.sim_sharded import sharded_over_used_step


@pytest.fixture(scope="module")
def env():
    return SimPlacementEnv(gpt_graph(preset("49m")), "4xT4-pcie")


def test_one_gpu_is_the_plain_step(env):
    single = (0,) * env.n_nodes
    assert sharded_over_used_step(env, single) == env.measure(single).step_s


def test_a_balanced_split_barely_changes_and_an_unbalanced_one_pays_for_copies(env):
    human = baselines.all_baselines(env.graph, 4)["human 2-GPU split on 0,1"]
    assert sharded_over_used_step(env, human) == pytest.approx(env.measure(human).step_s, rel=0.01)
    ends_apart = (3,) + (1,) * (env.n_nodes - 1)  # the embedding alone on GPU 3: 19M against 30M parameters
    plain = env.measure(ends_apart).step_s
    sharded = sharded_over_used_step(env, ends_apart)
    assert sharded > plain  # on PCIe the copies of the excess shard cost more than the balanced update saves


def test_bad_placements_are_refused(env):
    with pytest.raises(ValueError):
        sharded_over_used_step(env, (0,) * (env.n_nodes - 1))
