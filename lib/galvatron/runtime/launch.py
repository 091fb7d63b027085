"""Run a plan's job on ranks: local CPU ranks with gloo (``spawn_local``), or this rank under ``torchrun``
(``run_rank``). A job is a plain dict (``jobs``: ``"train"``, ``"check"``, ``"fail_rank"``); starting the
processes, the deadline and the exit codes are ``processes``' part. Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

from .jobs import precheck, run_job
from .processes import spawn_ranks, torchrun_rank


def spawn_local(job: dict, world_size: int, timeout_s: float = 120.0) -> list[dict]:
    """Run ``job`` on ``world_size`` local ranks (gloo, 127.0.0.1); every rank's result, in rank order.

    A bad plan fails on every rank before any collective (``ValueError``); a failing or hanging rank is a
    ``RuntimeError`` naming it and every exit code."""
    return spawn_ranks(run_job, job, world_size, timeout_s, precheck=precheck)


def run_rank(job: dict, gather: bool = False):
    """This rank's part of ``job`` under ``torchrun``; with ``gather``, every rank returns all ranks' results."""
    return torchrun_rank(run_job, job, gather, precheck=precheck)
