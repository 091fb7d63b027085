"""The rank grid of a layer-wise hybrid plan, and the pool of process groups derived from it once.

World ranks are split into ``pp`` pipeline stages of ``S = world/pp`` consecutive ranks. Inside a stage, a
layer with strategy (tp, dp, consecutive) puts rank ``j`` (its index in the stage) at

* TP inner (``consecutive=True``):  ``tp_rank = j % tp``,  ``dp_rank = j // tp``;
* DP inner (``consecutive=False``): ``dp_rank = j % dp``,  ``tp_rank = j // dp``.

A micro-batch of ``mb`` samples is cut into ``S`` equal *atoms*, and stage index ``j`` alone holds atom ``j`` in
the finest split (embedding, head, stage boundaries). DP rank ``r`` of a layer with ``dp`` DP ranks holds
atoms ``r*S/dp .. (r+1)*S/dp - 1`` when TP is inner, and the strided atoms ``r, r+dp, r+2dp, ...`` when DP is
inner: either way every rank's own atom is among them, so going to a finer data split is a local slice. Every group a plan could use is created up front (the paper's global
group pool), so nothing is created mid-iteration. Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """Where a tensor lives inside one stage: ``tp`` x ``dp`` = stage size, ``consecutive`` = TP inner."""

    tp: int
    dp: int
    consecutive: bool = True

    def __post_init__(self):
        if self.tp < 1 or self.dp < 1:
            raise ValueError(f"tp and dp must be >= 1; got tp={self.tp}, dp={self.dp}")
        if self.tp == 1 or self.dp == 1:  # the flag means nothing with a single level
            object.__setattr__(self, "consecutive", True)

    @property
    def size(self) -> int:
        return self.tp * self.dp

    def tp_rank(self, j: int) -> int:
        return j % self.tp if self.consecutive else j // self.dp

    def dp_rank(self, j: int) -> int:
        return j // self.tp if self.consecutive else j % self.dp

    def atoms(self, j: int) -> tuple[int, ...]:
        """The micro-batch atoms stage index ``j`` holds, in the order of its local rows."""
        r = self.dp_rank(j)
        if self.consecutive:
            per = self.size // self.dp
            return tuple(range(r * per, (r + 1) * per))
        return tuple(range(r, self.size, self.dp))

    def tp_group(self, j: int) -> tuple[int, ...]:
        """Stage indices sharing ``j``'s samples (same dp rank), in tp-rank order."""
        return tuple(k for k in range(self.size) if self.dp_rank(k) == self.dp_rank(j))

    def dp_group(self, j: int) -> tuple[int, ...]:
        """Stage indices holding the same parameter shard as ``j`` (same tp rank), in dp-rank order."""
        return tuple(k for k in range(self.size) if self.tp_rank(k) == self.tp_rank(j))

    def tp_groups(self) -> list[tuple[int, ...]]:
        return sorted({self.tp_group(j) for j in range(self.size)})

    def dp_groups(self) -> list[tuple[int, ...]]:
        return sorted({self.dp_group(j) for j in range(self.size)})


def atoms_layout(stage_size: int) -> Layout:
    """The finest data layout: every rank of the stage holds its own atom (embedding, head, stage boundary)."""
    return Layout(1, stage_size, True)


def all_layouts(stage_size: int) -> list[Layout]:
    """Every (tp, dp, consecutive) a stage of ``stage_size`` ranks can use (powers of two)."""
    out = []
    tp = 1
    while tp <= stage_size:
        for c in (True, False):
            lay = Layout(tp, stage_size // tp, c)
            if lay not in out:
                out.append(lay)
        tp *= 2
    return out


@dataclass(frozen=True)
class RankGrid:
    """``world`` ranks in ``pp`` stages; knows the stage and stage index of every rank."""

    world: int
    pp: int

    def __post_init__(self):
        if self.pp < 1 or self.world % self.pp:
            raise ValueError(f"pp={self.pp} must be >= 1 and divide the world size {self.world}")

    @property
    def stage_size(self) -> int:
        return self.world // self.pp

    def stage_of(self, rank: int) -> int:
        return rank // self.stage_size

    def index_in_stage(self, rank: int) -> int:
        return rank % self.stage_size

    def global_rank(self, stage: int, j: int) -> int:
        return stage * self.stage_size + j


class GroupPool:
    """All process groups of a plan's grid, created collectively once; looked up by stage-local members.

    Every rank must construct the pool (``torch.distributed.new_group`` is collective over the world). A group
    of one rank is represented by ``None`` and callers skip the collective. ``timeout_s``: every group's
    collective timeout (``new_group`` would otherwise take torch's 30-minute default, not the world group's,
    so a stopped peer would hang a layer's all-reduce for half an hour).
    """

    def __init__(self, grid: RankGrid, rank: int, layouts=None, timeout_s: float | None = None):
        import datetime

        import torch.distributed as dist

        self.grid, self.rank = grid, rank
        self.stage = grid.stage_of(rank)
        self.j = grid.index_in_stage(rank)
        self._groups: dict[tuple[int, tuple[int, ...]], object] = {}
        S = grid.stage_size
        member_sets: list[tuple[int, ...]] = [tuple(range(S))]
        for lay in (layouts if layouts is not None else all_layouts(S)):
            member_sets += lay.tp_groups() + lay.dp_groups()
        seen = []
        for m in member_sets:
            if len(m) > 1 and m not in seen:
                seen.append(m)
        # Same order on every rank: stage-major, then the member list.
        for stage in range(grid.pp):
            for m in seen:
                ranks = [grid.global_rank(stage, k) for k in m]
                g = dist.new_group(ranks=ranks, timeout=None if timeout_s is None else
                                   datetime.timedelta(seconds=timeout_s))
                if rank in ranks:
                    self._groups[(stage, m)] = g
        self.stage_members = tuple(range(S))

    def get(self, members: tuple[int, ...]):
        """The process group of stage-local ``members`` in this rank's stage (``None`` for one rank)."""
        if len(members) <= 1:
            return None
        if self.j not in members:
            raise ValueError(f"rank {self.rank} (stage index {self.j}) is not in group {members}")
        return self._groups[(self.stage, tuple(members))]

    def stage_group(self):
        return self.get(self.stage_members)
