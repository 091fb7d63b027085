"""The bounds of one straggler setting (GPUs, checkpoint interval, backups, days, seed, per-GPU MTBF), checked
once for every tool that takes them: the command line (``cli.py``, by flag) and the widget's settings
(``widgets.StragglerSettings``, by field). A value outside is one :class:`lib.cli_errors.UserError` naming the
flag or field, the value and what is allowed, with why. Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

from lib.cli_errors import check_float, check_int

#: Upper bounds, with why: the exact step model's cost grows with the GPU count (10^7 is 100x the largest
#: clusters and about a second), the simulation steps once per failure (a year is at most ~10^5 per row).
MAX_GPUS, MAX_DAYS = 10_000_000, 365.0
MAX_INTERVAL_MIN = 1e9
MIN_MTBF_GPU_H, MAX_MTBF_GPU_H = 1.0, 1e9
SEED_MAX = 2**32 - 1


def check_setting(name: str, value, what: str | None = None):
    """``value`` of setting ``name`` (``n_gpus``, ``interval_min``, ``backup_pct``, ``days``, ``seed``,
    ``mtbf_gpu_h``) within its bounds; a :class:`UserError` naming ``what`` (a flag; default: ``name``)."""
    what = what or name
    if name == "n_gpus":
        return check_int(what, value, 1, MAX_GPUS, "100x the largest clusters; the step model's cost grows with it")
    if name == "interval_min":
        return check_float(what, value, 0, MAX_INTERVAL_MIN, lo_open=True, why="minutes between checkpoints")
    if name == "backup_pct":
        return check_float(what, value, 0, 100, why="a percentage of the cluster; more only adds cost")
    if name == "days":
        return check_float(what, value, 0, MAX_DAYS, lo_open=True,
                           why="a year at most: the simulation steps once per failure")
    if name == "seed":
        return check_int(what, value, 0, SEED_MAX, "a 32-bit seed")
    if name == "mtbf_gpu_h":
        return check_float(what, value, MIN_MTBF_GPU_H, MAX_MTBF_GPU_H,
                           why="hours between failures of one GPU; Llama 3 measured 50677")
    raise KeyError(f"no straggler setting {name!r}")
