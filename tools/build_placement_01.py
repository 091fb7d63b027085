"""Generate book/placement/01_the_game.ipynb (stripped): ``python tools/build_placement_01.py [--oracles]``.

The chapter is thin narrative over lib/gpt.py and lib/graph.py (the chain), lib/hardware.py (the machine),
lib/placement/sim_env.py (the simulator), lib/placement/torch_env.py (real GPUs) and lib/placement/baselines.py.
``--oracles`` also executes the chapter and stores the outputs of its ``keep_output`` cells
(tools/refresh_oracles.py), which nbval then checks.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.notebook import code, md, write_notebook  # noqa: E402

PATH = "book/placement/01_the_game.ipynb"

CELLS = [
    md("""
# The placement game

When a model is too big or too slow for one GPU, you spread its layers over several, and then you must decide
which layer lives where. In 2017 Mirhoseini and colleagues let a network learn that decision from one signal: how
long a training step took. The seed write-up for this part rebuilds their experiment small: a 49M-parameter GPT,
four NVIDIA T4s, and a placer trained with REINFORCE. This chapter sets up the game the placer plays: the model as a
chain of placeable nodes, the machine, the environment that times one training step, and the four things that make
the game hard (a huge space, a memory wall, a logits wall, and noisy timings).

Every number below says where it came from: **measured** on which GPUs, **simulated** with which hardware profile,
or **quoted** from the seed. With `mode="auto"` the chapter measures on real GPUs when this kernel has at least two,
and otherwise simulates the seed's machine, four T4s on PCIe.
"""),
    code("""
mode = "auto"          # "auto": real GPUs if this kernel has at least two, else the simulator; "sim" or "real"
preset = "49m"         # the GPT: "ci" (tiny), "49m" (the seed's model) or "163m"
profile = "4xT4-pcie"  # the simulator's hardware profile (lib.hardware.names())
n_random = 2000        # random placements timed in the space section (16 when measuring on real GPUs)
n_timings = 2000       # noisy simulated timings per placement in the noise section
noise_seed = 0         # seed of the simulated machines' timing noise
""", tags=["parameters"]),
    code("""
import numpy as np
import plotly.graph_objects as go

from lib import hardware
from lib.book import glue, quoted, resolve_mode, simulated
from lib.gpt import gpt_graph, preset as gpt_preset
from lib.graph import colocate, expand
from lib.placement import baselines
from lib.placement.figures import placement_strip
from lib.placement.sim_env import NoiseModel, SimPlacementEnv
from lib.viz import PALETTE, SEQUENCE, layout, show


def cuda_devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


used = resolve_mode(mode, cuda_devices(), needed=2)
cfg = gpt_preset(preset)
graph = gpt_graph(cfg)
hw = hardware.load(profile)
sim = SimPlacementEnv(graph, hw)  # the simulator is always at hand, for timelines and what-ifs
if used == "real":
    from lib.placement.torch_env import TorchPlacementEnv
    env = TorchPlacementEnv(cfg, [f"cuda:{i}" for i in range(cuda_devices())])
else:
    env = sim
SIM, SEED = simulated(profile), quoted("the seed write-up 'Teaching a network to place a GPT on four GPUs'")
N, D = graph.n_nodes, env.n_devices
ms = lambda m: "out of memory" if m.oom else f"{m.step_s * 1e3:.1f} ms"
print(f"mode={mode!r} -> {used}: every timing below is {env.describe()}")
"""),
    md("""
## The model: a chain of placeable nodes

PyTorch has no fixed graph to place, so the seed writes the GPT as an explicit chain of nodes: the embedding, six
blocks of six nodes (layer norm, attention, residual add, layer norm, MLP, residual add), then the final norm, the
output head and the loss. `lib.gpt.gpt_graph` builds the same chain as data: for every node its output shape,
parameters, FLOPs, bytes moved and activations kept for backward. A placement is one device index per node.
"""),
    code("""
