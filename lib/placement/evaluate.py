"""The write-up's head-to-head protocol: pick one placement per side fairly, then re-time only the picks.

Selection: ``rounds_select`` rounds (the write-up: 4); in each, every candidate of every side is timed once, in a
freshly shuffled order, for ``steps_per_round`` timed steps (the write-up: 10). Each side's pick is its candidate
with the lowest mean over the selection rounds: the RL side chooses from the run's top 5 and its final
favourite, the single-GPU side from the 4 GPUs, the human side from its two-GPU splits over three GPU pairs.
With ``seed_sides(..., gpu_order=rank_devices(...))`` every side, the RL side included, also chooses its GPUs
there, by one rule: its busiest GPU on the machine's fastest (``lib.placement.relabel.by_speed``).
Confirmation: ``rounds_confirm`` fresh rounds (the write-up: 8), shuffled, time only the picks and the fixed
baselines; in the simulator each confirmed entry also carries its noiseless time on the same machine. Only
confirmation timings are reported (selection timings are never re-used: the best of several noisy timings is
flattered by luck). Each entry gets mean ± standard deviation over rounds and the standard error of the mean;
the gap between the RL pick and the best other entry is given in standard errors of the difference,
(mean_other - mean_rl) / sqrt(se_rl² + se_other²). Used in: Part I, chapters 3 and 4.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

from lib.placement.env import PHASES, PlacementEnv, phases_synchronised, validate_placement

Labelled = Sequence[tuple[str, Sequence[int]]]


def time_round(env: PlacementEnv, placement: Sequence[int], steps: int) -> tuple[float, bool]:
    """One round: the mean of ``steps`` timed steps (seconds), and whether the placement ran out of memory.

    Uses ``env.measure`` repeatedly and pools its individual timed steps (``samples_s``; a noiseless simulator
    gives one ``step_s`` per call). An OOM placement is charged its penalty for the round.
    """
    if steps < 1:
        raise ValueError(f"steps_per_round must be >= 1; got {steps}")
    samples: list[float] = []
    while len(samples) < steps:
        m = env.measure(placement)
        if m.oom:
            return float(m.step_s), True
        samples.extend(m.samples_s if m.samples_s else (m.step_s,))
    return float(np.mean(samples[:steps])), False


#: A head-to-head gap counts as a win or a loss from this many standard errors of the difference on.
CLEAR_GAP_SE = 2.0


@dataclass(frozen=True)
class Entry:
    """One confirmed placement: a side's pick (``role="pick"``) or a fixed baseline (``role="fixed"``)."""

    side: str
    label: str
    placement: tuple[int, ...]
    role: str
    confirm_s: tuple[float, ...]
    oom: bool
    noiseless_s: float | None = None  # the same machine without timing noise (simulator only; None: unknown)

    @property
    def mean_s(self) -> float:
        return float(np.mean(self.confirm_s))

    @property
    def std_s(self) -> float:
        return float(np.std(self.confirm_s, ddof=1)) if len(self.confirm_s) > 1 else 0.0

    @property
    def sem_s(self) -> float:
        return self.std_s / math.sqrt(len(self.confirm_s))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["placement"], d["confirm_s"] = list(self.placement), list(self.confirm_s)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Entry":
        return cls(d["side"], d["label"], tuple(d["placement"]), d["role"], tuple(d["confirm_s"]), bool(d["oom"]),
                   d.get("noiseless_s"))


@dataclass(frozen=True)
class Selection:
    """One candidate's selection timings (seconds per round)."""

    side: str
    label: str
    placement: tuple[int, ...]
    round_s: tuple[float, ...]
    oom: bool

    @property
    def mean_s(self) -> float:
        return float(np.mean(self.round_s))

    def to_dict(self) -> dict:
        return {"side": self.side, "label": self.label, "placement": list(self.placement),
                "round_s": list(self.round_s), "oom": self.oom}

    @classmethod
    def from_dict(cls, d: dict) -> "Selection":
        return cls(d["side"], d["label"], tuple(d["placement"]), tuple(d["round_s"]), bool(d["oom"]))


