"""Tests for lib/gpt.py: presets, the chain's shape, parameter counts against the torch modules and the spec,
FLOPs against torch's own FLOP counter and hand formulas, saved bytes against what autograd really saves."""

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from lib.gpt import PRESETS, GPTConfig, build_model, gpt_graph, node_names, preset, random_batch


def test_presets_and_errors():
    assert set(PRESETS) == {"ci", "49m", "163m"}
    with pytest.raises(ValueError, match=r"unknown GPT preset '7b'.*'163m'.*'49m'.*'ci'"):
        preset("7b")
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig("x", 1, 5, 32, 10, 8, 2)
    with pytest.raises(ValueError, match="n_layer"):
        GPTConfig("x", 0, 1, 32, 10, 8, 2)
    assert GPTConfig.from_dict(preset("49m").to_dict()) == preset("49m")


@pytest.mark.parametrize("name,n_nodes", [("ci", 16), ("49m", 40), ("163m", 76)])
def test_chain_shape(name, n_nodes):
    cfg = preset(name)
    g = gpt_graph(cfg)
    assert g.n_nodes == n_nodes == cfg.n_nodes
    assert [n.name for n in g.nodes] == list(node_names(cfg))
    ops = [n.op for n in g.nodes]
    assert ops[0] == "embedding" and ops[-3:] == ["layernorm", "head", "loss"]
    assert ops[1:-3] == ["layernorm", "attention", "add", "layernorm", "mlp", "add"] * cfg.n_layer
    assert g.nodes[-1].out_shape == () and g.nodes[-2].out_shape == (16 if name != "ci" else 4, cfg.block_size,
                                                                     cfg.vocab_size)


def hand_params(cfg):
    d, V, T, L = cfg.n_embd, cfg.vocab_size, cfg.block_size, cfg.n_layer
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return V * d + T * d + L * block + 2 * d + V * d


def test_params_49m_and_163m_against_spec_and_hand_formula():
    g49, g163 = gpt_graph(preset("49m")), gpt_graph(preset("163m"))
    assert g49.params == hand_params(preset("49m"))
    assert abs(g49.params - 49.3e6) < 0.1e6  # spec 6.2: "about 49.3M in total"
    emb_head = sum(n.params for n in g49.nodes if n.op in ("embedding", "head"))
    assert abs(emb_head - 38.6e6) < 0.15e6  # spec 6.2: 2 x 50,257 x 384 = 38.6M (+0.1M position table)
    assert 2 * 50257 * 384 == sum(n.params for n in g49.nodes if n.op == "head") * 2
    assert abs(g163.params - 162.5e6) < 0.1e6  # spec 6.2: "about 162.5M (context 256)"


@pytest.mark.parametrize("name", ["ci", "49m"])
def test_params_against_torch_modules(name):
    cfg = preset(name)
    with torch.device("meta"):  # shapes only: no 200 MB of weights for the 49m model
        m = build_model(cfg)
    per_node = [sum(p.numel() for p in mod.parameters()) for mod in m.nodes]
    assert per_node == [n.params for n in m.graph.nodes]
    assert sum(p.numel() for p in m.parameters()) == m.graph.params


def test_logits_bytes_is_the_seeds_823mb():
    g = gpt_graph(preset("49m"))
    assert g.nodes[-2].out_bytes == 16 * 256 * 50257 * 4 == 823_410_688


def test_matmul_flops_hand_formulas_49m():
    cfg = preset("49m")
    g = gpt_graph(cfg)
    B, T, d, V = 16, 256, 384, 50257
    N = B * T
    head = g.nodes[-2]
    assert head.fwd_flops == 2 * N * d * V and head.bwd_flops == 2 * head.fwd_flops
    attn_mm = 2 * N * d * 3 * d + 2 * (2 * B * T * T * d) + 2 * N * d * d
    mlp_mm = 2 * (2 * N * d * 4 * d)
    for n in g.nodes:
        if n.op == "attention":
            assert attn_mm <= n.fwd_flops <= 1.03 * attn_mm
        if n.op == "mlp":
            assert mlp_mm <= n.fwd_flops <= 1.01 * mlp_mm
    # the classic estimate: a training step costs about 6 x tokens x matmul parameters (+ attention scores)
    mm_params = cfg.n_layer * 12 * d * d + V * d
    classic = 6 * N * mm_params + 3 * cfg.n_layer * 4 * B * T * T * d
    total = sum(n.fwd_flops + n.bwd_flops for n in g.nodes)
    assert classic <= total <= 1.03 * classic


