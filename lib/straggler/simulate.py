"""Event simulation of a training run with failures and checkpoints, and the five ways to run the same two weeks.

The run alternates segments of ``interval_min`` training plus a checkpoint write; a failure (Poisson, mean gap the
cluster MTBF, clock paused during restarts) throws away everything since the last completed checkpoint and costs a
restart. The loop is over failures, not segments (the segments between two failures are counted in one step), so
two weeks at 16,384 GPUs take about a millisecond. Every policy reads the same unit-mean failure gaps (common random
numbers), so every row sees the same failures at the same moments. Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from lib.straggler.model import (FailureModel, StepModel, _check, _check_gpus, _check_interval, backup_count,
                                 checkpoint_shares, expected_failures, sample_steps, step_efficiency, young_daly_min)


class FailureGaps:
    """Unit-mean exponential gaps between failures (in uptime), drawn once and shared by every policy.
    Extends itself in fixed chunks from its own generator, so gap ``i`` never depends on who asked first."""

    def __init__(self, rng: np.random.Generator, chunk: int = 4096):
        self._rng, self._chunk = rng, chunk
        self._gaps = rng.standard_exponential(chunk)

    def __getitem__(self, i: int) -> float:
        while i >= len(self._gaps):
            self._gaps = np.concatenate([self._gaps, self._rng.standard_exponential(self._chunk)])
        return float(self._gaps[i])


@dataclass(frozen=True)
class RunResult:
    """Minutes of one simulated run by kind, and its shares. ``checkpoint_min`` counts completed and interrupted
    writes; ``lost_min`` is thrown-away work (including interrupted writes) plus restarts. ``gaps`` (only when
    recorded) holds one (start_min, end_min, complete_segments, ended_by_failure) per stretch between failures."""

    interval_min: float
    mtbf_min: float
    run_min: float
    failures: int
    kept_min: float
    checkpoint_min: float
    lost_min: float
    gaps: tuple = field(default=(), repr=False)

    # shares are sums of many minutes over the run's minutes: with 10^5 failures their rounding can land a
    # hair outside [0, 1] (lost 1.0000000000000002), so they are clamped
    @property
    def kept_share(self) -> float:
        return _share(self.kept_min / self.run_min)

    @property
    def checkpoint_share(self) -> float:
        return _share(self.checkpoint_min / self.run_min)

    @property
    def lost_share(self) -> float:
        return _share(self.lost_min / self.run_min)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunResult":
        d = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        d["gaps"] = tuple(tuple(g) for g in d.get("gaps", ()))
        return cls(**d)


def _share(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def simulate_run(interval_min: float, mtbf_min: float, gaps: FailureGaps, run_min: float,
                 checkpoint_min: float = 1.0, restart_min: float = 5.0, record: bool = False) -> RunResult:
    """Simulate ``run_min`` minutes of wall time; failure ``i`` comes ``gaps[i] * mtbf_min`` minutes of uptime
    after the previous restart. Training in progress at the end counts as kept."""
    _check_interval(interval_min, mtbf_min, checkpoint_min, restart_min)  # the exact model's checks, and:
    costs = {"interval_min": interval_min, "checkpoint_min": checkpoint_min, "restart_min": restart_min}
    for name, v in costs.items():  # an endless interval or cost would never let simulated time pass
        _check(math.isfinite(v), name, v, "finite")
    _check(run_min > 0 and math.isfinite(run_min), "run_min", run_min, "> 0 and finite (minutes of wall time)")
    tau, seg = interval_min, interval_min + checkpoint_min
    t = kept = ckpt = lost = 0.0
    n_fail, log = 0, []
    while t < run_min:
        up = gaps[n_fail] * mtbf_min
        left = run_min - t
        failed = up < left
        span = up if failed else left
        n_full = math.floor(span / seg)
        rest = span - n_full * seg  # the segment in progress when the failure (or the end) comes
        ckpt += n_full * checkpoint_min + max(0.0, rest - tau)
        kept += n_full * tau
        if record:
            log.append((t, t + span, n_full, failed))
        t += span
        if not failed:
            kept += min(rest, tau)
            break
        n_fail += 1
        lost += rest + min(restart_min, run_min - t)
        t += restart_min
    return RunResult(interval_min, mtbf_min, run_min, n_fail, kept, ckpt, lost, tuple(log))


def sampled_step_efficiency(n_gpus: int, n_backup: int, n_steps: int, rng: np.random.Generator,
                            model: StepModel = StepModel()) -> float:
    """Monte-Carlo step efficiency from ``n_steps`` drawn steps (checks the exact value)."""
    steps = sample_steps(n_gpus, n_backup, n_steps, rng, model)
    return model.ideal_step_s / float(steps.mean()) * n_gpus / (n_gpus + n_backup)


@dataclass(frozen=True)
class PolicyRow:
    """One way to run the cluster: this run's shares next to the exact expectations; goodput = kept x efficiency."""

    name: str
    interval_min: float
    n_gpus: int
    n_backup: int
    mtbf_h: float
    failures: int
    expected_failures: float
    checkpoint_share: float
    lost_share: float
    kept_share: float
    expected_checkpoint: float
    expected_lost: float
    expected_kept: float
    step_efficiency: float

    @property
    def goodput(self) -> float:
        return self.kept_share * self.step_efficiency

    @property
    def expected_goodput(self) -> float:
        return self.expected_kept * self.step_efficiency

    def to_dict(self) -> dict:
        return {**asdict(self), "goodput": self.goodput, "expected_goodput": self.expected_goodput}

    @classmethod
    def from_dict(cls, d: dict) -> "PolicyRow":
        return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class Comparison:
    """The five ways to run the same run (same failures for every row). Displays itself as a table."""

    n_gpus: int
    days: float
    seed: int
    rows: tuple

    def to_dict(self) -> dict:
        return {"n_gpus": self.n_gpus, "days": self.days, "seed": self.seed, "rows": [r.to_dict() for r in self.rows]}

    @classmethod
    def from_dict(cls, d: dict) -> "Comparison":
        return cls(d["n_gpus"], d["days"], d["seed"], tuple(PolicyRow.from_dict(r) for r in d["rows"]))

    def row(self, name: str) -> PolicyRow:
        return next(r for r in self.rows if r.name == name)

    def table(self) -> list[list[str]]:
        """Header plus one line of formatted cells per row (shared by the terminal and the HTML views)."""
        head = ["Row", "Interval", "GPUs", "MTBF", "Failures (exp.)", "Checkpoint", "Lost", "Kept (exp.)",
                "Step eff.", "Goodput (exp.)"]
        lines = [head]
        for r in self.rows:
            gpus = f"{r.n_gpus:,}" + (f" + {r.n_backup:,}" if r.n_backup else "")
            lines.append([r.name, f"{r.interval_min:.2f} min", gpus, f"{r.mtbf_h:.3f} h",
                          f"{r.failures} ({r.expected_failures:.1f})", f"{r.checkpoint_share:.2%}",
                          f"{r.lost_share:.2%}", f"{r.kept_share:.2%} ({r.expected_kept:.2%})",
                          f"{r.step_efficiency:.2%}", f"{r.goodput:.2%} ({r.expected_goodput:.2%})"])
        return lines

    def to_text(self) -> str:
        lines = self.table()
        widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
        fmt = lambda line: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
        return "\n".join([fmt(lines[0]), "  ".join("-" * w for w in widths)] + [fmt(x) for x in lines[1:]])

    def _repr_html_(self) -> str:
        head, *body = self.table()
        th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
        trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in body)
        return (f"<table><caption>{self.days:g} days, {self.n_gpus:,} GPUs, seed {self.seed}: every row sees "
                f"the same failures; (exp.) = exact expected value</caption><thead><tr>{th}</tr></thead>"
                f"<tbody>{trs}</tbody></table>")