@dataclass(frozen=True)
class HeadToHead:
    """The result of :func:`head_to_head`; shows itself as a table in a notebook."""

    entries: tuple[Entry, ...]
    selection: tuple[Selection, ...]
    rounds_select: int
    rounds_confirm: int
    steps_per_round: int
    source: str
    rl_side: str = "rl"

    def entry(self, label_or_side: str) -> Entry:
        for e in self.entries:
            if e.label == label_or_side or (e.role == "pick" and e.side == label_or_side):
                return e
        raise KeyError(f"no entry {label_or_side!r}; have {[e.label for e in self.entries]}")

    @property
    def winner(self) -> Entry:
        return min(self.entries, key=lambda e: e.mean_s)

    @property
    def best_other(self) -> Entry:
        others = [e for e in self.entries if not (e.role == "pick" and e.side == self.rl_side)]
        return min(others, key=lambda e: e.mean_s)

    @property
    def noiseless_gap_s(self) -> float | None:
        """The gap of :attr:`gap_s` without timing noise, on the same machine (None when not known)."""
        rl, other = self.entry(self.rl_side), self.best_other
        if rl.noiseless_s is None or other.noiseless_s is None:
            return None
        return other.noiseless_s - rl.noiseless_s

    @property
    def noiseless_margin_s(self) -> float | None:
        """Without noise, how much faster the RL pick is than the fastest other entry (seconds; negative =
        slower; None when not known). Out-of-memory entries are left out."""
        rl = self.entry(self.rl_side)
        others = [e.noiseless_s for e in self.entries if not (e.role == "pick" and e.side == self.rl_side)
                  and not e.oom]
        if rl.noiseless_s is None or not others or any(t is None for t in others):
            return None
        return min(others) - rl.noiseless_s

    @property
    def gap_s(self) -> float:
        """How much faster the RL pick is than the best other entry (seconds; negative = slower)."""
        return self.best_other.mean_s - self.entry(self.rl_side).mean_s

    @property
    def gap_se(self) -> float:
        """The gap in standard errors of the difference of the two means."""
        rl, other = self.entry(self.rl_side), self.best_other
        se = math.hypot(rl.sem_s, other.sem_s)
        return self.gap_s / se if se > 0 else math.copysign(math.inf, self.gap_s) if self.gap_s else 0.0

    def outcome(self, min_se: float = CLEAR_GAP_SE) -> str:
        """"win", "loss" or "tie" for RL by the 2-SE rule (a gap of at least ``min_se`` standard errors): a
        label for claim cells and tables; the chapters write the sentence by hand."""
        se = self.gap_se
        return "win" if se >= min_se else "loss" if se <= -min_se else "tie"

    def verdict(self, min_se: float = CLEAR_GAP_SE) -> str:
        """One sentence: a clear RL win or loss (a gap of at least ``min_se`` standard errors), or no clear
        winner."""
        rl, other, se = self.entry(self.rl_side), self.best_other, self.gap_se
        if se >= min_se:
            return (f"RL wins: its pick is {self.gap_s * 1e3:.1f} ms faster than {other.label}, "
                    f"{se:.1f} standard errors")
        if se <= -min_se:
            return (f"RL loses: {other.label} is {-self.gap_s * 1e3:.1f} ms faster than the RL pick, "
                    f"{-se:.1f} standard errors")
        return (f"no clear winner: the RL pick ({rl.mean_s * 1e3:.1f} ms) and {other.label} "
                f"({other.mean_s * 1e3:.1f} ms) are {abs(se):.1f} standard errors apart, under {min_se:g}")

    def to_dict(self) -> dict:
        return {
            "kind": "head_to_head",
            "entries": [e.to_dict() for e in self.entries],
            "selection": [s.to_dict() for s in self.selection],
            "rounds_select": self.rounds_select,
            "rounds_confirm": self.rounds_confirm,
            "steps_per_round": self.steps_per_round,
            "source": self.source,
            "rl_side": self.rl_side,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "HeadToHead":
        return cls(tuple(Entry.from_dict(e) for e in d["entries"]), tuple(Selection.from_dict(s) for s in d["selection"]),
                   d["rounds_select"], d["rounds_confirm"], d["steps_per_round"], d["source"], d.get("rl_side", "rl"))

    def rows(self) -> list[dict]:
        """One row per confirmed entry, in milliseconds (fastest first)."""
        rows = []
        for e in sorted(self.entries, key=lambda e: e.mean_s):
            rows.append({"side": e.side, "placement": e.label, "role": e.role, "mean_ms": e.mean_s * 1e3,
                         "std_ms": e.std_s * 1e3, "sem_ms": e.sem_s * 1e3, "oom": e.oom,
                         "noiseless_ms": None if e.noiseless_s is None else e.noiseless_s * 1e3,
                         "devices": "".join(str(d) for d in e.placement)})
        return rows

    def _repr_html_(self) -> str:
        head = ("<tr><th>side</th><th>pick</th><th>step time (ms), mean ± std</th><th>std. error (ms)</th>"
                "<th>noiseless (ms)</th><th>devices per node</th></tr>")
        body = []
        for r in self.rows():
            t = "out of memory" if r["oom"] else f"{r['mean_ms']:.1f} ± {r['std_ms']:.1f}"
            q = "-" if r["noiseless_ms"] is None else f"{r['noiseless_ms']:.1f}"
            body.append(f"<tr><td>{html.escape(r['side'])}</td><td>{html.escape(r['placement'])}</td><td>{t}</td>"
                        f"<td>{r['sem_ms']:.2f}</td><td>{q}</td><td><code>{r['devices']}</code></td></tr>")
        cap = (f"{self.rounds_confirm} confirmation rounds × {self.steps_per_round} timed steps, after "
               f"{self.rounds_select} selection rounds; {html.escape(self.source)}. RL pick vs best other: "
               f"{self.gap_s * 1e3:+.1f} ms = {self.gap_se:+.1f} standard errors (positive: RL faster).")
        return f"<table><caption>{cap}</caption>{head}{''.join(body)}</table>"


def head_to_head(
    env: PlacementEnv,
    sides: Mapping[str, Labelled],
    fixed: Labelled = (),
    rounds_select: int = 4,
    rounds_confirm: int = 8,
    steps_per_round: int = 10,
    rng: np.random.Generator | None = None,
    rl_side: str = "rl",
    progress: bool = False,
) -> HeadToHead:
    """Run the protocol. ``sides``: side name -> candidates ``[(label, placement), ...]``; ``fixed``: baselines
    that are confirmed without selection. ``rng`` shuffles the order within every round. ``progress`` shows a
    bar over the timed rounds (on real GPUs the protocol takes many minutes)."""
    if rng is None:
        raise ValueError("pass rng=numpy.random.default_rng(seed): the round order must be reproducible")
    if rounds_select < 1 or rounds_confirm < 2:
        raise ValueError(f"need rounds_select >= 1 and rounds_confirm >= 2; got {rounds_select}, {rounds_confirm}")
    if not sides:
        raise ValueError("sides is empty: give at least one side with candidates")
    if rl_side not in sides:
        raise ValueError(f"rl_side {rl_side!r} is not among the sides {sorted(sides)}")
    cands = []
    for side, lst in sides.items():
        lst = list(lst)
        if not lst:
            raise ValueError(f"side {side!r} has an empty candidate list; every side needs at least one")
        for label, p in lst:
            cands.append((side, str(label), validate_placement(p, env.n_nodes, env.n_devices)))
    fixed = [(str(lbl), validate_placement(p, env.n_nodes, env.n_devices)) for lbl, p in fixed]

    from tqdm.auto import tqdm

    bar = tqdm(total=rounds_select * len(cands) + rounds_confirm * (len(sides) + len(fixed)), disable=not progress,
               desc="head-to-head", unit="round")
    sel_times = [[] for _ in cands]
    sel_oom = [False] * len(cands)
    for _ in range(rounds_select):
        for i in rng.permutation(len(cands)):
            t, oom = time_round(env, cands[i][2], steps_per_round)
            bar.update()
            sel_times[i].append(t)
            sel_oom[i] = sel_oom[i] or oom
    selection = tuple(Selection(s, lbl, p, tuple(ts), o) for (s, lbl, p), ts, o in zip(cands, sel_times, sel_oom))

    picks = []
    for side in sides:
        mine = [s for s in selection if s.side == side]
        picks.append(min(mine, key=lambda s: s.mean_s))  # first listed wins a tie
    todo = [(p.side, p.label, p.placement, "pick") for p in picks] + [("fixed", lbl, p, "fixed") for lbl, p in fixed]

    conf = [[] for _ in todo]
    conf_oom = [False] * len(todo)
    for _ in range(rounds_confirm):
        for i in rng.permutation(len(todo)):
            t, oom = time_round(env, todo[i][2], steps_per_round)
            bar.update()
            conf[i].append(t)
            conf_oom[i] = conf_oom[i] or oom
    bar.close()
    quiet = getattr(env, "noiseless_s", None)
    entries = tuple(Entry(s, lbl, p, role, tuple(ts), o, quiet(p) if quiet is not None and not o else None)
                    for (s, lbl, p, role), ts, o in zip(todo, conf, conf_oom))
    return HeadToHead(entries, selection, rounds_select, rounds_confirm, steps_per_round, env.describe(), rl_side)


@dataclass(frozen=True)
class PhaseTiming:
    """Median per-phase step time (seconds) per placement over ``n_steps`` measurements."""

    labels: tuple[str, ...]
    phase_s: tuple[dict, ...]
    n_steps: int
    source: str

    def to_dict(self) -> dict:
        return {"labels": list(self.labels), "phase_s": list(self.phase_s), "n_steps": self.n_steps,
                "source": self.source}

    @classmethod
    def from_dict(cls, d: dict) -> "PhaseTiming":
        return cls(tuple(d["labels"]), tuple(d["phase_s"]), d["n_steps"], d["source"])

    def _repr_html_(self) -> str:
        head = "<tr><th>placement</th>" + "".join(f"<th>{p} (ms)</th>" for p in PHASES) + "<th>sum (ms)</th></tr>"
        body = ""
        for lbl, ph in zip(self.labels, self.phase_s):
            cells = "".join(f"<td>{ph.get(p, float('nan')) * 1e3:.1f}</td>" for p in PHASES)
            body += f"<tr><td>{html.escape(lbl)}</td>{cells}<td>{sum(ph.values()) * 1e3:.1f}</td></tr>"
        cap = f"median of {self.n_steps} steps per phase; {html.escape(self.source)}"
        return f"<table><caption>{cap}</caption>{head}{body}</table>"


def phase_timing(env: PlacementEnv, placements: Labelled, n_steps: int = 12) -> PhaseTiming:
    """Per-phase (forward, backward, optimizer) medians of each placement, e.g. the winner vs the best GPU,
    with every device synchronised between phases as in the write-up's table (the env is restored afterwards)."""
    if not placements:
        raise ValueError("placements is empty: give at least one (label, placement)")
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1; got {n_steps}")
    labels, out = [], []
    for label, p in placements:
        p = validate_placement(p, env.n_nodes, env.n_devices)
        with phases_synchronised(env):
            runs = [env.measure(p) for _ in range(n_steps)]
        if any(m.oom for m in runs):
            raise ValueError(f"placement {label!r} runs out of memory; it has no phase timing")
        if not all(m.phase_s for m in runs):
            raise ValueError(f"the environment {env.describe()!r} does not report per-phase times")
        labels.append(str(label))
        out.append({ph: float(np.median([m.phase_s[ph] for m in runs])) for ph in PHASES})
    return PhaseTiming(tuple(labels), tuple(out), n_steps, env.describe() + "; devices synchronised between phases")


# --- the write-up's sides, from the hand-made placements of lib.placement.baselines ---

def rank_devices(env: PlacementEnv, rounds: int, steps_per_round: int, rng: np.random.Generator) -> tuple[int, ...]:
    """The machine's GPUs, fastest first: each GPU holding the whole model, timed in ``rounds`` shuffled rounds
    of ``steps_per_round`` steps (the write-up's single-GPU side, timed apart: these timings are used for
    nothing else). A GPU on which the model does not fit ranks by its out-of-memory charge, last."""
    n, t = env.n_devices, [[] for _ in range(env.n_devices)]
    for _ in range(rounds):
        for d in rng.permutation(n):
            t[d].append(time_round(env, (int(d),) * env.n_nodes, steps_per_round)[0])
    return tuple(sorted(range(n), key=lambda d: (float(np.mean(t[d])), d)))


def seed_sides(run, graph, n_devices: int, gpu_order: Sequence[int] | None = None) -> tuple[dict, list]:
    """The head-to-head's sides and fixed baselines for a run: ``({"rl", "single_gpu", "human_2gpu"}, fixed)``.

    rl: the run's top 5 and final favourite; single_gpu: every device; human_2gpu: the two-GPU split on the
    write-up's three GPU pairs; fixed: the four-way layer split and the pipelines of ``lib.placement.baselines``.
    ``gpu_order`` (the judged machine's GPUs, fastest first, from :func:`rank_devices`): every placement but the
    single GPUs is relabelled so that its busiest GPU is the fastest (``lib.placement.relabel.by_speed``), so
    every side chooses its GPUs on the machine where it is judged. None: the write-up's protocol, in which the
    RL candidates keep the GPUs they were trained on.
    """
    from lib.placement import baselines as bl
    from lib.placement import relabel as rl

    sides = {"rl": run.candidates(), "single_gpu": bl.single_devices(graph, n_devices)}
    human = bl.human_two_gpu(graph, n_devices)
    if human:
        sides["human_2gpu"] = human
    fixed = bl.fixed_baselines(graph, n_devices)
    if gpu_order is None:
        return sides, fixed
    sides["rl"] = rl.by_speed(sides["rl"], gpu_order, graph)
    if human:  # the split names its own GPUs: "human 2-GPU split on <embedding's>,<head's>"
        sides["human_2gpu"] = [(f"human 2-GPU split on {p[0]},{p[-1]}", p)
                               for _, p in rl.by_speed(human, gpu_order, graph)]
    return sides, rl.by_speed(fixed, gpu_order, graph)
