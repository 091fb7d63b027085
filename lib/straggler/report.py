"""What the one-slow-GPU chapter prints and quotes: its settings and verdicts as glue text, the page's claims
next to the model's exact values as an HTML table, the seeded-run spread, the simulation-against-exact checks,
and the live sliders. Pure functions of the model (numpy only, no plotting), so the chapter's cells stay short
and every sentence-building step is tested. Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np

from lib.html_table import HTMLTable
from lib.straggler.model import (FailureModel, StepModel, backup_count, checkpoint_shares, step_efficiency,
                                 young_daly_min)
from lib.straggler.figures import PAGE_CLAIMS, claims_table, step_view_draw
from lib.straggler.simulate import FailureGaps, sampled_step_efficiency, simulate_run

#: The model's name in every "simulated with ..." label of the chapter.
PROFILE = "'one slow GPU' (lib/straggler/model.py)"
#: The backup share the page uses (lib.straggler.model.backup_count's default): 2%.
PAGE_SHARE: float = inspect.signature(backup_count).parameters["share"].default
_UNITS = {"_s": " s", "_h": " h", "_min": " min"}


def plural(n: float, word: str, plural_word: str | None = None) -> str:
    """``"1 minute"``, ``"5 minutes"``, ``"0.5 minutes"``: the count with a noun that agrees with it."""
    one = isinstance(n, (int, float, np.integer, np.floating)) and float(n) == 1.0
    return f"{n:g} {word if one else (plural_word or word + 's')}"


def settings_text(step: StepModel, failure: FailureModel) -> str:
    """Two short lines that state the model's settings (each under 88 characters)."""
    return (f"step: compute {step.compute_s:g} s, delay {100 * step.jitter:g}% (exponential), slow "
            f"1 in {1 / step.p_slow:,.0f} GPU-steps x{step.slow_factor:g}, sync {step.sync_s:g} s\n"
            f"failures: one GPU every {failure.per_gpu_mtbf_h:,.0f} h; checkpoint "
            f"{plural(failure.checkpoint_min, 'minute')}, restart {plural(failure.restart_min, 'minute')}")


def settings_glue(step: StepModel, failure: FailureModel, backup_pct: float) -> dict:
    """The model's settings as the prose quotes them: glue name -> text."""
    view_share = backup_pct if backup_pct > 0 else 100 * PAGE_SHARE  # what chapter_figures shows
    return {
        "compute_s": f"{step.compute_s:g} s", "jitter_pct": f"{100 * step.jitter:g}%",
        "p_slow": f"1 in {1 / step.p_slow:,.0f}" if step.p_slow > 0 else "none",
        "slow_factor": f"{step.slow_factor:g}", "sync_s": f"{step.sync_s:g} s",
        "ideal_step_s": f"{step.ideal_step_s:g} s",
        "restart_min": f"{failure.restart_min:g}-minute",
        "checkpoint_min": plural(failure.checkpoint_min, "minute"),
        "page_share": f"{100 * PAGE_SHARE:g}%", "view_share": f"{view_share:g}%",
        "n_shown": f"{inspect.signature(step_view_draw).parameters['n_show'].default}",
    }


def _fmt(key: str, value: float, digits: int = 3) -> str:
    return next((f"{value:.{digits}g}{u}" for end, u in _UNITS.items() if key.endswith(end)), f"{value:.2%}")


def claims_glue(exact: dict) -> dict:
    """``x_<key>`` (our exact value), ``p_<key>`` (the page's) for every claim, and the 8-GPU backup verdict."""
    out = {}
    for key, value in exact.items():
        out[f"x_{key}"] = _fmt(key, value)
        out[f"p_{key}"] = PAGE_CLAIMS[key]
    out["backup_8_verdict"] = ("costs more than it saves" if exact["eff_8_backup"] < exact["eff_8"]
                               else "pays for itself")
    return out


def claims_html(exact: dict, page_label: str, exact_label: str) -> HTMLTable:
    """The page's printed figures next to the model's exact expected values, as an HTML table."""
    rows = tuple(claims_table(exact))
    return HTMLTable(("figure", "the page (quoted)", "exact expected (simulated)"), rows,
                     f"the page: {page_label}; exact: {exact_label}", nowrap=(1, 2))


def crossing_sizes(curves: dict, share: float) -> tuple[int, int] | None:
    """The cluster sizes (below, above) between which backups at ``share`` start to pay: the first size where
    the charged efficiency with backups beats the plain one. None if they never cross in ``curves``."""
    sizes, plain, backed = curves["sizes"], curves["plain"], curves["backups"][share]
    for i, (a, b) in enumerate(zip(plain, backed)):
        if b > a:
            return (sizes[i - 1], sizes[i]) if i > 0 else None
    return None