def five_ways(n_gpus: int = 16_384, interval_min: float = 120.0, backup_share: float = 0.0, days: float = 14.0,
              seed: int = 0, step: StepModel = StepModel(), failure: FailureModel = FailureModel(),
              record: bool = False) -> tuple[Comparison, dict]:
    """Too often (YD/6), Young-Daly, too rarely (6 YD), Young-Daly + 2% backups, and your settings, all over the
    same failure gaps. Returns the comparison and, per row name, its ``RunResult`` (with gaps if ``record``)."""
    _check_gpus(n_gpus)
    _check(interval_min > 0 and math.isfinite(interval_min), "interval_min", interval_min, "> 0 and finite")
    _check(days > 0 and math.isfinite(days), "days", days, "> 0 and finite")
    failure = replace(failure, run_days=days)
    run_min = days * 24 * 60
    gaps = FailureGaps(np.random.default_rng(seed))
    yd = young_daly_min(failure.cluster_mtbf_min(n_gpus), failure.checkpoint_min)
    policies = [("Too often (YD/6)", yd / 6, 0), ("Young-Daly", yd, 0), ("Too rarely (6 YD)", 6 * yd, 0),
                ("Young-Daly + 2% backups", yd, backup_count(n_gpus, 0.02)),
                ("Your settings", interval_min, backup_count(n_gpus, backup_share))]
    rows, runs = [], {}
    for name, tau, b in policies:
        mtbf = failure.cluster_mtbf_min(n_gpus, b)
        run = simulate_run(tau, mtbf, gaps, run_min, failure.checkpoint_min, failure.restart_min, record)
        exp = checkpoint_shares(tau, mtbf, failure.checkpoint_min, failure.restart_min)
        rows.append(PolicyRow(name, tau, n_gpus, b, mtbf / 60, run.failures,
                              expected_failures(run_min, mtbf, failure.restart_min), run.checkpoint_share,
                              run.lost_share, run.kept_share, float(exp["checkpoint"]), float(exp["lost"]),
                              float(exp["kept"]), step_efficiency(n_gpus, b, step)))
        runs[name] = run
    return Comparison(n_gpus, days, seed, tuple(rows)), runs
