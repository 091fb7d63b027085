"""Pipeline schedules: GPipe, 1F1B and interleaved 1F1B, their bubble, what they keep in flight, and their
point-to-point sends.

With ``pp`` stages, ``m`` micro-batches per step and per-micro-batch stage times ``t_i`` (forward + backward):

- **GPipe** (Huang et al. 2019): all forwards, then all backwards. Step ``sum(t_i) + (m - 1) max(t_i)``
  (bubble ``(pp - 1)/m`` of the ideal for equal stages); every stage keeps all ``m`` micro-batches'
  activations.
- **1F1B** (Narayanan et al. 2019, PipeDream-Flush): the same bubble, but stage ``r`` (0-based) keeps at most
  ``min(m, pp - r)`` micro-batches: stage 0 holds ``pp``.
- **Interleaved 1F1B** with ``vp`` model chunks per stage (Narayanan et al. 2021): bubble ``(pp - 1)/(vp m)``;
  stage ``r`` runs ``2 (pp - r - 1) + (vp - 1) pp`` warm-up chunks (Megatron-LM's count), so it holds that +
  1 chunk-micro-batches of ``L_r / vp`` layers each, at most ``vp m``: stage 0 holds about
  ``pp (1 + (pp - 1)/(pp vp))`` micro-batches of its layers. It sends ``vp`` times as often.

Uneven stages and chunks (``chunked_step_s``): with stage ``r``'s chunks taking ``t_{r,c}`` per micro-batch
(forward + backward; a stage's chunks may differ, as in Llama 3's layout where the first chunk of the first
stage holds only the embedding and the last chunk of the last stage only the output head), the step is
``m max_r T_r + sum_{r != r*} max_c t_{r,c}``: the slowest stage ``r*`` (``T_r = sum_c t_{r,c}``) is busy
``m T_r*``, and the fill and drain pass one chunk of every other stage, the slowest of each. With equal
chunks it is ``step_s``'s formula; with ``vp = 1`` it is ``step_s``'s too. It is a model, not an exact
schedule: against the event simulation of ``lib/galvatron/practice_figures.py`` it is exact where one
chunk makes its stage the slowest and within a few per cent where chunks differ by up to 20%
(``tests/galvatron/search/test_uneven_interleaving.py``).

Point-to-point: one send of the boundary activation per micro-batch per stage boundary forward and one back
(``vp`` times that interleaved). Under GPipe and 1F1B they wait on the critical path (``2 t_send`` per
micro-batch per stage); the interleaved schedule overlaps its sends with the next chunk's compute, leaving
the ``2 (pp - 1)`` sends of the ramp exposed. The previous rule (``cost.py``'s ``p2p_ms``) charged a send on
every layer, times ``pp``, never overlapped. Used in: ``cost.py`` (``step_estimate``).
"""

from __future__ import annotations

SCHEDULES = ("gpipe", "1f1b", "interleaved")


def _check(schedule, pp, m, vp=1):
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}; got {schedule!r}")
    if pp < 1 or m < 1 or vp < 1:
        raise ValueError(f"pp, micro-batches and vp must be >= 1; got pp={pp!r}, m={m!r}, vp={vp!r}")
    if schedule != "interleaved" and vp != 1:
        raise ValueError(f"vp={vp} needs the interleaved schedule; {schedule} has one chunk per stage")


def bubble_fraction(schedule: str, pp: int, m: int, vp: int = 1) -> float:
    """Idle time over ideal compute time for equal stages: (pp - 1)/m, or (pp - 1)/(vp m) interleaved."""
    _check(schedule, pp, m, vp)
    return (pp - 1) / (m * vp)


def step_s(schedule: str, stage_s, m: int, vp: int = 1) -> float:
    """Pipeline time of one step from per-micro-batch stage times (forward + backward of all of a stage's
    layers): ``m max(t) + (sum(t) - max(t)) / vp``; equal stages give ``(m + (pp - 1)/vp) t``."""
    ts = list(stage_s)
    _check(schedule, len(ts), m, vp)
    top = max(ts)
    return m * top + (sum(ts) - top) / vp


