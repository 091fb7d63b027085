"""The placer: features, shapes, and log-probabilities checked against a hand-written numpy computation."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lib.placement.placer import ADJ_WINDOW, MAX_DIMS, Placer, PlacerInputs, check_groups, expand


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def chain_graph(n=6, residual=True):
    """A tiny GPT-like chain: node i feeds i+1, and every third node also feeds i+3 (a residual edge)."""
    ops = ["embedding", "layernorm", "attention", "add", "mlp", "head", "loss"]
    nodes = []
    for i in range(n):
        inputs = () if i == 0 else ((i - 1,) + ((i - 3,) if residual and i % 3 == 0 and i >= 3 else ()))
        nodes.append(SimpleNamespace(index=i, name=f"n{i}", op=ops[i % len(ops)], out_shape=(2, 8, 4 * (i + 1)),
                                     inputs=inputs))
    return SimpleNamespace(name=f"toy-{n}", nodes=tuple(nodes))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
    z = w_ih @ x + b_ih + w_hh @ h + b_hh
    H = h.shape[0]
    i, f, g, o = sigmoid(z[:H]), sigmoid(z[H:2 * H]), np.tanh(z[2 * H:3 * H]), sigmoid(z[3 * H:])
    c = f * c + i * g
    return o * np.tanh(c), c


def manual_log_prob(placer, actions):
    """Independent re-implementation of the placer's forward pass in float64 numpy."""
    sd = {k: v.detach().double().numpy() for k, v in placer.state_dict().items()}
    x = np.concatenate([placer.op_mix.double().numpy() @ sd["op_embedding.weight"].T,
                        placer.numeric.double().numpy()], axis=1)
    H = sd["encoder.weight_hh_l0"].shape[1]
    h, c, enc = np.zeros(H), np.zeros(H), []
    for t in range(x.shape[0]):
        h, c = lstm_step(x[t], h, c, sd["encoder.weight_ih_l0"], sd["encoder.weight_hh_l0"],
                         sd["encoder.bias_ih_l0"], sd["encoder.bias_hh_l0"])
        enc.append(h)
    enc = np.array(enc)
    total, prev = 0.0, placer.n_devices
    for t, a in enumerate(actions):
        inp = np.concatenate([sd["dev_embedding.weight"][prev], enc[t]])
        h, c = lstm_step(inp, h, c, sd["decoder.weight_ih"], sd["decoder.weight_hh"], sd["decoder.bias_ih"],
                         sd["decoder.bias_hh"])
        scores = np.tanh(enc @ sd["attn_enc.weight"].T + sd["attn_dec.weight"] @ h) @ sd["attn_v.weight"][0]
        w = np.exp(scores - scores.max())
        w /= w.sum()
        logits = sd["out.weight"] @ np.concatenate([h, w @ enc]) + sd["out.bias"]
        logp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
        total += logp[a]
        prev = a
    return total


@pytest.mark.parametrize("groups", [None, ((0,), (1, 2, 3), (4, 5))])
def test_log_prob_matches_manual_computation(groups):
    torch.manual_seed(0)
    g = chain_graph(6)
    placer = Placer(PlacerInputs.from_graph(g, groups), n_devices=3, hidden=8, op_embed=4, dev_embed=5)
    s = placer.sample(5, torch.Generator().manual_seed(1))
    for k in range(5):
        want = manual_log_prob(placer, s.actions[k].tolist())
        assert s.log_prob[k].item() == pytest.approx(want, abs=1e-5)
    again = placer.evaluate(s.actions.numpy())
    assert torch.allclose(again.log_prob, s.log_prob, atol=1e-6)


def test_probabilities_sum_to_one_over_all_placements():
    torch.manual_seed(1)
    placer = Placer(PlacerInputs.from_graph(chain_graph(3)), n_devices=2, hidden=6, op_embed=3, dev_embed=3)
    every = np.array([[a, b, c] for a in range(2) for b in range(2) for c in range(2)])
    total = placer.evaluate(every).log_prob.exp().sum().item()
    assert total == pytest.approx(1.0, abs=1e-5)


def test_entropy_is_sum_of_per_step_entropies_and_bounded():
    torch.manual_seed(2)
    placer = Placer(PlacerInputs.from_graph(chain_graph(5)), n_devices=4, hidden=8)
    s = placer.sample(3, torch.Generator().manual_seed(0))
    assert torch.all(s.entropy > 0)
    assert torch.all(s.entropy <= 5 * np.log(4) + 1e-5)


def test_greedy_is_the_per_step_argmax_and_sampling_is_seeded():
    torch.manual_seed(3)
    placer = Placer(PlacerInputs.from_graph(chain_graph(6)), n_devices=3, hidden=8)
    fav = placer.greedy()
    assert len(fav) == 6 and all(0 <= d < 3 for d in fav)
    # the greedy placement is at least as likely as any sampled one
    s = placer.sample(64, torch.Generator().manual_seed(0))
    lp_fav = placer.evaluate([fav]).log_prob.item()
    assert lp_fav >= s.log_prob.max().item() - 1e-5
    a = placer.sample(4, torch.Generator().manual_seed(7)).actions
    b = placer.sample(4, torch.Generator().manual_seed(7)).actions
    assert torch.equal(a, b)


def test_features_describe_op_shape_and_adjacency():
    g = chain_graph(6)
    f = PlacerInputs.from_graph(g, op_types=("embedding", "layernorm", "attention", "add", "mlp", "head", "loss"))
    assert f.op_mix.shape == (6, 7) and np.allclose(f.op_mix.sum(1), 1)
    assert f.numeric[2, 2] == pytest.approx(np.log1p(12) / 10)  # third dim of node 2's output (2, 8, 12)
    base = MAX_DIMS + 2
    # node 3 reads node 2 (offset -1) and node 0 (offset -3)
    assert f.numeric[3, base + ADJ_WINDOW - 1] == 1 and f.numeric[3, base + ADJ_WINDOW - 3] == 1
    # node 0 feeds node 1 (offset +1) and node 3 (offset +3)
    assert f.numeric[0, base + ADJ_WINDOW] == 1 and f.numeric[0, base + ADJ_WINDOW + 2] == 1
    grouped = PlacerInputs.from_graph(g, ((0,), (1, 2, 3), (4, 5)))
    assert grouped.n_items == 3 and grouped.names[1] == "n1+n2+n3"


def test_real_gpt_graph_groups():
    from lib.gpt import gpt_graph, preset
    from lib.graph import colocate

    g = gpt_graph(preset("49m"))
    groups = colocate(g)
    f = PlacerInputs.from_graph(g, groups)
    assert f.n_items == len(groups) == 13
    placer = Placer(f, n_devices=4)
    assert len(placer.greedy()) == 13


def test_bad_input():
    g = chain_graph(4)
    with pytest.raises(ValueError, match="cover every node"):
        check_groups(((0, 1), (1, 2, 3)), 4)
    with pytest.raises(ValueError, match="n_devices"):
        Placer(PlacerInputs.from_graph(g), n_devices=0)
    placer = Placer(PlacerInputs.from_graph(g), n_devices=2, hidden=4)
    with pytest.raises(ValueError, match="shape"):
        placer.evaluate([[0, 1]])
    with pytest.raises(ValueError, match="device indices"):
        placer.evaluate([[0, 1, 2, 0]])
    with pytest.raises(ValueError, match="op types"):
        PlacerInputs.from_graph(g, op_types=("embedding",))
    assert expand((1, 0), ((0, 2), (1, 3)), 4) == (1, 0, 1, 0)
