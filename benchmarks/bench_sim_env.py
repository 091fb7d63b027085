"""How many placements per second the simulator times on one core.

The issue's bounds for the 49m GPT on ``4xT4-pcie``: at least 1,000 placements/s with ``n_micro=1`` and 250/s
with ``n_micro=4``. Placements are uniformly random (no memory cap, so every one is simulated in full, never
cut short by an out-of-memory answer). Run: ``python benchmarks/bench_sim_env.py [--n 3000]``. Prints a table;
exits 1 when a row is under its bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

BOUNDS = {("49m", 1, False): 1000.0, ("49m", 4, False): 250.0}


def rate(env, placements) -> float:
    """Placements per second: the best of three passes over ``placements`` (less disturbed by other work)."""
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for p in placements:
            env.measure(p)
        best = max(best, len(placements) / (time.perf_counter() - t0))
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="placements per pass")
    ap.add_argument("--profile", default="4xT4-pcie")
    a = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the bound says
    from lib.placement.sim_env import NoiseModel, SimPlacementEnv

    rng = np.random.default_rng(0)
    rows, ok = [], True
    for preset, n_micro, noise in (("49m", 1, False), ("49m", 4, False), ("49m", 1, True), ("163m", 1, False)):
        env = SimPlacementEnv(preset, a.profile, n_micro=n_micro, noise=NoiseModel() if noise else None, seed=0)
        placements = rng.integers(0, env.n_devices, (a.n, env.n_nodes)).tolist()
        r = rate(env, placements)
        bound = BOUNDS.get((preset, n_micro, noise))
        within = bound is None or r >= bound
        ok &= within
        rows.append((preset, env.n_nodes, n_micro, "on" if noise else "off", r, bound, within))
    print(f"{'preset':<7} {'nodes':>5} {'n_micro':>7} {'noise':>5} {'placements/s':>13} {'us/placement':>13} {'bound':>7}")
    for preset, nodes, m, noise, r, bound, within in rows:
        b = "-" if bound is None else f"{bound:.0f} {'ok' if within else 'LOW'}"
        print(f"{preset:<7} {nodes:>5} {m:>7} {noise:>5} {r:>13,.0f} {1e6 / r:>13.0f} {b:>7}")
    print(f"(simulated with hardware profile {a.profile}; one core; {a.n} random placements per pass, best of 3)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
