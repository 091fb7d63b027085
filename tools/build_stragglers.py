"""Generate book/stragglers/01_the_one_slow_gpu.ipynb (stripped): ``python tools/build_stragglers.py``.

The chapter is thin narrative over lib/straggler.py (model and exact values), lib/straggler_sim.py (the two-week
event simulation and the five rows) and lib/straggler_figures.py (slider figures with precomputed frames).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.notebook import code, md, write_notebook  # noqa: E402

PATH = "book/stragglers/01_the_one_slow_gpu.ipynb"

CELLS = [
    md("""
# The one slow GPU

Training a large model splits every step across thousands of GPUs, and a step ends only when the last GPU has
finished and they have all shared their results. So one slow GPU holds up every other one. And with thousands of
GPUs something somewhere fails every few hours, throwing the run back to its last checkpoint. This chapter rebuilds
the page *The one slow GPU* (Training LLMs · 4) as a small, tested model: waiting for the slowest of many, backup
GPUs, and the Young–Daly checkpoint interval. Every number is either an exact expected value of the model, one
seeded simulated run, or quoted from the page, and says which.
"""),
    code("""
n_gpus = 16_384       # GPUs in your cluster (the page's large cluster: Meta's Llama 3 run)
interval_min = 120.0  # your checkpoint interval, minutes (the "your settings" row)
backup_pct = 0.0      # your backup GPUs, % of the cluster (the backup row always uses 2%)
days = 14.0           # length of the simulated run
seed = 0              # seed of the failure times; every row and every frame sees the same failures
live_widgets = True   # live ipywidgets sliders in a running kernel (skipped under CI and in book builds)
""", tags=["parameters"]),
    code("""
import inspect

import numpy as np
from IPython.display import display

from lib.book import glue, in_ci, quoted, simulated
from lib.straggler import (FailureModel, StepModel, backup_count, checkpoint_shares, optimal_interval_min,
                           step_efficiency, young_daly_min)
from lib.straggler_figures import (PAGE_CLAIMS, chapter_figures, claims_table, efficiency_curves, exact_claims,
                                   interval_figure, step_view_draw)
from lib.straggler_sim import FailureGaps, five_ways, sampled_step_efficiency, simulate_run
from lib.viz import show

step, failure = StepModel(), FailureModel(run_days=days)
PROFILE = "'one slow GPU' (lib/straggler.py: the page's step, failure and checkpoint model)"
EXACT = simulated(PROFILE, kind="model") + ", exact expected value"
RUN = simulated(PROFILE, kind="model") + f", one {days:g}-day run, seed {seed}"
PAGE = quoted("the seed page 'The one slow GPU' (its figures come from one seeded run)")
figs = chapter_figures(n_gpus, interval_min, backup_pct / 100, days, seed)  # every slider frame, precomputed
print(step)
print(failure)
# the model's settings, as the prose quotes them
glue("compute_s", f"{step.compute_s:g} s"); glue("jitter_pct", f"{100 * step.jitter:g}%")
glue("p_slow", f"1 in {1 / step.p_slow:,.0f}" if step.p_slow > 0 else "none")
glue("slow_factor", f"{step.slow_factor:g}"); glue("sync_s", f"{step.sync_s:g} s")
glue("ideal_step_s", f"{step.ideal_step_s:g} s")
glue("restart_min", f"{failure.restart_min:g}-minute")
glue("checkpoint_min", f"{failure.checkpoint_min:g} minute" + ("" if failure.checkpoint_min == 1 else "s"))
PAGE_SHARE = inspect.signature(backup_count).parameters["share"].default  # the page's 2% backups
glue("page_share", f"{100 * PAGE_SHARE:g}%")
glue("view_share", f"{backup_pct:g}%" if backup_pct > 0 else f"{100 * PAGE_SHARE:g}%")  # as chapter_figures does
glue("n_shown", inspect.signature(step_view_draw).parameters["n_show"].default)
"""),
    md("""
## The model in one paragraph

