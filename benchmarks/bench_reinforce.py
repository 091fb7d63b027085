"""How long a full experiment-A run takes on the simulator: 250 updates x 8 samples, 13 co-location groups.

The issue's bound: at most 60 s on one core. Run: ``python benchmarks/bench_reinforce.py`` (add ``--nodes`` to
also time the 40-node run of chapter 2). Prints a table; exits 1 when a run is over the bound. Then prints PPO's
time per update beside REINFORCE's on the same run (``--ppo-iters`` updates each; no bound).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

BOUND_S = 60.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-iters", type=int, default=250)
    ap.add_argument("--nodes", action="store_true", help="also time the 40-node (no co-location) run")
    ap.add_argument("--ppo-iters", type=int, default=50, help="updates for the PPO-beside-REINFORCE timing")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    from lib.placement.experiment import EnvSpec, train_run
    from lib.placement.reinforce import TrainConfig

    rows = []
    # noise off (identical placements are looked up, as train_run does) and on (every sample simulated, as in
    # the chapters, which train with timing noise)
    cases = [(True, False), (True, True)] + ([(False, False)] if a.nodes else [])
    for colocate, noise in cases:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            res = train_run(EnvSpec(noise=noise), TrainConfig(n_iters=a.n_iters), colocate=colocate, out_dir=d,
                            progress=False)
            wall = time.perf_counter() - t0
            size = os.path.getsize(res.path)
        rows.append((("13 groups" if colocate else "40 nodes"), "on" if noise else "off", res.n_updates, wall, size,
                     res.top[0][1]))
    print(f"{'placing':<10} {'noise':>5} {'updates':>7} {'wall (s)':>9} {'ms/update':>10} {'log (kB)':>9} "
          f"{'best (ms, simulated)':>21} {'bound':>6}")
    ok = True
    for name, noise, n, wall, size, best in rows:
        within = wall <= BOUND_S * n / 250
        ok &= within
        print(f"{name:<10} {noise:>5} {n:>7} {wall:>9.1f} {wall / n * 1e3:>10.1f} {size / 1e3:>9.0f} "
              f"{best * 1e3:>21.1f} {'ok' if within else 'OVER':>6}")
    print(f"(torch threads: {torch.get_num_threads()}; K = 8; simulator 4xT4-pcie, GPT 49m; bound {BOUND_S:.0f} s)")
    # PPO beside REINFORCE (chapter 4): the same run, 13 groups, noise on; PPO's epochs re-score the batch
    per = {}
    for algo in ("reinforce", "ppo"):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            res = train_run(EnvSpec(noise=True), TrainConfig(n_iters=a.ppo_iters, algorithm=algo), out_dir=d,
                            progress=False)
            per[algo] = (time.perf_counter() - t0) / res.n_updates
    epochs = TrainConfig(algorithm="ppo").ppo_epochs
    print(f"time per update over {a.ppo_iters} updates (13 groups, noise on): REINFORCE {per['reinforce'] * 1e3:.1f} ms, "
          f"PPO ({epochs} epochs) {per['ppo'] * 1e3:.1f} ms ({per['ppo'] / per['reinforce']:.2f}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
