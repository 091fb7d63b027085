"""Place it yourself: the placement game as a widget, with a static twin for the published book.

:func:`answer` is the pure function behind it: settings and a placement in, the environment's answer out
(step time, out of memory or not, peak memory per device against its cap, the copies paid, a timeline of the
step). :class:`PlaceItYourself` puts ipywidgets controls around it (one device picker per co-location group
or per node, presets for every baseline and the instructive placements, a random button, experiments B and C
as toggles, "your best so far" against the best hand-made baseline). In CI and in book builds
(``lib.book.in_ci()``) its ``show()`` draws :func:`static_figure` instead (a dropdown over a dozen instructive
placements, drawn from the same :func:`answer`) with a note saying where to run it live.
Used in: book/placement/01_the_game ("Place it yourself").
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Sequence

import numpy as np

from lib import book
from lib.widget_base import LiveOrTwin
from lib.graph import colocate, crossing_edges, expand
from lib.placement import baselines
from lib.placement.env import OOM_PENALTY_S, validate_placement  # noqa: F401 (re-export)
from lib.placement.sim_engine import TraceEvent
from lib.viz import PALETTE, layout, title_margin, wrap_title

#: Experiment B: micro-batches per step; experiment C: the memory cap (the write-up's settings, as in
#: book/placement/03_colocation).
B_MICRO, C_CAP = 4, 0.24
MODES = ("sim", "real")
UNITS = ("groups", "nodes")
#: Where a reader runs the live widget; shown under every static twin.
#: The instructive placements of the static twin (labels of :func:`instructive`), in dropdown order.
TWIN_LABELS = ("single GPU 0", "human 2-GPU split on 0,1", "4-way layer split", "2-stage pipeline",
               "4-stage pipeline", "3-way layer split", "3-stage pipeline", "only the loss on GPU 1",
               "only the head on GPU 1", "head and loss on GPU 1", "embedding | body | head on 3 GPUs",
               "embedding and head apart from the body")


@dataclass(frozen=True)
class Settings:
    """What the environment is: GPT ``preset``, hardware ``profile`` (simulator), experiment B
    (``micro_batches``: ``B_MICRO`` per step) and C (``mem_cap``: ``C_CAP`` of each device's memory), and
    ``mode``: "sim" (the simulator) or "real" (time on ``devices``, torch devices; default every CUDA GPU)."""

    preset: str = "49m"
    profile: str = "4xT4-pcie"
    micro_batches: bool = False
    mem_cap: bool = False
    mode: str = "sim"
    devices: tuple[str, ...] | None = None

    def __post_init__(self):
        for name in ("micro_batches", "mem_cap"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False; got {getattr(self, name)!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {self.mode!r}")
        if self.devices is not None and (not isinstance(self.devices, tuple) or len(self.devices) < 2):
            raise ValueError(f"devices must be None or a tuple of 2+ torch devices; got {self.devices!r}")

    @property
    def n_micro(self) -> int:
        return B_MICRO if self.micro_batches else 1

    @property
    def cap(self) -> float | None:
        return C_CAP if self.mem_cap else None

    @property
    def experiment(self) -> str:
        """"A" (plain), "B", "C", or "B+C"."""
        return "+".join(x for x, on in (("B", self.micro_batches), ("C", self.mem_cap)) if on) or "A"


@dataclass(frozen=True)
class Answer:
    """The environment's answer to one placement (times in s, memory in bytes, one entry per device).

    ``copy_s`` is the time the copies occupy their links in the simulated timeline (``events``, noiseless);
    ``source`` labels ``step_s`` and the peaks, ``timeline_source`` the timeline."""

    placement: tuple[int, ...]
    step_s: float
    oom: bool
    peak_bytes: tuple[int, ...]
    cap_bytes: tuple[int, ...]
    n_copies: int
    copy_bytes: int
    copy_s: float
    events: tuple[TraceEvent, ...]
    source: str
    timeline_source: str

    @property
    def devices_used(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.placement)))

    def headline(self) -> str:
        """One line: step time (or out of memory) and the copies."""
        step = "out of memory (charged 10 s)" if self.oom else f"{self.step_s * 1e3:.1f} ms a step"
        return (f"{step}; {self.n_copies} copies a step, {self.copy_bytes / 1e6:,.0f} MB, "
                f"{self.copy_s * 1e3:.1f} ms on the links")


# ----------------------------------------------------------------------------------------------- environments
@lru_cache(maxsize=16)
def sim_env(settings: Settings):
    """The simulator for ``settings`` (noiseless; cached: settings are frozen)."""
    from lib.placement.sim_env import SimPlacementEnv

    return SimPlacementEnv(settings.preset, settings.profile, n_micro=settings.n_micro, mem_cap=settings.cap)


@lru_cache(maxsize=4)
def env_for(settings: Settings):
    """The environment that answers: the simulator, or real devices for ``mode="real"``."""
    if settings.mode == "sim":
        return sim_env(settings)
    from lib.placement.torch_env import TorchPlacementEnv

    devices = settings.devices
    if devices is None:
        import torch

        n = torch.cuda.device_count()
        if n < 2:
            raise ValueError(f"mode='real' needs at least 2 CUDA devices; this kernel has {n}")
        devices = tuple(f"cuda:{i}" for i in range(n))
    return TorchPlacementEnv(settings.preset, list(devices), n_micro=settings.n_micro, mem_cap=settings.cap)


def _real_caps(env, settings: Settings) -> tuple[int, ...]:
    """Bytes each real device may use: its memory (CUDA) or the logical card (CPU), times C's cap."""
    from lib.placement.memory import cap_bytes

    if not env.cuda:  # the logical card of torch_env (a T4's usable memory), as its own budget check uses
        from lib.placement.torch_env import T4_VISIBLE_BYTES

        return (cap_bytes(T4_VISIBLE_BYTES, settings.cap),) * env.n_devices
    import torch

    return tuple(cap_bytes(torch.cuda.get_device_properties(d).total_memory, settings.cap) for d in env.devices)


def copies(graph, placement: Sequence[int]) -> tuple[int, int]:
    """(copies, bytes) one step pays: every crossing edge's activation forward and its gradient backward,
    once per micro-batch (the bytes add up to twice the full batch's output of each crossing producer)."""
    cut = crossing_edges(graph, placement)
    return 2 * len(cut), 2 * sum(graph.nodes[p].out_bytes for p, _ in cut)


def _copy_seconds(events: Sequence[TraceEvent]) -> float:
    """Time the copies occupy their links: a copy over several channels is listed once per channel."""
    seen = {(e.label, e.micro, e.start_s, e.end_s) for e in events if e.kind == "copy"}
    return float(sum(e - s for _, _, s, e in seen))


def answer(settings: Settings, placement: Sequence[int]) -> Answer:
    """The environment's answer to ``placement`` (one device per node) under ``settings``."""
    env, sim = env_for(settings), sim_env(settings)
    p = validate_placement(placement, env.n_nodes, env.n_devices)
    m = env.measure(p)
    n_copies, n_bytes = copies(sim.graph, p)
    n_micro = settings.n_micro
    events = tuple(sim.trace(p)) if sim.n_devices == env.n_devices and not m.oom else ()
    caps = sim.cap_bytes if env is sim else _real_caps(env, settings)
    return Answer(p, float(m.step_s), bool(m.oom), tuple(m.peak_mem_bytes), tuple(caps),
                  n_copies * n_micro, n_bytes, _copy_seconds(events), events, m.source or env.describe(),
                  sim.describe() if events else "")


# ----------------------------------------------------------------------------------------------- placements
def group_labels(graph, groups=None) -> list[str]:
    """A short name per co-location group: its first node, and its last when it has several."""
    names = [n.name for n in graph.nodes]
    out = []
    for g in groups or colocate(graph):
        first, last = names[g[0]], names[g[-1]]
        out.append(first if len(g) == 1 else f"{first} … {last}")
    return out


def instructive(graph, n_devices: int) -> dict[str, tuple[int, ...]]:
    """Every hand-made baseline (``baselines.all_baselines``), the logits wall's three moves, the write-up's
    winner shapes (embedding | body | head on three GPUs; embedding and head together apart from the body)
    and three-GPU splits, each as one device per node."""
    N = graph.n_nodes
    out = dict(baselines.all_baselines(graph, n_devices))
    if n_devices >= 2:
        out.update({"only the loss on GPU 1": (0,) * (N - 1) + (1,),
                    "only the head on GPU 1": (0,) * (N - 2) + (1, 0),
                    "head and loss on GPU 1": (0,) * (N - 2) + (1, 1),
                    "embedding and head apart from the body": (1,) + (0,) * (N - 4) + (1, 1, 1)})
    if n_devices >= 3:
        out["embedding | body | head on 3 GPUs"] = (0,) + (1,) * (N - 3) + (2, 2)
        if baselines.n_layers(graph) >= 3:
            out["3-way layer split"] = baselines.layer_split(graph, (0, 1, 2), n_devices)
        if len(colocate(graph)) >= 3:
            out["3-stage pipeline"] = baselines.pipeline(graph, (0, 1, 2), n_devices)
    return out


def as_groups(placement: Sequence[int], groups) -> tuple[int, ...] | None:
    """One device per group if every group of ``placement`` sits on one device, else None."""
    out = []
    for g in groups:
        devs = {placement[i] for i in g}
        if len(devs) != 1:
            return None
        out.append(devs.pop())
    return tuple(out)


def best_baseline(settings: Settings) -> tuple[str, Answer]:
    """The fastest hand-made baseline (``baselines.all_baselines``) under ``settings``: (label, answer)."""
    return _best_baseline(settings)


@lru_cache(maxsize=16)
def _best_baseline(settings: Settings) -> tuple[str, Answer]:
    env = env_for(settings)
    hand = baselines.all_baselines(sim_env(settings).graph, env.n_devices)
    answers = {k: answer(settings, p) for k, p in hand.items()}
    label = min(answers, key=lambda k: (answers[k].step_s, list(hand).index(k)))
    return label, answers[label]


# ----------------------------------------------------------------------------------------------- figures
_KINDS = (("forward", PALETTE["primary"]), ("backward", PALETTE["secondary"]), ("copy", PALETTE["bad"]),
          ("optimizer", PALETTE["good"]))


def _lanes(n_devices: int, events) -> list[str]:
    return [f"gpu{d}" for d in range(n_devices)] + sorted({e.lane for e in events} - {
        f"gpu{d}" for d in range(n_devices)})


def _traces(a: Answer, n_devices: int) -> list[dict]:
    """The twin's varying traces for one answer: the four timeline kinds (row 1) and the peak memory bars
    (row 2), each as x, y, base, hovertext and marker colour (the cap, trace 5, does not vary)."""
    out = []
    for kind, colour in _KINDS:
        ev = [e for e in a.events if e.kind == kind]
        out.append({"y": [e.lane for e in ev], "x": [round((e.end_s - e.start_s) * 1e3, 4) for e in ev],
                    "base": [round(e.start_s * 1e3, 4) for e in ev],
                    "hovertext": [f"{e.label} (micro-batch {e.micro})" if e.micro >= 0 else e.label for e in ev],
                    "marker.color": colour})
    out.append({"x": [f"GPU {d}" for d in range(n_devices)], "y": [round(b / 2**30, 4) for b in a.peak_bytes],
                "base": None, "hovertext": None,
                "marker.color": [PALETTE["bad"] if b > c else PALETTE["neutral"]
                                 for b, c in zip(a.peak_bytes, a.cap_bytes)]})
    return out


def _title(label: str, a: Answer, settings: Settings) -> str:
    used = len(a.devices_used)
    return f"{label} (experiment {settings.experiment}, {used} GPU{'s' if used > 1 else ''}): {a.headline()}"


def answer_figure(a: Answer, settings: Settings, title: str, height: int = 520):
    """One answer drawn: the step's timeline (ms, one lane per GPU and link) over the peak memory per GPU
    (GiB) against the cap (C's cap when experiment C is on, the usable memory otherwise)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    n_dev = len(a.peak_bytes)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.62, 0.38], vertical_spacing=0.16)
    tr = _traces(a, n_dev)
    for (kind, _), t in zip(_KINDS, tr):
        fig.add_trace(go.Bar(orientation="h", name=kind, marker_color=t["marker.color"], hoverinfo="text",
                             x=t["x"], y=t["y"], base=t["base"], hovertext=t["hovertext"]), 1, 1)
    fig.add_trace(go.Bar(name="peak memory (red: over the cap)", x=tr[-1]["x"], y=tr[-1]["y"], marker_color=tr[-1]["marker.color"],
                         hovertemplate="%{x}: %{y:.2f} GiB<extra></extra>"), 2, 1)
    gpus = [f"GPU {d}" for d in range(n_dev)]
    cap_name = f"C's cap ({C_CAP:.0%})" if settings.mem_cap else "usable memory"
    fig.add_trace(go.Scatter(x=gpus, y=[c / 2**30 for c in a.cap_bytes], mode="markers", name=cap_name,
                             marker=dict(symbol="line-ew", size=34, line=dict(width=3, color=PALETTE["bad"]))),
                  2, 1)
    if not settings.mem_cap and settings.mode == "sim":  # where experiment C would cut
        c_caps = sim_env(replace(settings, mem_cap=True)).cap_bytes
        fig.add_trace(go.Scatter(x=gpus, y=[c / 2**30 for c in c_caps], mode="markers",
                                 name=f"C's cap ({C_CAP:.0%})", marker=dict(symbol="line-ew", size=34, line=dict(
                                     width=2, color=PALETTE["accent"], dash="dot"))), 2, 1)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title_text="milliseconds into the step (simulated timeline)", row=1, col=1)
    fig.update_yaxes(categoryorder="array", categoryarray=_lanes(n_dev, a.events)[::-1], row=1, col=1)
    fig.update_yaxes(title_text="peak (GiB)", row=2, col=1)
    return layout(fig, title, height)


def static_figure(settings: Settings = Settings(), labels: Sequence[str] = TWIN_LABELS, height: int = 600):
    """The static twin: :func:`answer_figure` with a dropdown over ``labels`` (placements of
    :func:`instructive`), every option drawn from :func:`answer` under ``settings``; no kernel needed.

    The dropdown sits between the title and the plot; the top margin holds the longest option's title."""
    sim = sim_env(settings)
    places = instructive(sim.graph, sim.n_devices)
    unknown = [k for k in labels if k not in places]
    if unknown:
        raise ValueError(f"unknown placements {unknown}; known: {sorted(places)}")
    answers = {k: answer(settings, places[k]) for k in labels}
    titles = {k: _title(k, a, settings) for k, a in answers.items()}
    first = labels[0]
    fig = answer_figure(answers[first], settings, titles[first], height)
    n_dev = sim.n_devices
    buttons = []
    for k in labels:
        tr = _traces(answers[k], n_dev)
        data = {key: [t[key] for t in tr] for key in tr[0]}
        buttons.append(dict(method="update", label=k, args=[data, {"title.text": wrap_title(titles[k])},
                                                             list(range(len(tr)))]))
    longest = max(titles.values(), key=lambda t: wrap_title(t).count("<br>"))
    top = title_margin(longest) + 44
    fig.update_layout(margin=dict(t=top), updatemenus=[dict(
        type="dropdown", buttons=buttons, active=0, x=0, xanchor="left", y=1, yanchor="bottom",
        pad=dict(b=10), showactive=True, bgcolor="white", font=dict(size=12))])
    return fig


# ----------------------------------------------------------------------------------------------- the widget
def _summary_html(a: Answer, best: tuple[float, str] | None, base: tuple[str, Answer], settings: Settings) -> str:
    """The widget's text answer: headline, memory per device, best so far against the best baseline."""
    rows = "".join(
        f"<tr><td>GPU {d}</td><td>{b / 2**30:.2f} GiB</td><td>{c / 2**30:.2f} GiB</td>"
        f"<td style='color:{PALETTE['bad'] if b > c else PALETTE['good']}'>{'over' if b > c else 'fits'}</td></tr>"
        for d, (b, c) in enumerate(zip(a.peak_bytes, a.cap_bytes)))
    label, ba = base
    lines = [f"<b>{html.escape(a.headline())}</b>",
             f"<small>{html.escape(a.source)}</small>",
             "<table><tr><th>device</th><th>peak</th><th>cap</th><th></th></tr>" + rows + "</table>"]
    exp = f"experiment {settings.experiment}"
    if ba.oom:
        base_text = "every hand-made baseline runs out of memory"
    else:
        base_text = f"the best hand-made baseline is {html.escape(label)} at {ba.step_s * 1e3:.1f} ms"
    if best is None:
        lines.append(f"no placement of yours fits yet ({exp}); {base_text}")
    else:
        gap = best[0] / ba.step_s - 1
        verdict = ("" if ba.oom else f" ({-gap:.1%} faster)" if gap < 0 else f" ({gap:.1%} slower)" if gap > 0
                   else " (as fast)")
        lines.append(f"your best so far ({exp}): {best[0] * 1e3:.1f} ms{verdict}; {base_text}")
    return "<br>".join(lines)


class PlaceItYourself(LiveOrTwin):
    """The placement game as a widget. ``show()`` displays the live widget in a running kernel, or the
    static twin with :data:`LIVE_NOTE` under CI and in book builds (``live=False`` forces the twin).

    ``mode``: "sim", "real" or "auto" (real devices when the kernel has 2+ CUDA GPUs); ``devices`` overrides
    the real devices (e.g. ``("cpu", "cpu")`` logical devices for tests). ``seed`` seeds the random button."""

    TWIN_ID = "placement-twin"  # not the section's anchor id

    def __init__(self, preset: str = "49m", profile: str = "4xT4-pcie", mode: str = "sim", seed: int = 0,
                 live: bool = True, devices: Sequence[str] | None = None):
        if devices is None and mode in ("auto", "real"):
            n = _cuda_count()
            mode = book.resolve_mode(mode, n, needed=2)
        elif mode == "auto":
            mode = "real"
        self.settings = Settings(preset, profile, mode=mode, devices=tuple(devices) if devices else None)
        self.live, self.rng = live, np.random.default_rng(seed)
        self.graph = sim_env(self.settings).graph
        self.n_devices = env_for(self.settings).n_devices
        self.groups = colocate(self.graph)
        self.presets = instructive(self.graph, self.n_devices)
        self.best: dict[Settings, tuple[float, tuple[int, ...]]] = {}
        self.last: Answer | None = None
        self.figure = None
        self._built = None
        self._hold = False

    # --- state -> answer (what the callbacks call) --------------------------------------------------------
    def placement(self) -> tuple[int, ...]:
        """The placement the controls show, one device per node."""
        w = self._widgets()
        if w["unit"].value == "groups":
            return expand([p.value for p in w["groups"]], self.groups, self.graph.n_nodes)
        return tuple(p.value for p in w["nodes"])

    def current_settings(self) -> Settings:
        w = self._widgets()
        return replace(self.settings, micro_batches=w["b"].value, mem_cap=w["c"].value)

    def refresh(self, *_):
        """Answer the controls' placement now: the summary, the best so far and the timeline."""
        if self._hold:
            return
        w, s = self._widgets(), self.current_settings()
        p = self.placement()
        a = answer(s, p)
        if not a.oom and (s not in self.best or a.step_s < self.best[s][0]):
            self.best[s] = (a.step_s, p)
        self.last = a
        w["summary"].value = _summary_html(a, self.best.get(s), best_baseline(s), s)
        self.figure = answer_figure(a, s, _title("your placement", a, s), height=480)
        from IPython.display import display

        from lib.viz import PlotlyHTML, to_html

        w["out"].clear_output(wait=True)
        with w["out"]:
            display(PlotlyHTML(to_html(self.figure, "placement-live")))

    def set_placement(self, placement: Sequence[int]) -> None:
        """Put ``placement`` (one device per node) on the controls, in groups when it keeps every group on one
        device, else node by node; then answer once."""
        w = self._widgets()
        p = validate_placement(placement, self.graph.n_nodes, self.n_devices)
        g = as_groups(p, self.groups)
        self._hold = True
        try:
            w["unit"].value = "groups" if g is not None else "nodes"
            for picker, d in zip(w["groups"], g or ()):
                picker.value = d
            for picker, d in zip(w["nodes"], p):
                picker.value = d
        finally:
            self._hold = False
        self.refresh()

    def apply_preset(self, label: str) -> None:
        if label not in self.presets:
            raise ValueError(f"unknown preset {label!r}; known: {sorted(self.presets)}")
        self.set_placement(self.presets[label])

    def randomise(self, *_) -> None:
        """A uniformly random placement, over groups or nodes as the controls show."""
        w = self._widgets()
        if w["unit"].value == "groups":
            g = self.rng.integers(0, self.n_devices, len(self.groups))
            self.set_placement(expand(g, self.groups, self.graph.n_nodes))
        else:
            self.set_placement(self.rng.integers(0, self.n_devices, self.graph.n_nodes).tolist())

    # --- the controls -------------------------------------------------------------------------------------
    def _build(self) -> dict:
        import ipywidgets as W

        devs = [(str(d), d) for d in range(self.n_devices)]
        style = dict(button_width="34px", description_width="150px")
        groups = [W.ToggleButtons(options=devs, value=0, description=lab, style=style,
                                  layout=W.Layout(width="340px"))
                  for lab in group_labels(self.graph, self.groups)]
        nodes = [W.Dropdown(options=devs, value=0, description=n.name, style=dict(description_width="95px"),
                            layout=W.Layout(width="150px")) for n in self.graph.nodes]
        preset = W.Dropdown(options=["(choose a preset)"] + list(self.presets), description="preset",
                            layout=W.Layout(width="380px"))
        unit = W.ToggleButtons(options=list(UNITS), value="groups", description="place")
        b = W.ToggleButton(value=False, description=f"B: {B_MICRO} micro-batches")
        c = W.ToggleButton(value=False, description=f"C: memory cap {C_CAP:.0%}")
        rand = W.Button(description="random placement", icon="random")
        group_box = W.GridBox(groups, layout=W.Layout(grid_template_columns="repeat(2, 350px)"))
        node_box = W.GridBox(nodes, layout=W.Layout(grid_template_columns="repeat(5, 155px)", display="none"))
        w = dict(groups=groups, nodes=nodes, preset=preset, unit=unit, b=b, c=c, random=rand,
                 group_box=group_box, node_box=node_box, summary=W.HTML(), out=W.Output())
        for picker in groups + nodes:
            picker.observe(self.refresh, "value")
        b.observe(self.refresh, "value")
        c.observe(self.refresh, "value")
        rand.on_click(self.randomise)

        def _unit(change):
            group_box.layout.display = None if change["new"] == "groups" else "none"
            node_box.layout.display = "none" if change["new"] == "groups" else None
            if change["new"] == "groups" and not self._hold:
                # a group that the nodes split goes where its last node (its output) is
                last = [nodes[g[-1]].value for g in self.groups]
                self._hold = True
                for picker, d in zip(groups, last):
                    picker.value = d
                self._hold = False
            elif not self._hold:
                self._hold = True
                for picker, d in zip(nodes, expand([p.value for p in groups], self.groups, self.graph.n_nodes)):
                    picker.value = d
                self._hold = False
            self.refresh()

        def _preset(change):
            if change["new"] in self.presets:
                self.apply_preset(change["new"])

        unit.observe(_unit, "value")
        preset.observe(_preset, "value")
        w["box"] = W.VBox([W.HBox([preset, rand]), W.HBox([unit, b, c]), group_box, node_box, w["summary"],
                           w["out"]])
        return w

    def static_twin(self):
        """:func:`static_figure` on the simulator, over the twin's placements this model and machine have."""
        s = replace(self.settings, mode="sim")
        have = instructive(sim_env(s).graph, sim_env(s).n_devices)
        return static_figure(s, [k for k in TWIN_LABELS if k in have])



def _cuda_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()