def crossing_text(curves: dict, share: float) -> str:
    """Where the plain and the backup curves cross, as the prose says it ("between 64 and 128 GPUs")."""
    cross = crossing_sizes(curves, share)
    if cross is None:
        return f"nowhere between {curves['sizes'][0]:,} and {curves['sizes'][-1]:,} GPUs"
    return f"between {cross[0]:,} and {cross[1]:,} GPUs"


def lost_runs(tau_min: float, mtbf_min: float, seeds, days: float = 14.0,
              failure: FailureModel = FailureModel()) -> list[float]:
    """Share thrown away (with restarts) in one seeded run of ``days`` days per seed."""
    return [simulate_run(tau_min, mtbf_min, FailureGaps(np.random.default_rng(s)), days * 1440,
                         failure.checkpoint_min, failure.restart_min).lost_share for s in seeds]


def spread_glue(lost: list[float], expected: float) -> dict:
    """How far seeded runs land from the expected lost share, as the prose says it."""
    points = round(100 * max(abs(x - expected) for x in lost))
    return {"lost_rarely_runs": f"{min(lost):.0%} to {max(lost):.0%} in {len(lost)} seeds",
            "lost_spread": plural(points, "point")}


def run_gaps(comparison) -> dict:
    """Per row of the five ways, how far this run lands from the exact expected value: the largest gap (a share)
    over its kept, checkpoint and lost shares, the three the five-ways figure's lower panel draws."""
    return {r.name: max(abs(r.kept_share - r.expected_kept), abs(r.checkpoint_share - r.expected_checkpoint),
                        abs(r.lost_share - r.expected_lost)) for r in comparison.rows}


def daly_higher_order_min(mtbf_min: float, checkpoint_min: float = 1.0) -> float:
    """Daly's (2006) higher-order estimate of the best checkpoint interval (min):
    sqrt(2 d M) [1 + sqrt(d / 2M) / 3 + (d / 2M) / 9] - d for d < 2M, else M."""
    if not (mtbf_min > 0 and checkpoint_min >= 0 and math.isfinite(mtbf_min)):
        raise ValueError(f"need mtbf_min > 0 (finite) and checkpoint_min >= 0; got {mtbf_min!r}, "
                         f"{checkpoint_min!r}")
    d, m = checkpoint_min, mtbf_min
    if d >= 2 * m:
        return m
    r = d / (2 * m)
    return math.sqrt(2 * d * m) * (1 + math.sqrt(r) / 3 + r / 9) - d


@dataclass(frozen=True)
class Check:
    """One simulation-against-exact comparison: what, simulated, exact, allowed gap."""

    what: str
    simulated: float
    exact: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return abs(self.simulated - self.exact) < self.tolerance


def agreement_checks(seed: int = 0, n_steps: int = 200_000, n_runs: int = 8, run_days: float = 60.0,
                     step: StepModel = StepModel(), failure: FailureModel = FailureModel()) -> list[Check]:
    """Drawn steps against the exact step efficiency (8, 16,384 and 16,384 + 2% GPUs), and the kept share of
    ``n_runs`` seeded runs against the exact one at YD/6, YD and 6 YD, at the page's 16,384 GPUs."""
    rng, out = np.random.default_rng(seed), []
    for n, b in [(8, 0), (16_384, 0), (16_384, backup_count(16_384))]:
        gpus = f"{n:,}" + (f" + {b:,}" if b else "")
        out.append(Check(f"step efficiency, {gpus} GPUs ({n_steps:,} drawn steps)",
                         sampled_step_efficiency(n, b, n_steps, rng, step), step_efficiency(n, b, step),
                         0.002))
    m = failure.cluster_mtbf_min(16_384)
    yd = young_daly_min(m, failure.checkpoint_min)
    for tau in (yd / 6, yd, 6 * yd):
        runs = [simulate_run(tau, m, FailureGaps(np.random.default_rng(s)), run_days * 1440,
                             failure.checkpoint_min, failure.restart_min) for s in range(n_runs)]
        exact = float(checkpoint_shares(tau, m, failure.checkpoint_min, failure.restart_min)["kept"])
        out.append(Check(f"kept, every {tau:.1f} min ({n_runs} x {run_days:g}-day runs)",
                         float(np.mean([r.kept_share for r in runs])), exact, 0.01))
    return out


