"""An independent re-implementation of the VLDB artifact's search, as a test oracle.

Written from the formulas of ``anonymous-cs-system/Galvatron`` (commit 2a09c265): ``utils/cost_model.py``
(``MemoryCostModel``, ``TimeCostModel_with_overlap``), ``utils/dp_utils.py`` (``DPAlg``, ``DpOnModel``) and the
per-model ``<model>/search_layerwise_hp.py`` (strategy list, ``comm_coe_dict``, ``optimal_chunk_func``,
constants, ``pp_stage_divide_greedy``, the batch loop). Nothing here imports ``lib.galvatron``: strategies are
the artifact's ``(pp, tp, dp, info)`` tuples, costs are computed case by case for the 8-GPU shapes as the
artifact does, and the DP is the artifact's capacity-style table over every memory level (1 MB bins, f = 0 at
the start, first index on ties), vectorised over the memory level with numpy but otherwise step for step.

The constants below are the artifact's own, to its digits (``data/galvatron`` rounds a few of them; the
exactness test compares our search on ``data/galvatron`` with this oracle on these).

Used in: tests/galvatron/search/test_artifact_exactness.py.
"""

from __future__ import annotations

import numpy as np

# The 22 strategies of the artifact's scripts, in their order: (pp, tp, dp, tp_consecutive or None, sdp)
STRATEGIES = [(1, 1, 8, None, 0), (1, 1, 8, None, 1)]
for _tp, _dp in ((2, 4), (4, 2)):
    STRATEGIES += [(1, _tp, _dp, 0, 0), (1, _tp, _dp, 1, 0), (1, _tp, _dp, 0, 1), (1, _tp, _dp, 1, 1)]
STRATEGIES += [(1, 8, 1, None, 0), (2, 1, 4, None, 0), (2, 1, 4, None, 1),
               (2, 2, 2, 0, 0), (2, 2, 2, 1, 0), (2, 2, 2, 0, 1), (2, 2, 2, 1, 1), (2, 4, 1, None, 0),
               (4, 1, 2, None, 0), (4, 1, 2, None, 1), (4, 2, 1, None, 0), (8, 1, 1, None, 0)]

COMM = {1: {"8": 0.21530878, "4_0": 0.220138889, "4_1": 0.226519097, "2_0": 0.271614583,
            "2_1": 0.277994792, "1": 0},
        2: {"4": 0.230750868, "2_0": 0.224153646, "2_1": 0.275195313, "1": 0},
        4: {"2": 0.264908854, "1": 0},
        8: {"1": 0}}


def code(s) -> str:
    """The artifact's printed form (``form_strategy``), e.g. ``1-2*-4f``."""
    pp, tp, dp, consec, sdp = s
    t, d = str(tp), str(dp) + ("f" if sdp else "")
    if consec is not None:
        if consec:
            t += "*"
        else:
            d += "*"
    return f"{pp}-{t}-{d}"


# ----------------------------------------------------------------------------- per-model constants
def _chunks_bert(b, s):
    if s[0] == 1:
        return 1
    if s[:3] in ((2, 4, 1), (4, 2, 1)):
        return b / 4
    return b / 2 if b < 6 else b / 8 + 2


def _chunks_vit(b, s):
    return 1 if b == 8 else 2


def _chunks_t5(b, s):
    if b == 2:
        return 1
    return 3 if s[0] == 8 else 2


def _layer(P, act, fwd, seq, hidden, eo, dec=False):
    return dict(P=P, act=act, fwd=fwd, seq=seq, hidden=hidden, eo=eo, dec=dec)


MODELS = {
    "bert-huge-32": dict(
        layers=[(_layer(76.98, {1: 94.07, 2: 52.475, 4: 31.754375, 8: 21.61171875}, 55 / 24, 512, 1280, 100), 32)],
        other_states=793, other_act=313, chunks=_chunks_bert, max_bsz=256),
    "vit-huge-32": dict(
        layers=[(_layer(76.98, {1: 20.27, 2: 12.12, 4: 7.97, 8: 5.93}, 18 / 24, 196, 1280, 0), 32)],
        other_states=45.56, other_act=13, chunks=_chunks_vit, max_bsz=1024),
    "t5-large-48": dict(
        layers=[(_layer(48.01, {1: 91.003, 2: 54.004, 4: 32.785, 8: 22.8175}, 35 / 24, 512, 1024, 60), 24),
                (_layer(64.012, {1: 157.755, 2: 90.756, 4: 56.384, 8: 39.117}, 65 / 24, 512, 1024, 60, True), 24)],
        other_states=900, other_act=350, chunks=_chunks_t5, max_bsz=256),
}