Each step every GPU computes for {glue:text}`compute_s` plus its own random delay (exponential,
{glue:text}`jitter_pct` of that on average), and with a chance of {glue:text}`p_slow` it is *slow* on that step and
takes {glue:text}`slow_factor` times as long. Then all GPUs synchronise for {glue:text}`sync_s`, so the ideal step is
{glue:text}`ideal_step_s`. The step ends when the last GPU is done. Simulating 16,384 GPUs one by one would be
wasteful: the slowest of $N$ healthy GPUs has a known distribution, $P(X_N \\le z) = (1 - e^{-z})^N$ for $N$ unit
exponentials, so `lib.straggler.sample_steps` draws it directly, $X_N = -\\ln(1 - U^{1/N})$, and draws the number
of slow GPUs from a Poisson law. Every step costs a few operations at any $N$, and the exact mean step is one integral
(`expected_step_s`).

## One step at a time

The step view draws one step of your cluster and shows {glue:text}`n_shown` of its GPUs; every slow GPU and the
slowest healthy one are always among them (the other healthy GPUs are drawn below the healthy maximum). Move the
slider to change the cluster size, with and without {glue:text}`view_share` backup GPUs.
"""),
    code("""show(figs["step_view"], "straggler-step-view")"""),
    code("""
exact = exact_claims(step, failure)
units = {"_s": " s", "_h": " h", "_min": " min"}
for key, value in exact.items():  # the numbers the prose below quotes, computed here
    glue(f"x_{key}", next((f"{value:.3g}{u}" for e, u in units.items() if key.endswith(e)), f"{value:.2%}"))
    glue(f"p_{key}", PAGE_CLAIMS[key])
glue("backup_8_verdict", "costs more than it saves" if exact["eff_8_backup"] < exact["eff_8"] else "pays for itself")
print(f"{'figure':<50} {'the page':>20} {'exact expected':>15}")
for what, page, ours in claims_table(exact):
    print(f"{what:<50} {page:>20} {ours:>15}")
print(f"page: {PAGE}\\nexact: {EXACT}")
"""),
    code("""
# A regression oracle: exact values at the page's settings (no randomness).
print(f"{step_efficiency(8):.4%} {step_efficiency(16_384):.4%} {step_efficiency(16_384, 328):.4%}")
print(f"{young_daly_min(failure.cluster_mtbf_min(16_384)):.3f} {optimal_interval_min(failure.cluster_mtbf_min(16_384)):.3f}")
""", tags=["keep_output", "nbval-check-output"]),
    md("""
## Scale makes a rare problem constant

A GPU here is slow on {glue:text}`p_slow` steps. On 8 GPUs that almost never matters: steps run at
{glue:text}`x_eff_8` of their ideal speed (the page: {glue:text}`p_eff_8`). On 16,384 GPUs,
{glue:text}`x_wait_16k` of steps wait for at least one slow GPU (the page: {glue:text}`p_wait_16k`), the average
step takes {glue:text}`x_step_16k_s` instead of {glue:text}`ideal_step_s` (the page: {glue:text}`p_step_16k_s`),
and step efficiency falls to {glue:text}`x_eff_16k` (the page: {glue:text}`p_eff_16k`).

**Backup GPUs** (Chen et al., *Revisiting Distributed Synchronous SGD*, 2016) run {glue:text}`page_share` extra and
close the step as soon as enough have reported, so the slow few are never waited for. The extra GPUs are charged as
cost (step efficiency is multiplied by $N/(N+b)$) and they fail too. At 16,384 GPUs backups take step efficiency to
{glue:text}`x_eff_16k_backups` (the page: {glue:text}`p_eff_16k_backups`); on 8 GPUs one extra GPU
{glue:text}`backup_8_verdict`: {glue:text}`x_eff_8_backup` against {glue:text}`x_eff_8` (the page:
{glue:text}`p_eff_8_backup`). The
curves cross between {glue:text}`cross_below` and {glue:text}`cross_above` GPUs. The slider changes the backup share.
"""),
    code("""
