"""The per-layer strategy space of Galvatron as decision trees over DP, SDP, TP and PP.

A strategy for one layer is a tree: PP (if any) at the top, then an ordered sequence of distinct kinds from
{DP, SDP, TP}, outer to inner, each with a power-of-two degree >= 2, whose product with the PP degree is the
GPU count. The inner level occupies consecutive GPU ids (the fast links). Pruning forbids DP and SDP in one
tree. Activation checkpointing (CKPT, from Galvatron-BMW) is an optional extra bit that doubles the space.

Used in: book/galvatron/01_the_space.ipynb (and every later Galvatron chapter).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import comb

from lib.cli_errors import UserError

KINDS = ("dp", "sdp", "tp")
SPACES = ("full", "dp", "sdp", "tp", "pp", "dp+tp", "dp+pp", "3d")


def check_power_of_two(n_gpus: int, what: str = "n_gpus") -> int:
    """Return log2(n_gpus); raise :class:`UserError` (a ``ValueError``) unless n_gpus is a positive power of
    two: it checks a count a user gave (a flag, a plan's field)."""
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int) or n_gpus < 1 or n_gpus & (n_gpus - 1):
        raise UserError(f"{what} must be a power of two (1, 2, 4, 8, ...); got {n_gpus!r}")
    return n_gpus.bit_length() - 1


@dataclass(frozen=True)
class Strategy:
    """One layer's decision tree: ``pp`` plus ``levels`` = ((kind, degree), ...) from outer to inner."""

    pp: int
    levels: tuple = ()
    ckpt: bool = False

    def __post_init__(self):
        check_power_of_two(self.pp, "pp")
        kinds = [k for k, _ in self.levels]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"a kind may appear at one level only; got levels {self.levels}")
        for k, d in self.levels:
            if k not in KINDS:
                raise ValueError(f"level kind must be one of {KINDS}; got {k!r}")
            if check_power_of_two(d, f"degree of {k}") < 1:
                raise ValueError(f"every level needs degree >= 2; got {k}{d}")

    # --- degrees -----------------------------------------------------------------------------------
    def degree(self, kind: str) -> int:
        return dict(self.levels).get(kind, 1)

    @property
    def tp(self) -> int:
        return self.degree("tp")

    @property
    def dp(self) -> int:
        """Data-parallel degree (DP and SDP together)."""
        return self.degree("dp") * self.degree("sdp")

    @property
    def n_gpus(self) -> int:
        return self.pp * self.tp * self.dp

    @property
    def sdp(self) -> bool:
        """True if the data-parallel dimension is sharded (ZeRO-3 / FSDP)."""
        return self.degree("sdp") > 1

    @property
    def mixed_dp_sdp(self) -> bool:
        return self.degree("dp") > 1 and self.degree("sdp") > 1

    @property
    def tp_consec(self) -> bool:
        """True when TP groups sit on consecutive GPU ids (TP is the inner level); True if tp or dp is 1."""
        if self.tp == 1 or self.dp == 1:
            return True
        return self.levels[-1][0] == "tp"

    # --- names -------------------------------------------------------------------------------------
    @property
    def code(self) -> str:
        """The artifact's printed form ``pp-tp-dp``: ``*`` marks the consecutive dimension, ``f`` SDP."""
        tp, dp = str(self.tp), str(self.dp)
        if self.sdp:
            dp += "f"
        if self.tp > 1 and self.dp > 1:
            if self.tp_consec:
                tp += "*"
            else:
                dp += "*"
        return f"{self.pp}-{tp}-{dp}" + ("-c" if self.ckpt else "")

    @property
    def name(self) -> str:
        """Readable nested form, outer to inner, e.g. ``PP2 > SDP2 > TP2``."""
        parts = ([f"PP{self.pp}"] if self.pp > 1 else []) + [f"{k.upper()}{d}" for k, d in self.levels]
        return " > ".join(parts or ["single GPU"]) + (" +CKPT" if self.ckpt else "")

    def __str__(self) -> str:
        return self.name

    def tree(self) -> dict:
        """Nested dict view: each node is {"kind", "degree", "children"}; leaves are GPU ids."""
        levels = ([("pp", self.pp)] if self.pp > 1 else []) + list(self.levels)

        def build(li: int, first: int, size: int):
            if li == len(levels):
                return {"kind": "gpu", "degree": 1, "gpu": first, "children": []}
            kind, deg = levels[li]
            sub = size // deg
            return {"kind": kind, "degree": deg,
                    "children": [build(li + 1, first + j * sub, sub) for j in range(deg)]}

        return build(0, 0, self.n_gpus)

    def groups(self, kind: str) -> list[tuple[int, ...]]:
        """GPU-id groups that communicate for ``kind`` (e.g. the TP groups), for a stage-major layout."""
        levels = ([("pp", self.pp)] if self.pp > 1 else []) + list(self.levels)
        if kind not in dict(levels):
            return []
        stride = 1
        for k, d in reversed(levels):
            if k == kind:
                deg = d
                break
            stride *= d
        out = []
        for base in range(self.n_gpus):
            if (base // stride) % deg == 0:
                out.append(tuple(base + j * stride for j in range(deg)))
        return out

    def to_dict(self) -> dict:
        return {"pp": self.pp, "levels": [[k, d] for k, d in self.levels], "ckpt": self.ckpt}

    @classmethod
    def from_dict(cls, d: dict) -> "Strategy":
        return cls(int(d["pp"]), tuple((str(k), int(v)) for k, v in d["levels"]), bool(d.get("ckpt", False)))

    @classmethod
    def from_shape(cls, pp: int, tp: int, dp: int, sdp: bool = False, tp_consec: bool = True,
                   ckpt: bool = False) -> "Strategy":
        """Build from the artifact's encoding ``[pp, tp, dp, {tp: consec, fsdp: sdp}]``."""
        dkind = "sdp" if sdp else "dp"
        levels = []
        if tp > 1 and dp > 1:
            levels = [(dkind, dp), ("tp", tp)] if tp_consec else [("tp", tp), (dkind, dp)]
        elif tp > 1:
            levels = [("tp", tp)]
        elif dp > 1:
            levels = [(dkind, dp)]
        return cls(pp, tuple(levels), ckpt)


def _compositions(m: int, k: int):
    """Ordered ways to split m factors of two into k positive parts."""
    for cuts in itertools.combinations(range(1, m), k - 1):
        bounds = (0,) + cuts + (m,)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(k))