params = np.array([n.params for n in graph.nodes])
big_two = params[0] + params[-2]  # the embedding and the output head
glue("n_nodes", N)
glue("n_groups", len(colocate(graph)))
glue("params_m", f"{graph.params / 1e6:.1f}M")
glue("big_two_m", f"{big_two / 1e6:.1f}M")
glue("big_two_share", f"{big_two / graph.params:.0%}")
print(f"{N} nodes, {graph.params / 1e6:.1f}M parameters, {big_two / 1e6:.1f}M of them in the embedding and the head "
      f"(computed from lib.gpt, preset {cfg.name!r})")
print(f"{SEED}: 40 nodes, 49M parameters, 39M of them in two nodes")
"""),
    code("""
fig = go.Figure()
for k, op in enumerate(dict.fromkeys(n.op for n in graph.nodes)):
    nodes = [n for n in graph.nodes if n.op == op]
    fig.add_bar(x=[n.index for n in nodes], y=[n.params / 1e6 for n in nodes], name=op,
                marker_color=SEQUENCE[k], hovertext=[n.name for n in nodes])
fig.update_xaxes(title="node, in chain order")
fig.update_yaxes(title="parameters (millions)")
show(layout(fig, f"Where the parameters live: two of the {N} nodes hold {big_two / graph.params:.0%}"),
     "placement-01-params")
"""),
    md("""
The embedding and the head are big because the vocabulary has 50,257 tokens: {glue:text}`big_two_m` of the
{glue:text}`params_m` parameters ({glue:text}`big_two_share`) sit in those two nodes, and the whole transformer body is
the rest. Remember this when the placer starts winning: where these two matrices (and their AdamW state) live is
most of the game.

## The size of the space

With 4 GPUs and {glue:text}`n_nodes` nodes there are $4^{40}$ placements. The paper, and the seed after its first
failure, shrink the space with a co-location rule: an operation whose output has exactly one consumer joins its
consumer's group. On this GPT the rule leaves {glue:text}`n_groups` groups (chapter 3 is about them).
"""),
    code("""
groups = colocate(graph)
n_dev_seed = 4
sizes = {"nodes": N, "co-location groups": len(groups)}
for what, k in sizes.items():
    print(f"placing {k:>2} {what:<18}: 4^{k} = {n_dev_seed ** k:.3e} placements")
print(f"the groups cut the space by a factor of 4^{N - len(groups)} = {n_dev_seed ** (N - len(groups)):.3e}")
if cfg.name == "49m":
    assert (N, len(groups)) == (40, 13)  # the seed's 4^40 and 4^13
""", tags=["keep_output", "nbval-check-output"]),
    code("""
group_of = np.zeros(N, dtype=int)
for g, members in enumerate(groups):
    group_of[list(members)] = g
fig = go.Figure(go.Heatmap(z=[group_of % 2], x=[n.name for n in graph.nodes], y=["group"], showscale=False,
                           colorscale=[[0, PALETTE["light"]], [1, PALETTE["primary"]]], xgap=2,
                           text=[[str(g) for g in group_of]], texttemplate="%{text}", hoverinfo="x+text"))
fig.update_xaxes(tickangle=-60, tickfont=dict(size=9))
show(layout(fig, f"The {len(groups)} co-location groups along the chain (cell text: group number)", height=260),
     "placement-01-groups")
"""),
    md("""
## The environment and the hand-made placements

The environment runs one real training step under a placement (forward, backward and an AdamW update on a batch of
16 × 256 tokens), copying activations whenever an edge crosses devices. Its answer is the median of 5 timed steps
after 2 warm-up steps; a placement that runs out of memory is charged 10 s. `lib.placement.torch_env` does that on
real GPUs; `lib.placement.sim_env` predicts it from the same graph and a hardware profile (datasheet figures, each
with its source in `data/hardware/`). The simulator is an event simulation: one stream per GPU in program order,
copies that block both GPUs' streams as PyTorch's cross-device copy does, a shared PCIe channel, a roofline per
node, AdamW per device, and a memory model.

Here are the hand-made placements the placer will have to beat.
"""),
    code("""
hand = baselines.all_baselines(graph, D)
results = {label: env.measure(p) for label, p in hand.items()}
for label, m in results.items():
    print(f"{label:<28} {ms(m):>14}   peak {max(m.peak_mem_bytes) / 2**30:5.2f} GiB on its busiest device")