def chunked_step_s(schedule: str, chunk_s, m: int) -> float:
    """Pipeline time of one step from each stage's list of per-chunk, per-micro-batch times (forward +
    backward; ``vp`` = the lists' common length): ``m max_r T_r + sum over the other stages of their slowest
    chunk`` (see the module docstring)."""
    rows = [list(map(float, r)) for r in chunk_s]
    vp = len(rows[0]) if rows else 0
    if not rows or vp < 1 or any(len(r) != vp for r in rows):
        raise ValueError(f"chunk_s must be pp lists of vp >= 1 chunk times each; got {chunk_s!r}")
    if any(t < 0 for r in rows for t in r):
        raise ValueError(f"chunk_s must hold times >= 0; got {chunk_s!r}")
    _check(schedule, len(rows), m, vp)
    if schedule == "gpipe":
        return step_s(schedule, [sum(r) for r in rows], m)
    totals = [sum(r) for r in rows]
    slowest = totals.index(max(totals))
    return m * totals[slowest] + sum(max(r) for i, r in enumerate(rows) if i != slowest)


def in_flight(schedule: str, pp: int, m: int, stage: int, vp: int = 1) -> float:
    """Micro-batches whose activations stage ``stage`` holds at its peak, in units of a micro-batch of all its
    layers (fractional when interleaved: chunks are 1/vp of the stage)."""
    _check(schedule, pp, m, vp)
    if not 0 <= stage < pp:
        raise ValueError(f"stage must be in [0, {pp}); got {stage!r}")
    if schedule == "gpipe":
        return float(m)
    if schedule == "1f1b":
        return float(min(m, pp - stage))
    chunks = min(vp * m, 2 * (pp - stage - 1) + (vp - 1) * pp + 1)
    return chunks / vp


def layers_in_flight(schedule: str, chunk_layers_row, pp: int, m: int, stage: int) -> float:
    """Layer-micro-batches whose activations stage ``stage`` holds when its warm-up ends (its peak), from its
    chunks' layer counts: the first ``k`` forwards (``in_flight``'s count in chunks) run chunk
    ``(i // pp) mod vp`` (Megatron-LM's order: ``pp`` micro-batches per chunk in turn), so it holds the sum of
    their layers. Equal chunks give ``in_flight x`` the stage's layers; an empty first chunk (the embedding's)
    holds nothing."""
    row = list(chunk_layers_row)
    vp = len(row)
    if schedule != "interleaved":
        return in_flight(schedule, pp, m, stage, vp) * sum(row)
    k = round(in_flight(schedule, pp, m, stage, vp) * vp)
    return float(sum(row[(i // pp) % vp] for i in range(k)))


def exposed_p2p_s(schedule: str, pp: int, m: int, send_s: float, vp: int = 1, overlap: bool = True) -> float:
    """Time the pipeline's sends add to a step: ``2 m send_s`` per stage on the critical path of GPipe and
    1F1B; interleaved with ``overlap`` only the ramp's ``2 (pp - 1)`` sends."""
    _check(schedule, pp, m, vp)
    if pp == 1:
        return 0.0
    if schedule == "interleaved" and overlap:
        return 2 * (pp - 1) * send_s
    return 2 * (m + pp - 1) * send_s * vp


def layerwise_gpipe_s(stage_s, m: int) -> float:
    """The layer-wise model's pipeline time, without pipeline schedules: GPipe's bubble (pp + m - 1)/(pp m)
    charged on every layer's time (``cost.layer_time_terms``), so the step is ``(m + pp - 1)`` times the
    *average* stage's per-micro-batch time; equal stages give ``step_s("gpipe", ...)``, uneven ones (layers
    not divisible by pp) less than its slowest-stage ``m max(t) + sum(others)``."""
    ts = list(stage_s)
    _check("gpipe", len(ts), m, 1)
    return (m + len(ts) - 1) * sum(ts) / len(ts)