def _subtrees(m: int, pruned: bool):
    if m == 0:
        yield ()
        return
    for k in (1, 2, 3):
        for kinds in itertools.permutations(KINDS, k):
            if pruned and "dp" in kinds and "sdp" in kinds:
                continue
            for parts in _compositions(m, k):
                yield tuple((kd, 2 ** p) for kd, p in zip(kinds, parts))


def _artifact_order(s: Strategy):
    return (s.pp, s.tp, s.mixed_dp_sdp, s.sdp, s.tp_consec, s.levels, s.ckpt)


def generate(n_gpus: int, pruned: bool = True, ckpt: bool = False, space: str = "full",
             max_tp: int | None = None, max_pp: int | None = None) -> list[Strategy]:
    """All strategies for ``n_gpus`` GPUs, in the artifact's order (pp, tp, DP before SDP, strided first).

    ``ckpt=True`` adds a checkpointed twin of every strategy; ``space`` restricts to a baseline (see
    ``restrict``). Used in: 01_the_space, 03_the_search.
    """
    n = check_power_of_two(n_gpus)
    out = []
    for p in range(n + 1):
        for levels in _subtrees(n - p, pruned):
            for c in ((False, True) if ckpt else (False,)):
                out.append(Strategy(2 ** p, levels, c))
    out.sort(key=_artifact_order)
    if max_tp is not None:
        out = [s for s in out if s.tp <= max_tp]
    if max_pp is not None:
        out = [s for s in out if s.pp <= max_pp]
    return restrict(out, space)


def restrict(strategies: list[Strategy], space: str) -> list[Strategy]:
    """Keep the strategies of a baseline space: 'dp', 'sdp', 'tp', 'pp' (one pure kind each), 'dp+tp'
    (Megatron: consecutive TP, DP outside), 'dp+pp' (DeepSpeed-style), '3d' (PP x DP x TP, no SDP) or 'full'."""
    if space not in SPACES:
        raise ValueError(f"space must be one of {SPACES}; got {space!r}")
    if not strategies or space == "full":
        return list(strategies)
    n = strategies[0].n_gpus
    keep = {
        "dp": lambda s: s.pp == 1 and s.tp == 1 and not s.sdp and s.dp == n,
        "sdp": lambda s: s.pp == 1 and s.tp == 1 and (s.sdp or n == 1) and s.dp == n,
        "tp": lambda s: s.tp == n,
        "pp": lambda s: s.pp == n,
        "dp+tp": lambda s: s.pp == 1 and not s.sdp and s.tp_consec,
        "dp+pp": lambda s: s.tp == 1 and not s.sdp,
        "3d": lambda s: not s.sdp and s.tp_consec,
    }[space]
    return [s for s in strategies if keep(s) and not s.mixed_dp_sdp]


def count_formula(n_gpus: int, pruned: bool = True) -> int:
    """Closed-form strategy count (spec section 1.3): pruned 2n^2+n+1, unpruned sum of f(m)."""
    n = check_power_of_two(n_gpus)
    if pruned:
        return 2 * n * n + n + 1

    def f(m):
        if m == 0:
            return 1
        return 3 * comb(m - 1, 0) + 6 * comb(m - 1, 1) + 6 * comb(m - 1, 2)

    return sum(f(n - p) for p in range(n + 1))


def ascii_tree(s: Strategy) -> str:
    """A text drawing of the tree, one line per group, GPU ids at the leaves."""
    lines = []

    def walk(node, depth):
        if node["kind"] == "gpu":
            return
        kids = node["children"]
        leaves = _leaves(node)
        lines.append("  " * depth + f"{node['kind'].upper()}{node['degree']}  GPUs {leaves}")
        for k in kids:
            walk(k, depth + 1)

    walk(s.tree(), 0)
    return "\n".join(lines) if lines else "GPU 0"


def _leaves(node) -> list[int]:
    if node["kind"] == "gpu":
        return [node["gpu"]]
    return [g for c in node["children"] for g in _leaves(c)]