print(f"({env.describe()})")
print(f"{SEED}: best single GPU about 230 ms; the human two-GPU split 224-235 ms, re-timed on four machines")
"""),
    code("""
show(placement_strip({k: tuple(p) for k, p in hand.items()}, names=[n.name for n in graph.nodes], n_devices=D,
                     title="The hand-made placements: one row each, one cell per node, colour = device"),
     "placement-01-baselines")
"""),
    md("""
Nothing here is much faster than one GPU. A GPT is a strict chain, so in a plain step one device works while the
others wait; splitting the layers only adds copies. What a split can buy is memory, and (as the placer will find)
a little parallel work at the edges of the step.

## Per-device memory: the wall in experiment C

Each device must hold the weights, gradients and two AdamW moments of its nodes (16 bytes per parameter), the
activations its nodes keep for backward, the tensors it receives, and the short-lived peak of its biggest node.
For the head and the loss that peak is the logits: $16 \\times 256 \\times 50{,}257$ floats, plus their softmax
and gradient. The seed's experiment C caps every GPU at 24% of its memory.
"""),
    code("""
cap = 0.24
capped = SimPlacementEnv(graph, hw, mem_cap=cap)
shown = {k: hand[k] for k in ("single GPU 0", "human 2-GPU split on 0,1", "4-way layer split") if k in hand}
fig = go.Figure()
for k, (part, colour) in enumerate(zip(sim.memory_breakdown(next(iter(shown.values()))), SEQUENCE)):
    x = [f"{label}<br>GPU {d}" for label, p in shown.items() for d in sorted(set(p))]
    y = [sim.memory_breakdown(p)[part][d] / 2**30 for label, p in shown.items() for d in sorted(set(p))]
    fig.add_bar(x=x, y=y, name=part, marker_color=colour)
usable = hw.devices[0].usable_mem_bytes / 2**30
fig.add_hline(y=cap * usable, line_dash="dash", line_color=PALETTE["bad"],
              annotation_text=f"cap {cap:g} x {usable:.2f} GiB")
fig.update_layout(barmode="stack")
fig.update_yaxes(title="GiB at the step's peak (simulated)")
show(layout(fig, f"Per-device peak memory, {SIM}", height=460), "placement-01-memory")
"""),
    code("""
fit_at_cap = {}
for label, p in hand.items():  # every hand-made placement, not only the three in the figure
    if max(p) >= capped.n_devices:  # a box with more GPUs than the simulated profile: not simulated
        continue
    m = capped.measure(p)
    fit_at_cap[label] = not m.oom
    print(f"at cap {cap:g}: {label:<26} {'OUT OF MEMORY' if m.oom else 'fits, ' + ms(m):>16}  ({SIM})")
    if used == "real":  # the uncapped peaks the real GPUs reported for the same placement
        print(f"    peak without a cap: {max(results[label].peak_mem_bytes) / 2**30:.2f} GiB ({env.describe()})")
print(f"{SEED}: at cap 0.24 a single GPU and every two-GPU split run out of memory; "
      "the four-way layer split fits, at 256 ms")
two_gpu_fits = [k for k, p in hand.items() if len(set(p)) == 2 and fit_at_cap.get(k)]
glue("cap_fits", ", ".join(k for k, ok in fit_at_cap.items() if ok) or "none of them")
glue("cap_two_gpu", (f"Unlike the seed's statement, a two-GPU placement does fit here: {', '.join(two_gpu_fits)} "
                     "(balanced by the stages' load, it keeps the embedding and the head on different GPUs); the "
                     "seed's two-GPU splits were the human ones, which do not")
     if two_gpu_fits else "As in the seed, no two-GPU placement fits")
"""),
    code("""
from lib.placement.sim_env import ALLOC_OVERHEAD

two_way = baselines.human_split(graph, 0, 1)
four_way = baselines.layer_split(graph, (0, 1, 2, 3)) if baselines.n_layers(graph) >= 4 else None
fits = lambda f, p: not SimPlacementEnv(graph, hw, mem_cap=cap, alloc_overhead=f).measure(p).oom
agree = [f for f in np.arange(1.0, 1.6, 0.01) if four_way and not fits(f, two_way) and fits(f, four_way)]
glue("alloc_overhead", f"{ALLOC_OVERHEAD:g}")
glue("overhead_range", f"{min(agree):.2f} to {max(agree):.2f}" if agree else "no value")
print(f"allocator overheads for which the C verdicts match the seed: "
      f"{f'{min(agree):.2f} to {max(agree):.2f}' if agree else 'none'}; the simulator uses {ALLOC_OVERHEAD:g}")
