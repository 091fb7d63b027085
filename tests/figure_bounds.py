"""Every mark of a plotly figure inside its axes, in every state a reader can reach (the figure as first drawn and
each slider or button frame). Plotly's ``animate`` does not autorange: a frame keeps the last range it was given,
so a frames figure must fix its ranges, and a frame that moves an axis must be matched by every other frame.
Used by tests/closing/test_figures.py and tests/straggler/test_panels.py."""

from __future__ import annotations

import math

_AXIS_KEYS = ("range", "categoryarray", "type")


def _axis_name(ref: str | None, letter: str) -> str:
    return f"{letter}axis{(ref or letter)[1:]}"


def _lookup(base: dict, frame: dict, name: str) -> dict:
    """The axis as the reader sees it in a frame: the frame's own keys over the figure's."""
    out = {k: v for k, v in base.get(name, {}).items() if k in _AXIS_KEYS}
    out.update({k: v for k, v in frame.get(name, {}).items() if k in _AXIS_KEYS})
    return out


def _is_category(axis: dict, values) -> bool:
    return axis.get("type") == "category" or any(isinstance(v, str) for v in values if v is not None)


def _numbers(values, axis: dict) -> list[float]:
    out = [float(v) for v in values if v is not None]
    return [math.log10(v) if axis.get("type") == "log" else v for v in out if axis.get("type") != "log" or v > 0]


def _check_axis(where: str, axis: dict, values, fixed: bool) -> list[str]:
    """``fixed``: the figure has frames, so every axis needs its range (and a category axis its order)."""
    values = [v for v in values if v is not None]
    if not values:
        return []
    if _is_category(axis, values):
        order = list(axis.get("categoryarray") or [])
        if not order:
            return [f"{where}: a category axis without a fixed category order"] if fixed else []
        missing = sorted({str(v) for v in values} - set(order))
        if missing:
            return [f"{where}: categories {missing} not in the axis's order {order}"]
        rng = axis.get("range")
        if rng is None:
            return [f"{where}: a category axis without a fixed range (labels shift when the data change)"
                    ] if fixed else []
        idx = [order.index(v) for v in values]
        lo, hi = sorted(rng)
        return [f"{where}: category at {i} outside {rng}" for i in idx if not lo < i < hi][:1]
    rng = axis.get("range")
    if rng is None:
        return [f"{where}: a value axis without a fixed range"] if fixed else []
    lo, hi = sorted(rng)
    tol = 1e-4 * (hi - lo)  # values rounded to 5 digits, stacked
    return [f"{where}: {v:.4g} outside [{lo:.4g}, {hi:.4g}]" for v in _numbers(values, axis)
            if not lo - tol <= v <= hi + tol][:1]


def _trace_values(tr: dict, stacks: dict) -> tuple[list, list]:
    """(x values, y values) where the trace draws its marks: a bar's end (base + length), a stacked line's sum."""
    x, y = list(tr.get("x") or []), list(tr.get("y") or [])
    if tr.get("type") == "bar":
        horizontal = tr.get("orientation") == "h"
        base = tr.get("base")
        vals = x if horizontal else y
        if base is not None:
            bases = base if isinstance(base, (list, tuple)) else [base] * len(vals)
            vals = [None if v is None else b + v for b, v in zip(bases, vals)]
        return (vals, y) if horizontal else (x, vals)
    group = tr.get("stackgroup")
    if group:
        key = (group, tr.get("xaxis"), tr.get("yaxis"))
        below = stacks.setdefault(key, [0.0] * len(y))
        y = [b + (v or 0.0) for b, v in zip(below, y)]
        stacks[key] = y
    return x, y


def marks_outside(fig) -> list[str]:
    """Every place where a mark lies outside its axes (or, in a figure with frames, an axis is not fixed), in
    every state: ``[]`` when every trace of the figure and of each frame lies inside the ranges that state
    shows. A figure without frames may autorange an axis (plotly fits it to the data once)."""
    base = fig.layout.to_plotly_json()
    states = [("as first drawn", [t.to_plotly_json() for t in fig.data], {})]
    states += [(f"frame {f.name!r}", [t.to_plotly_json() for t in f.data],
                f.layout.to_plotly_json() if f.layout else {}) for f in fig.frames]
    out = []
    frame_layouts = [lay for _, _, lay in states[1:]]
    for name in {k for lay in frame_layouts for k in lay if k[1:5] == "axis"}:
        setters = [("range" in lay.get(name, {})) for lay in frame_layouts]
        if any(setters) and not all(setters):
            out.append(f"{name}: some frames set its range and others keep the last one")
    for label, traces, lay in states:
        stacks: dict = {}
        for i, tr in enumerate(traces):
            xs, ys = _trace_values(tr, stacks)
            for letter, vals in (("x", xs), ("y", ys)):
                ax = _axis_name(tr.get(f"{letter}axis"), letter)
                out += _check_axis(f"{label}, trace {i} {tr.get('name')!r}, {ax}", _lookup(base, lay, ax), vals,
                                   fixed=bool(fig.frames))
    return out