# ----------------------------------------------------------------------------- the cost model
def memory(lay, model, s, B):
    """(layer MB, other MB) as the artifact's MemoryCostModel."""
    pp, tp, dp, _, sdp = s
    states = 4 * lay["P"] / tp
    if sdp:
        states *= 1 / dp + 0.025
    layer = states + lay["act"][tp] * B / dp
    other = model["other_states"] + model["other_act"] * (B / tp / dp) + 1024
    return layer, other


def _coes(s):
    pp, tp, dp, consec, _ = s
    c = COMM[pp]
    if tp == 1 or dp == 1:
        return c[str(dp)], c[str(tp)]
    if consec:
        return c[f"{dp}_0"], c[f"{tp}_1"]
    return c[f"{dp}_1"], c[f"{tp}_0"]


def layer_time(lay, model, s, B):
    """Seconds per layer, the artifact's TimeCostModel_with_overlap case by case (24-layer dummy model)."""
    pp, tp, dp, _, sdp = s
    kappa = 1.3
    dc, tc = _coes(s)
    bs = B / dp
    m = model["chunks"](bs, (pp, tp, dp))
    n = 24
    fct = lay["fwd"] * bs / tp * n
    bct = 2 * fct
    eo = lay["eo"]
    dp_msg = 2 * (dp - 1) / dp * (lay["P"] / tp) * n
    tp_msg = 2 * (tp - 1) / tp * (bs * lay["seq"] * lay["hidden"] * (6 if lay["dec"] else 4) * 4 / 1024 / 1024) * n

    def overlap(msg, bwd):
        """(overlapped part, the rest, whether the rest is communication)."""
        a, c = msg * dc * kappa, bwd * kappa
        if a > c:
            return c, (msg - c / (dc * kappa)) * dc, True
        if a < c:
            return a, bwd - a / kappa, False
        return c, 0.0, False

    def pipe(compute, comm):
        return compute * (pp + m - 1) / (pp * m) + comm

    shape = (pp, tp, dp)
    if shape == (1, 1, 8):
        o, r, _ = overlap(dp_msg, bct)
        t = fct + o + r + eo
    elif shape in ((1, 2, 4), (1, 4, 2)):
        if lay["dec"]:
            o, r, _ = overlap(dp_msg, bct * 2 / 3)
            t = fct + bct / 3 + o + r + tp_msg * tc + eo
        elif shape == (1, 2, 4):
            o, r, _ = overlap(dp_msg, bct)
            t = fct + o + r + tp_msg * tc + eo
        else:
            o, r, _ = overlap(dp_msg, bct / 2)
            t = fct + bct / 2 + o + r + tp_msg * tc + eo
    elif shape == (1, 8, 1):
        t = fct + bct + tp_msg * tc
    elif shape in ((2, 1, 4), (4, 1, 2)):
        o, r, rest_is_comm = overlap(dp_msg / pp, bct / pp)
        if rest_is_comm and not sdp:
            overall = fct + o * pp + r + eo
        else:
            overall = fct + (o + r) * pp + eo
        t = pipe(fct + bct, overall - fct - bct)
    elif shape == (2, 2, 2):
        o, r, _ = overlap(dp_msg, bct / 2)
        overall = fct + o + r + bct / 2 + tp_msg * tc + eo
        compute = fct + bct + tp_msg * tc
        t = pipe(compute, overall - compute)
    elif shape in ((2, 4, 1), (4, 2, 1)):
        t = pipe(fct + bct + tp_msg * tc, 0)
    elif shape == (8, 1, 1):
        t = pipe(fct + bct, 0)
    else:
        raise ValueError(f"no artifact case for shape {shape}")
    if sdp:
        t += dp_msg * 0.5 * dc
    return t * 0.0011 / n


def transitions(strats, B):
    """The artifact's inter-layer cost matrix [previous, next] in seconds (the same for every layer)."""
    S = len(strats)
    R = np.zeros((S, S))
    for i, a in enumerate(strats):
        for j, b in enumerate(strats):
            grow = b[1] > a[1]
            flip = a[3] is not None and b[3] is not None and b[1] == a[1] and b[3] != a[3]
            shrink = (a[3] is not None and b[3] is not None and a[1] * a[2] == 8 and a[1] == 4 and b[1] == 2
                      and b[3] != a[3])
            cost = 0.0
            if grow or flip or shrink:
                cost = (b[1] - 1) * (2 * B / b[2]) / b[1]
            if b[1] == 1 or b[2] == 1:
                coe = COMM[b[0]][str(b[1])]
            else:
                coe = COMM[b[0]][f"{b[1]}_{1 if b[3] else 0}"]
            cost *= coe * 0.001
            if i != j and a[:3] == b[:3] and a[3] == b[3] and a[4] != b[4] and a[4]:
                cost = 1e-4          # prefer not to go from SDP back to DP
            R[i, j] = cost
    return R