"""),
    md("""
The simulator's memory model is the accounting above times one calibration constant, `ALLOC_OVERHEAD` =
{glue:text}`alloc_overhead`, for the caching allocator's rounding and fragmentation. It was chosen so that the seed's
facts of experiment C hold (the human split runs out of memory and the four-way split fits): any value from
{glue:text}`overhead_range` does. At the cap, these hand-made placements fit: {glue:text}`cap_fits`.
{glue:text}`cap_two_gpu`.

## The logits wall

Why did the seed's first placer collapse onto one GPU? Moving only the head, or only the loss, sends the logits
tensor across PCIe, forward and (as a gradient) backward. Moving both together is nearly free.
"""),
    code("""
logits_bytes = cfg.batch_size * cfg.block_size * cfg.vocab_size * 4
glue("logits_mb", f"{logits_bytes / 1e6:.0f} MB")
walls = {"everything on GPU 0": [0] * N, "only the loss on GPU 1": [0] * (N - 1) + [1],
         "only the head on GPU 1": [0] * (N - 2) + [1, 0], "head and loss on GPU 1": [0] * (N - 2) + [1, 1]}
wall_ms = {k: env.measure(p) for k, p in walls.items()}
for k, m in wall_ms.items():
    print(f"{k:<26} {ms(m):>10}  ({env.describe()})")
print(f"the logits: {logits_bytes / 1e6:.0f} MB; one copy over the simulated PCIe link takes "
      f"{hw.link(0, 1).copy_s(logits_bytes) * 1e3:.0f} ms ({SIM}); {SEED}: 823 MB, 'much slower'")
"""),
    code("""
events = sim.trace(walls["only the loss on GPU 1"])
colour = {"forward": PALETTE["primary"], "backward": PALETTE["secondary"], "copy": PALETTE["bad"],
          "optimizer": PALETTE["good"]}
fig = go.Figure()
for kind in colour:
    ev = [e for e in events if e.kind == kind]
    fig.add_bar(y=[e.lane for e in ev], x=[(e.end_s - e.start_s) * 1e3 for e in ev], base=[e.start_s * 1e3 for e in ev],
                orientation="h", name=kind, marker_color=colour[kind], hovertext=[e.label for e in ev])
fig.update_layout(barmode="overlay")
fig.update_xaxes(title="milliseconds into the step")
fig.update_yaxes(categoryorder="array", categoryarray=sorted({e.lane for e in events}, reverse=True))
show(layout(fig, f"One step with only the loss moved: the logits cross the bus twice ({SIM})", height=320),
     "placement-01-logits-timeline")
"""),
    md("""
The {glue:text}`logits_mb` logits cross the bus once forward and once backward, and while they do, both GPUs wait.
Any placer that changes one decision at a time sees only the wall, never the cheap placement behind it.

## Random placements: why the space is hard and groups help

A random placement of 40 nodes almost always splits head and loss, and cuts many other edges. A random placement of
the 13 groups never splits head and loss. The seed reports the first random batch of each: 530 ms and 247 ms.
"""),
    code("""
rng = np.random.default_rng(noise_seed)
n = n_random if used == "sim" else 16
rand_nodes = [env.measure(rng.integers(0, D, N)).step_s * 1e3 for _ in range(n)]
rand_groups = [env.measure(expand(rng.integers(0, D, len(groups)), groups, N)).step_s * 1e3 for _ in range(n)]
fig = go.Figure()
bins = dict(size=max(1.0, (max(rand_nodes) - min(rand_groups)) / 80))
fig.add_histogram(x=rand_nodes, name=f"random over {N} nodes", marker_color=PALETTE["secondary"], opacity=0.7, xbins=bins)
fig.add_histogram(x=rand_groups, name=f"random over {len(groups)} groups", marker_color=PALETTE["primary"],
                  opacity=0.7, xbins=bins)