def checks_html(checks: list[Check], label: str) -> HTMLTable:
    """The checks as an HTML table: simulated, exact, the gap and the allowed gap."""
    rows = tuple((c.what, f"{c.simulated:.3%}", f"{c.exact:.3%}", f"{abs(c.simulated - c.exact):.3%}",
                  f"< {c.tolerance:.1%}") for c in checks)
    return HTMLTable(("what", "simulated", "exact", "gap (points)", "allowed"), rows, label,
                     nowrap=(1, 2, 3, 4))


def live_view(n_gpus: int, interval_min: float, backup_pct: float, days: float, seed: int,
              step: StepModel = StepModel(), failure: FailureModel = FailureModel()):
    """What the live sliders redraw: the five-ways comparison and the interval curve at one setting."""
    from lib.straggler.figures import interval_figure
    from lib.straggler.simulate import five_ways

    comparison = five_ways(n_gpus, interval_min, backup_pct / 100, days, seed, step, failure)[0]
    fig = interval_figure(n_gpus, backup_pct / 100, [interval_min], interval_min, days, seed, failure)
    return comparison, fig


def five_ways_html(comparison) -> HTMLTable:
    """The five rows (``lib.straggler.simulate.Comparison``) as a table that fits the text column: this run's shares,
    the exact expected value in brackets; GPUs and MTBF, which differ only for the backup row, in the caption."""
    rows = []
    for r in comparison.rows:
        rows.append((r.name, f"{r.interval_min:.1f} min", f"{r.failures} ({r.expected_failures:.1f})",
                     f"{r.checkpoint_share:.1%}", f"{r.lost_share:.1%}",
                     f"{r.kept_share:.1%} ({r.expected_kept:.1%})", f"{r.step_efficiency:.1%}",
                     f"{r.goodput:.1%} ({r.expected_goodput:.1%})"))
    clusters = sorted({(r.n_backup, r.mtbf_h) for r in comparison.rows})
    where = "; ".join(f"{comparison.n_gpus:,} GPUs" + (f" + {b:,} backups" if b else "") + f": MTBF {m:.2f} h"
                      for b, m in clusters)
    caption = (f"{comparison.days:g} days, seed {comparison.seed}, every row sees the same failures; {where}; "
               "(…) = exact expected value")
    head = ("way", "interval", "failures", "checkpoint", "lost", "kept", "step eff.", "goodput")
    return HTMLTable(head, tuple(rows), caption, nowrap=(1, 2, 3, 4, 6))  # kept, goodput wrap at "("


def estimates_glue(step: StepModel = StepModel(), failure: FailureModel = FailureModel(),
                   n_gpus: int = 16_384) -> dict:
    """The three estimates on paper (``lib.straggler.estimates``) at ``n_gpus``, as the prose quotes them."""
    from lib.straggler import estimates as est

    b = backup_count(n_gpus, PAGE_SHARE)
    m = failure.cluster_mtbf_min(n_gpus)
    tau = young_daly_min(m, failure.checkpoint_min)
    return {
        "q_np": f"{est.slow_per_step(n_gpus, step):.2f}",
        "q_none": f"{math.exp(-est.slow_per_step(n_gpus, step)):.2f}",
        "q_wait": f"{est.wait_share(n_gpus, step):.0%}",
        "q_step_s": f"{est.mean_step_s(n_gpus, step):.2f} s",
        "q_eff": f"{step.ideal_step_s / est.mean_step_s(n_gpus, step):.0%}",
        "q_hn": f"{est.healthy_late(n_gpus, step) / step.jitter:.1f}",
        "q_late": f"{est.healthy_late(n_gpus, step):.0%}",
        "q_b": f"{b:,}", "q_charge": f"{n_gpus / (n_gpus + b):.3f}",
        "q_ceiling": f"{est.backup_ceiling(n_gpus, b, step):.0%}",
        "q_m_min": f"{m:.0f} min", "q_delta_min": plural(failure.checkpoint_min, "minute"),
        "q_tau_min": f"{tau:.1f} min", "q_loss_write": f"{math.sqrt(2 * failure.checkpoint_min / m):.1%}",
        "q_loss_restart": f"{failure.restart_min / m:.1%}",
        "q_kept": f"{est.kept_at_young_daly(m, failure):.0%}",
    }


def is_share(key: str) -> bool:
    """Whether a claim of the page (a key of PAGE_CLAIMS) is a share (else a time in s, h or min)."""
    return not any(key.endswith(end) for end in _UNITS)


def page_values() -> dict:
    """The page's printed figures as numbers: shares as fractions, times in their unit (the last number of the
    text, so "about 19 min (19.3)" is 19.3)."""
    import re

    out = {}
    for key, text in PAGE_CLAIMS.items():
        value = float(re.findall(r"\d+(?:\.\d+)?", text)[-1])
        out[key] = value / 100 if is_share(key) else value
    return out