def test_matmul_flops_against_torch_flop_counter():
    cfg = preset("49m")
    with torch.device("meta"):
        m = build_model(cfg)
    idx, tgt = (t.to("meta") for t in random_batch(cfg))
    fwd, bwd = FlopCounterMode(display=False), FlopCounterMode(display=False)
    with fwd:
        loss = m(idx, tgt)
    with bwd:  # torch attributes backward FLOPs to modules unreliably, so compare the backward total
        loss.backward()
    counts = fwd.get_flop_counts()
    for n in m.graph.nodes:
        torch_flops = sum(counts.get(f"GPTChain.nodes.{n.index}", {}).values())
        if n.op in ("attention", "mlp", "head"):
            assert torch_flops <= n.fwd_flops <= 1.03 * torch_flops, n.name
        else:
            assert torch_flops == 0, n.name
    torch_bwd = sum(bwd.get_flop_counts()["Global"].values())
    assert torch_bwd <= sum(n.bwd_flops for n in m.graph.nodes) <= 1.03 * torch_bwd


def test_saved_bytes_match_what_autograd_saves():
    cfg = preset("ci")
    m = build_model(cfg)
    idx, tgt = random_batch(cfg)
    weights = {t.untyped_storage().data_ptr() for t in list(m.parameters()) + list(m.buffers())}
    current, per_node = {}, []

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in weights:
            current[st.data_ptr()] = st.nbytes()
        return t

    def after(i):
        per_node.append(sum(current.values()))
        current.clear()

    m.after_node = after
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = m(idx, tgt)
    for n, saved in zip(m.graph.nodes, per_node):
        assert saved == pytest.approx(n.saved_bytes, abs=8), n.name  # nll_loss also keeps a 4-byte scalar
    assert math.isclose(loss.item(), math.log(cfg.vocab_size), rel_tol=0.05)  # a fresh model is near uniform


def test_build_is_deterministic_and_seeded():
    cfg = preset("ci")
    a, b, c = build_model(cfg, seed=1), build_model(cfg, seed=1), build_model(cfg, seed=2)
    for (na, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
        if pa.dim() >= 2:
            assert not torch.equal(pa, pc), na
    x1, _ = random_batch(cfg, seed=3)
    x2, _ = random_batch(cfg, seed=3)
    assert torch.equal(x1, x2) and x1.shape == (cfg.batch_size, cfg.block_size)


def test_peak_memory_estimate_against_torch_mem_tracker():
    """The single-device estimate vs torch's own tracker of a real step (fake tensors: no memory, no compute).
    The estimate counts every gradient at the peak, so it may exceed the tracker by up to 4 bytes/parameter."""
    mt_mod = pytest.importorskip("torch.distributed._tools.mem_tracker")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from lib.graph import peak_memory_estimate

    for name in ("ci", "49m"):
        cfg = preset(name)
        with FakeTensorMode():
            m = build_model(cfg)
            idx, tgt = random_batch(cfg)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
            tracker = mt_mod.MemTracker()
            tracker.track_external(m, opt)
            with tracker:
                for step in range(2):  # the second step has the optimizer state in place
                    m(idx, tgt).backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    if step == 0:
                        tracker.reset_mod_stats()
            peak = tracker.get_tracker_snapshot("peak")
        tracked = sum(per_device["Total"] for per_device in peak.values())
        est = peak_memory_estimate(m.graph, (0,) * m.graph.n_nodes, 1)[0]
        assert tracked <= est <= tracked + 4 * m.graph.params + 0.25 * tracked, (name, tracked, est)