for v, txt in ((530, "seed: 530"), (247, "seed: 247")):
    fig.add_vline(x=v, line_dash="dot", line_color=PALETTE["neutral"], annotation_text=txt)
fig.update_layout(barmode="overlay")
fig.update_xaxes(title="step time (ms)")
show(layout(fig, f"{n} random placements each ({env.describe()})"), "placement-01-random")
print(f"mean over {N} nodes: {np.mean(rand_nodes):.0f} ms; over {len(groups)} groups: {np.mean(rand_groups):.0f} ms"
      f" ({env.describe()}); {SEED}: 530 ms and 247 ms (the first batch of 8)")
"""),
    md("""
## Timing noise: why best-of-many flatters

On real machines no two timings agree. The seed: single-GPU timings vary by under 1 ms, a multi-GPU timing can be
off by 5 to 15 ms, the fastest of 2,000 training timings was 8 to 15 ms better than the same placement re-timed,
and the four GPUs of a machine are not identical. The simulator's optional noise model reproduces that picture (its
sizes are set from those quoted figures, not measured): each simulated machine draws a speed factor per GPU, and
each measurement draws a jitter that is larger for multi-device placements.
"""),
    code("""
noisy = SimPlacementEnv(graph, hw, noise=NoiseModel(), seed=noise_seed)
pair = {"single GPU 0": hand["single GPU 0"], "human 2-GPU split on 0,1": hand["human 2-GPU split on 0,1"]}
fig = go.Figure()
for k, (label, p) in enumerate(pair.items()):
    truth = SimPlacementEnv(graph, hw, noise=NoiseModel(0.0, 0.0, 0.0, 0.0), seed=noise_seed).measure(p).step_s * 1e3
    t = np.array([noisy.measure(p).step_s * 1e3 for _ in range(n_timings)])
    best = np.minimum.accumulate(t)
    fig.add_scatter(x=np.arange(1, n_timings + 1), y=best - truth, name=label, line_color=SEQUENCE[k])
    print(f"{label:<26} spread (sd) {t.std():5.2f} ms; best of {n_timings} is {truth - t.min():5.1f} ms faster "
          f"than the noiseless time ({simulated(profile)} + noise model, seed {noise_seed})")
fig.update_xaxes(type="log", title="timings taken of the same placement")
fig.update_yaxes(title="fastest timing so far minus the true time (ms)")
show(layout(fig, "The more often you time a placement, the luckier its best timing"), "placement-01-noise")
print(f"{SEED}: single-GPU timings vary by under 1 ms; multi-GPU by 5-15 ms; best-of-many flattered by 8-15 ms")
"""),
    code("""
for s in range(4):
    f = SimPlacementEnv(graph, hw, noise=NoiseModel(), seed=noise_seed + s).device_time_factors
    print(f"simulated machine {s}: GPU time factors {np.round(f, 3)} -> fastest GPU {int(np.argmin(f))}, "
          f"slowest GPU {int(np.argmax(f))}")
"""),
    md("""
This is why the placer's best training timing is never reported as a result. Chapter 3 uses the seed's
head-to-head protocol instead: pick each side's candidate in separate rounds, then re-time only the picks.

## The simulator beside the seed

The simulator is calibrated on **one** number: the T4's achievable fraction of its fp32 peak was fitted so that the
single-GPU step of the 49m GPT takes the seed's 230 ms. Every other row below is a prediction, shown beside the
figure the seed quotes, so you can see where to trust it.
"""),
    code("""