curves = efficiency_curves(shares=(PAGE_SHARE,), model=step)
cross = next(i for i, (a, b) in enumerate(zip(curves["plain"], curves["backups"][PAGE_SHARE])) if b > a)
glue("cross_below", f"{curves['sizes'][cross - 1]:,}")
glue("cross_above", f"{curves['sizes'][cross]:,}")
show(figs["efficiency"], "straggler-efficiency")
"""),
    md("""
## The whole run, one row per day

Failures are random, with the cluster's mean time between failures set from Meta's figure (*The Llama 3 Herd of
Models*, 2024): 419 unexpected interruptions in 54 days on 16,384 GPUs, one every {glue:text}`x_mtbf_h` (the page:
{glue:text}`p_mtbf_h`), and proportionally rarer on smaller clusters. A failure loses everything since the last
completed checkpoint plus a {glue:text}`restart_min` restart; a checkpoint takes {glue:text}`checkpoint_min`;
training in progress at the end counts as kept. Green is training that was kept, red hatching is training thrown
away by a failure, grey is restarting, blue ticks are checkpoints being written. The slider changes the
checkpoint interval; every frame sees the same failures at the same moments, and the title counts failures, work
thrown away, time writing checkpoints and time kept.
"""),
    code("""
show(figs["timeline"], "straggler-two-weeks")
print(f"cluster of {n_gpus:,} GPUs: MTBF {failure.cluster_mtbf_min(n_gpus) / 60:.2f} h; {RUN}")
"""),
    md("""
## How often to checkpoint

Checkpoint too often and the cluster spends its time writing; too rarely and each failure throws away hours. The
kept share has a closed form (renewal–reward with exponential failures; a segment is the interval $\\tau$ plus the
checkpoint $\\delta$, $M$ is the cluster MTBF and $R$ the restart):

$$\\text{kept}(\\tau) = \\frac{\\tau}{(M + R)\\,(e^{(\\tau + \\delta)/M} - 1)}, \\qquad
\\tau_{\\text{YD}} = \\sqrt{2\\delta M}, \\qquad \\tau^* = M\\,\\bigl(1 + W_0(-e^{-1-\\delta/M})\\bigr).$$

