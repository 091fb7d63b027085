"""Estimated against measured on this machine: profile, search, run Galvatron's plan and the baselines.

    python benchmarks/bench_runtime.py                      # CPU, gloo, 2 ranks, small GPT
    python benchmarks/bench_runtime.py --world-size 4 --d-model 128 --n-layer 4
    python benchmarks/bench_runtime.py --device cuda --world-size 8 --d-model 1024 --n-layer 8   # NCCL

Prints one row per strategy (times in ms, measured = slowest rank's median iteration) and the median absolute
error with and without the overlap slowdown. ``--save`` writes the measured profile to data/galvatron/.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    from lib.galvatron.runtime.profiler import write_profile
    from lib.galvatron.search.profiles import DATA_DIR
    from lib.galvatron.runtime.evaluate import format_rows, profile_search_run
    from lib.galvatron.runtime.model import ModelConfig
    from lib.galvatron.runtime.sdp import SDP_IMPLS

    ap = argparse.ArgumentParser()
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--global-bsz", type=int, default=16)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="cuda: one GPU per rank, NCCL")
    ap.add_argument("--sdp-impl", default="auto", choices=SDP_IMPLS,
                    help="SDP by FSDP2's fully_shard or the hand-written fallback (auto: FSDP2 where it works)")
    ap.add_argument("--no-other", action="store_true", help="bare cost model: no measured non-layer time")
    ap.add_argument("--save", action="store_true", help="write the measured profile to data/galvatron/")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = ap.parse_args(argv)
    cfg = ModelConfig(d_model=a.d_model, n_layer=a.n_layer, n_head=a.n_head, seq_len=a.seq_len)
    res = profile_search_run(cfg, a.world_size, a.global_bsz, steps=a.steps, add_other=not a.no_other,
                             sdp_impl=a.sdp_impl, device=a.device, backend="nccl" if a.device == "cuda" else "gloo")
    c = res["cluster"]
    where = "cuda/nccl" if a.device == "cuda" else "cpu/gloo"
    print(f"measured on {where}, {a.world_size} ranks, model {cfg.to_dict()}, global batch {a.global_bsz}")
    print(f"profile: fwd {res['model'].layer_types[0].fwd_ms_per_sample:.4f} ms/sample/layer, all-reduce "
          f"{c.allreduce_ms_per_mb}, p2p {c.p2p_ms_per_mb:.3f} ms/MB, overlap slowdown {c.overlap_coe:.3f}, "
          f"non-layer {res['other_s'] * 1e3:.2f} ms/iter; machine drift during the runs x{res['drift']:.2f}")
    print(format_rows(res["rows"]))
    if a.save:
        print("wrote", write_profile(res["model"], c, DATA_DIR))
    if a.json:
        from lib import atomic

        atomic.write_json(a.json, res["rows"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