t4, g49 = hardware.load("4xT4-pcie"), gpt_graph(gpt_preset("49m"))
sim49 = lambda **kw: SimPlacementEnv(g49, t4, **kw)
hand49, single, rng, grp = baselines.all_baselines(g49, 4), [0] * g49.n_nodes, np.random.default_rng(1), colocate(g49)
split, four, three = hand49["human 2-GPU split on 0,1"], hand49["4-way layer split"], [0] + [1] * 37 + [2, 2]
mean_ms = lambda ps: f"{np.mean([sim49().measure(p).step_s for p in ps]) * 1e3:.0f} ms"
rows = [
    ("single GPU, plain step (A)", "~230 ms", ms(sim49().measure(single))),
    ("random 40-node placements, mean", "530 ms", mean_ms(rng.integers(0, 4, (1000, 40)))),
    ("random 13-group placements, mean", "247 ms", mean_ms(expand(g, grp, 40) for g in rng.integers(0, 4, (1000, 13)))),
    ("human two-GPU split (A)", "224-235 ms", ms(sim49().measure(split))),
    ("embedding | body | head on 3 GPUs (A's idea)", "~7% under single",
     f"{1 - sim49().measure(three).step_s / sim49().measure(single).step_s:.1%} under single"),
    ("human two-GPU split, 4 micro-batches (B)", "195 ms", ms(sim49(n_micro=4).measure(split))),
    ("four-way layer split, 4 micro-batches (B)", "206 ms", ms(sim49(n_micro=4).measure(four))),
    ("single GPU at cap 0.24 (C)", "out of memory", ms(sim49(mem_cap=0.24).measure(single))),
    ("human two-GPU split at cap 0.24 (C)", "out of memory", ms(sim49(mem_cap=0.24).measure(split))),
    ("four-way layer split at cap 0.24 (C)", "256 ms", ms(sim49(mem_cap=0.24).measure(four))),
]
print(f"{'':<46} {'quoted from the seed':>22} {'simulated with 4xT4-pcie':>26}")
for what, q, v in rows:
    print(f"{what:<46} {q:>22} {v:>26}")
single_ms = sim49().measure(single).step_s * 1e3
glue("sim_single_ms", f"{single_ms:.0f} ms")
t_ms = lambda p, **kw: sim49(**kw).measure(p).step_s * 1e3
rand40 = np.mean([t_ms(p) for p in np.random.default_rng(1).integers(0, 4, (1000, 40))])
rand13 = np.mean([t_ms(expand(g, grp, 40)) for g in np.random.default_rng(2).integers(0, 4, (1000, 13))])
close = max(abs(rand40 / 530 - 1), abs(rand13 / 247 - 1), abs(t_ms(split) / 229.5 - 1))
glue("card_close", f"within {close:.0%} of the seed's figures" if close <= 0.15 else
     f"up to {close:.0%} away from the seed's figures")
glue("card_gain", f"{1 - t_ms(three) / single_ms:.1%}")
c_agree = (t_ms(single, mem_cap=0.24) >= 1e4) and (t_ms(split, mem_cap=0.24) >= 1e4) and t_ms(four, mem_cap=0.24) < 1e4
glue("card_memory", "agree (the allocator constant was set for them)" if c_agree else
     "do not all agree, even with the allocator constant set for them")
deeper = t_ms(four, n_micro=4) < t_ms(split, n_micro=4)
glue("card_pipeline", "it predicts that the deeper four-way pipeline beats the two-way one, where the seed's four-way "
     "split was slower than its two-way one: real pipelines over PCIe lose more to copies and synchronisation "
     "than this model charges" if deeper else "it agrees with the seed that the four-way split is slower than the "
     "two-way one")
glue("calib", f"{t4.calibration['device.flops_efficiency']['value']:.3f}")
assert abs(single_ms - 230) <= 0.2 * 230  # the issue's bound: within 20% of the seed's ~230 ms
"""),
    md("""
Read the table as a report card. The calibrated row matches by construction ({glue:text}`sim_single_ms` with an
efficiency of {glue:text}`calib`). The random-placement means and the plain two-GPU split come out
{glue:text}`card_close` without any fitting, and the memory verdicts of the seed's experiment C rows
{glue:text}`card_memory`. The simulator finds a gain of {glue:text}`card_gain` for keeping the embedding and head
away from the body, where the seed measured about 7%: it models that gain as AdamW running in parallel on three GPUs,
so if it is smaller, its AdamW is probably too cheap or its copies too dear. With four micro-batches
{glue:text}`card_pipeline`. Chapters 2 and 3 train the placer on this simulator; where the seed and the simulator
disagree, the placer's answer may too.
"""),
]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    write_notebook(PATH, CELLS, timeout_s=300)
    print(f"wrote {PATH}")
    if "--oracles" in argv:
        from tools.refresh_oracles import refresh

        print(f"kept the outputs of {refresh(PATH)} oracle cell(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