Young and Daly's rule gives {glue:text}`x_yd_min`; the exact best, from the Lambert $W$ function, is
{glue:text}`x_best_min` (the page: {glue:text}`p_best_min`). The curve is flat near the top: Young–Daly keeps
{glue:text}`x_kept_yd` of the time (the page: {glue:text}`p_kept_yd`). Checkpointing at a sixth of it ("every
3 minutes") spends {glue:text}`x_ckpt_often` writing checkpoints (the page: {glue:text}`p_ckpt_often`); six times it
("every 2 hours") throws away {glue:text}`x_lost_rarely` in expectation. The page's {glue:text}`p_lost_rarely` is one
seeded two-week run: such runs land within {glue:text}`lost_spread` of the expected value
({glue:text}`lost_rarely_runs` here).
The dashed line is Young–Daly, the dot your setting (the slider), the cross one seeded run at that setting.
"""),
    code("""
m_big = failure.cluster_mtbf_min(16_384)
tau_rare = 6 * young_daly_min(m_big)
lost = [simulate_run(tau_rare, m_big, FailureGaps(np.random.default_rng(s)), 14 * 1440).lost_share for s in range(10)]
glue("lost_rarely_runs", f"{min(lost):.0%} to {max(lost):.0%} in {len(lost)} seeds")
spread = max(abs(x - exact["lost_rarely"]) for x in lost)
glue("lost_spread", f"{100 * spread:.0f} point" + ("" if round(100 * spread) == 1 else "s"))
print(f"thrown away every {tau_rare:.1f} min, ten 14-day runs (seeds 0-9): {', '.join(f'{x:.1%}' for x in lost)}")
print(simulated(PROFILE, kind="model") + ", ten 14-day runs")
show(figs["interval"], "straggler-interval")
"""),
    md("""
## Five ways through the same failures

Every row sees the same failures at the same moments (the unit failure gaps are drawn once; the backup row, with
more GPUs, fails proportionally sooner). **Goodput** is the share of GPU time that becomes kept training: time kept
× step efficiency. Each row shows this run and, in brackets, the exact expected value. Change *your settings* in the
parameters cell (or with the live sliders below in a running kernel).
"""),
    code("""
comparison, runs = five_ways(n_gpus, interval_min, backup_pct / 100, days, seed, step, failure)
print(RUN)
display(comparison)
"""),
    code("""
if live_widgets and not in_ci():  # live sliders; the static book relies on the precomputed frames above
    from ipywidgets import FloatLogSlider, FloatSlider, SelectionSlider, interact

    def _live(n_gpus=n_gpus, interval_min=interval_min, backup_pct=backup_pct):
        display(five_ways(n_gpus, interval_min, backup_pct / 100, days, seed, step, failure)[0])
        show(interval_figure(n_gpus, backup_pct / 100, [interval_min], interval_min, days, seed), "straggler-live")

    interact(_live, n_gpus=SelectionSlider(options=sorted({8, 64, 512, 1024, 4096, 16_384, 65_536, n_gpus}),
                                           value=n_gpus),
             interval_min=FloatLogSlider(value=interval_min, base=10, min=0, max=2.7, step=0.02),
             backup_pct=FloatSlider(value=backup_pct, min=0, max=10, step=0.5))
"""),
    md("""
## What to notice

- **Scale makes a rare problem constant**: {glue:text}`x_eff_8` at 8 GPUs against {glue:text}`x_eff_16k` at
  16,384, from a slowdown that hits {glue:text}`p_slow` GPU-steps.
- **Backups pay only at scale**: {glue:text}`x_eff_16k_backups` at 16,384 GPUs, but {glue:text}`x_eff_8_backup`
  against {glue:text}`x_eff_8` on 8 GPUs.
- **The checkpoint interval has a sweet spot**: {glue:text}`x_ckpt_often` writing at a sixth of Young–Daly,
  {glue:text}`x_lost_rarely` thrown away at six times it, {glue:text}`x_kept_yd` kept at Young–Daly
  ({glue:text}`x_yd_min`; exact best {glue:text}`x_best_min`).

## Checks

The simulations agree with the exact values (the tests in `tests/test_straggler*.py` check the same with tighter
budgets and longer runs):
"""),
    code("""
rng = np.random.default_rng(seed)
for n, b in [(8, 0), (16_384, 0), (16_384, backup_count(16_384))]:
    mc, ex = sampled_step_efficiency(n, b, 200_000, rng, step), step_efficiency(n, b, step)
    print(f"{n:>6,} + {b:>3} GPUs: 200,000 drawn steps {mc:.3%}, exact {ex:.3%}")
    assert abs(mc - ex) < 0.002
yd = young_daly_min(m_big)
for tau in (yd / 6, yd, 6 * yd):
    sims = [simulate_run(tau, m_big, FailureGaps(np.random.default_rng(s)), 60 * 1440) for s in range(8)]
    mean, ex = np.mean([r.kept_share for r in sims]), float(checkpoint_shares(tau, m_big)["kept"])
    print(f"every {tau:6.1f} min: kept over 8 x 60-day runs {mean:.2%}, exact {ex:.2%}")
    assert abs(mean - ex) < 0.01
"""),
    md("""
## Sources

- Failure rate: Meta, *The Llama 3 Herd of Models* (2024): 419 unexpected interruptions in 54 days on 16,384 GPUs.
- Backup workers: Chen, Pan, Monga, Bengio and Jozefowicz, *Revisiting Distributed Synchronous SGD* (2016).
- Checkpoint interval: Young, *A first order approximation to the optimum checkpoint interval* (1974); Daly, *A
  higher order estimate of the optimum checkpoint interval for restart dumps* (2006).
- The code is `lib/straggler.py` (model and exact values), `lib/straggler_sim.py` (the runs) and
  `lib/straggler_figures.py`; `python -m lib.straggler --gpus 16384 --interval 120 --backups 2` prints the five rows
  in a terminal, `--json` for machines.
"""),
]


if __name__ == "__main__":
    write_notebook(PATH, CELLS, timeout_s=300)
    print(f"wrote {PATH} ({len(CELLS) + 1} cells)")