# ----------------------------------------------------------------------------- the DP
def dp(E, mem, time, R):
    """The artifact's DPAlg: f[v, s] over every v = 0..E; returns (cost, choice) or (inf, None).
    mem (L, S) whole MB, time (L, S) s, R (S, S) s (not paid entering the first layer)."""
    L, S = time.shape
    f = np.zeros((E + 1, S))
    mark = np.full((L, E + 1, S), -1, dtype=np.int16)
    for i in range(L):
        new = np.full((E + 1, S), np.inf)
        Ri = np.zeros((S, S)) if i == 0 else R
        for s in range(S):
            w = int(mem[i, s])
            if w > E:
                continue
            # candidates[v, s'] = f[v - w, s'] + R[s', s]
            cand = f[:E + 1 - w, :] + Ri[:, s][None, :]
            k = np.argmin(cand, axis=1)
            new[w:, s] = cand[np.arange(E + 1 - w), k] + time[i, s]
            mark[i, w:, s] = k
        f = new
    s = int(np.argmin(f[E]))
    best = float(f[E, s])
    if not np.isfinite(best):
        return np.inf, None
    choice, v = [s], E
    for i in range(L - 1, 0, -1):
        prev = int(mark[i, v, s])
        v -= int(mem[i, s])
        s = prev
        choice.append(s)
    return best, choice[::-1]


def _divide(model, pp, B, strats):
    """The artifact's pp_stage_divide_greedy (heterogeneous models)."""
    if pp == 1:
        return [sum(n for _, n in model["layers"])]
    mins = []
    for lay, n in model["layers"]:
        mins += [min(memory(lay, model, s, B)[0] for s in strats)] * n
    other = memory(model["layers"][0][0], model, (1, 1, 8, None, 0), B)[1]
    avg = (sum(mins) + other) / pp
    div, used, idx = [0] * pp, [other] + [0] * (pp - 1), len(mins) - 1
    for k in range(pp - 1, -1, -1):
        while idx >= 0:
            if k > 0 and avg - used[k] < 0.5 * mins[idx]:
                break
            used[k] += mins[idx]
            idx -= 1
            div[k] += 1
    if div[0] == 0:
        div[0] += 1
        div[1] -= 1
    return div


def fit(name, B, max_mem, strategies=STRATEGIES):
    """DpOnModel.fit: the best pipeline degree for one batch. Returns (cost s, pp, per-layer strategies)."""
    model = MODELS[name]
    best = (np.inf, -1, None)
    for pp in sorted({s[0] for s in strategies}):
        strats = [s for s in strategies if s[0] == pp]
        R = transitions(strats, B)
        per_type = []
        for lay, n in model["layers"]:
            t = [layer_time(lay, model, s, B) for s in strats]
            mo = [memory(lay, model, s, B) for s in strats]
            per_type.append((n, t, [int(np.ceil(x[0])) for x in mo], int(np.ceil(mo[0][1]))))
        other = per_type[-1][3]
        time = np.array([t for n, t, _, _ in per_type for _ in range(n)])
        mem = np.array([m for n, _, m, _ in per_type for _ in range(n)])
        if max_mem - other <= 0:
            continue
        if len(model["layers"]) == 1:
            Ls = time.shape[0] // pp
            cost, ch = dp(max_mem - other, mem[:Ls], time[:Ls], R)
            if ch is None:
                continue
            cost, plan = cost * pp, [strats[c] for c in ch] * pp
        else:
            div = _divide(model, pp, B, strats)
            cost, plan, start = 0.0, [], 0
            for k, n in enumerate(div):
                E = max_mem - other if k == 0 else max_mem
                c, ch = dp(E, mem[start:start + n], time[start:start + n], R)
                if ch is None:
                    cost = np.inf
                    break
                cost += c
                plan += [strats[j] for j in ch]
                start += n
            if not np.isfinite(cost):
                continue
        if cost < best[0]:
            best = (cost, pp, plan)
    return best


def search(name, max_mem_mb, strategies=STRATEGIES):
    """The script's ``search(max_mem)``: batches 8, 16, ... until none fits; the best throughput wins (first
    on ties). Returns dict(throughput, global_bsz, pp, plan codes, chunks)."""
    model = MODELS[name]
    best = None
    for B in range(8, model["max_bsz"], 8):
        cost, pp, plan = fit(name, B, max_mem_mb, strategies)
        if plan is None:
            break
        thr = B / cost
        if best is None or thr > best["throughput"]:
            chunks = max(int(model["chunks"](B // s[2], s[:3])) for s in plan) if pp > 1 else 1
            best = dict(throughput=thr, global_bsz=B, pp=pp, plan=[code(s) for s in plan], chunks=chunks)
    return best
