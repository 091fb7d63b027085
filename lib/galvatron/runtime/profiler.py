"""Measure, on this backend and these devices, every constant the cost model needs, and write it as data.

* per layer: forward ms per sample (tp = 1, timed at the per-rank sample count a run will use; stored as
  one third of forward+backward with autograd on, since the cost model charges backward = 2 x forward and
  a CPU backward is not), parameter MB,
  and activation MB per sample for each TP degree (bytes autograd saves for backward, counted exactly with
  saved-tensor hooks on the TP shard, the weights left out: they are model states);
* outside the layers: the activation MB per sample that embedding, head and loss save, counted the same way;
* per group: all-reduce ms per MB of ring volume (2(n-1)/n x message) for every (pp, size, consecutive) group;
* point-to-point ms per MB between pipeline neighbours;
* the overlap slowdown: backward compute and a gradient all-reduce, each timed alone and then together.

The result is a ``ModelProfile`` and a ``ClusterProfile`` (``lib.galvatron.search.profiles``) written as JSON, so
the search reads a measured profile exactly like a published one (spec §6: no pasted constants).
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from lib import atomic

from .grid import GroupPool, Layout, RankGrid
from .model import ModelConfig, block_forward, embed_forward, head_loss_sum, init_params, tp_shard
from .processes import spawn_ranks


def _sync_cuda(stream_only: bool = False) -> None:
    """Wait for the GPU (all streams, or only the current one) so that host clocks measure finished work."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        if stream_only:
            torch.cuda.current_stream().synchronize()
        else:
            torch.cuda.synchronize()


def _best_time_s(fn, reps: int, stat: str = "median") -> float:
    """``stat`` (median or min) of ``reps`` timed calls after one warm-up, in seconds. The profile and the
    runtime use the same statistic so that both see the same (shared, drifting) machine."""
    fn()
    ts = []
    for _ in range(reps):
        _sync_cuda()
        t0 = time.perf_counter()
        fn()
        _sync_cuda()
        ts.append(time.perf_counter() - t0)
    return min(ts) if stat == "min" else statistics.median(ts)


def saved_bytes(fn, exclude=()) -> int:
    """Bytes of the tensors autograd saves while running ``fn`` (distinct storages counted once), leaving out
    the storages of ``exclude`` (the weights: ``F.linear`` saves its weight for backward, but a weight is a
    model state, not an activation, and does not grow with the batch)."""
    seen = {(t.untyped_storage().data_ptr(), t.dtype) for t in exclude}
    total = [0]

    def pack(t):
        key = (t.untyped_storage().data_ptr(), t.dtype)
        if key not in seen:
            seen.add(key)
            total[0] += t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total[0]


def measure_layer(cfg: ModelConfig, batch: int, tp_degrees=(1, 2, 4, 8), reps: int = 20, seed: int = 0,
                  device: str = "cpu") -> dict:
    """One block of ``cfg`` on this process: forward ms per sample at ``batch`` samples, parameter MB and
    activation MB per sample for each TP degree that divides the head count."""
    gen = torch.Generator().manual_seed(seed)
    full = {k: v.to(device) for k, v in init_params(cfg, seed)["blocks"][0].items()}
    x = torch.randn(batch, cfg.seq_len, cfg.d_model, generator=gen).to(device)
    p1 = {k: v.clone().requires_grad_() for k, v in full.items()}
    xg = x.clone().requires_grad_()
    with torch.no_grad():
        fwd_only_s = _best_time_s(lambda: block_forward(x, p1, cfg.n_head), reps)
    # The cost model charges backward = 2 x forward, so it needs fwd+bwd / 3 to get fwd+bwd right.
    train_s = _best_time_s(lambda: block_forward(xg, p1, cfg.n_head).sum().backward(), 3 * reps)
    act = activation_mb_per_sample(cfg, batch, tp_degrees, seed, device)
    return {"fwd_ms_per_sample": train_s / 3 * 1e3 / batch, "fwd_only_ms_per_sample": fwd_only_s * 1e3 / batch,
            "fwd_bwd_ms_per_sample": train_s * 1e3 / batch, "param_mb": cfg.block_param_count() * 4 / 2 ** 20,
            "act_mb_per_sample": act, "batch": batch}


def other_act_mb_per_sample(cfg: ModelConfig, batch: int = 2, seed: int = 0) -> float:
    """MB per sample that embedding, final norm, head and loss save for backward (weights left out)."""
    full = init_params(cfg, seed)
    e = {k: v.clone().requires_grad_() for k, v in full["embed"].items()}
    h = {k: v.clone().requires_grad_() for k, v in full["head"].items()}
    idx = torch.randint(0, cfg.vocab, (batch, cfg.seq_len), generator=torch.Generator().manual_seed(seed))
    n = saved_bytes(lambda: head_loss_sum(embed_forward(idx, e), idx, h), [*e.values(), *h.values()])
    return n / batch / 2 ** 20


def other_split(cfg: ModelConfig, batch: int = 2, seed: int = 0) -> dict:
    """Which share of the memory outside the layers the first pipeline stage holds (the embedding) and which
    the last (final norm, head, loss): ``{"states": (first, last), "act": (first, last)}``, each pair summing
    to 1. States by parameter count; activations by the bytes each part saves for backward, counted alone
    (the head's input is counted with the head, as the last block's output it is)."""
    full = init_params(cfg, seed)
    e = {k: v.clone().requires_grad_() for k, v in full["embed"].items()}
    h = {k: v.clone().requires_grad_() for k, v in full["head"].items()}
    idx = torch.randint(0, cfg.vocab, (batch, cfg.seq_len), generator=torch.Generator().manual_seed(seed))
    x = torch.randn(batch, cfg.seq_len, cfg.d_model, generator=torch.Generator().manual_seed(seed + 1))
    x.requires_grad_()
    first = saved_bytes(lambda: embed_forward(idx, e), e.values())
    last = saved_bytes(lambda: head_loss_sum(x, idx, h), h.values())
    pe, ph = sum(v.numel() for v in e.values()), sum(v.numel() for v in h.values())
    return {"states": (pe / (pe + ph), ph / (pe + ph)), "act": (first / (first + last), last / (first + last))}


def activation_mb_per_sample(cfg: ModelConfig, batch: int = 2, tp_degrees=(1, 2, 4, 8), seed: int = 0,
                             device: str = "cpu") -> dict:
    """TP degree -> MB per sample one block's TP shard saves for backward (its weights left out), for every
    degree that divides the head count."""
    full = {k: v.to(device) for k, v in init_params(cfg, seed)["blocks"][0].items()}
    x = torch.randn(batch, cfg.seq_len, cfg.d_model, generator=torch.Generator().manual_seed(seed)).to(device)
    act = {}
    for tp in tp_degrees:
        if cfg.n_head % tp:
            continue
        sh = {k: v.clone().requires_grad_() for k, v in tp_shard(full, 0, tp).items()}
        xr = x.clone().requires_grad_()
        act[tp] = saved_bytes(lambda: block_forward(xr, sh, cfg.n_head // tp), sh.values()) / batch / 2 ** 20
    return act


def memory_profile(cfg: ModelConfig, name: str = "measured", source: str = "") -> "ModelProfile":
    """A ``ModelProfile`` of ``cfg`` with the memory terms measured (saved-tensor counts on this process) and
    no time: what the cost model's memory estimate needs, in a second, without spawning ranks."""
    lay = {"param_mb": cfg.block_param_count() * 4 / 2 ** 20, "fwd_ms_per_sample": 0.0,
           "act_mb_per_sample": activation_mb_per_sample(cfg)}
    return _model_profile(cfg, lay, name, source or f"memory terms measured on this process, model "
                                                    f"{cfg.to_dict()}")


def _model_profile(cfg: ModelConfig, lay: dict, name: str, src: str):
    from ..search.profiles import LayerProfile, ModelProfile

    acts = {int(k): float(v) for k, v in lay["act_mb_per_sample"].items()}  # JSON made the keys strings
    layer = LayerProfile(name="block", param_mb=lay["param_mb"], act_mb_per_sample=acts,
                         fwd_ms_per_sample=lay["fwd_ms_per_sample"], seq_len=cfg.seq_len, hidden=cfg.d_model,
                         boundary_mb_per_sample=cfg.seq_len * cfg.d_model * 4 / 2 ** 20)
    other_mb = cfg.other_param_count() * 4 / 2 ** 20
    return ModelProfile(name=f"{name}-gpt-d{cfg.d_model}-l{cfg.n_layer}", layer_types=(layer,),
                        layer_counts=(cfg.n_layer,), other_model_states_mb=4 * other_mb,
                        other_act_mb_per_sample=other_act_mb_per_sample(cfg),
                        context_mb=0.0, extra_overhead_ms=0.0, source=src)


def measure_other_ms(cfg: ModelConfig, batch: int, reps: int = 10, seed: int = 0, device: str = "cpu") -> float:
    """What the cost model leaves out: embedding, head and loss forward+backward on ``batch`` samples plus
    an SGD update of every parameter of the model, ms per iteration on one rank."""
    full = init_params(cfg, seed)
    ps = [v.to(device).requires_grad_() for v in list(full["embed"].values()) + list(full["head"].values())]
    ps += [v.to(device).requires_grad_() for b in full["blocks"] for v in b.values()]
    for p in ps:
        p.grad = torch.zeros_like(p)
    opt = torch.optim.SGD(ps, lr=0.0)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab, (batch, cfg.seq_len), generator=gen).to(device)
    e = dict(zip(full["embed"], ps[:2]))
    h = dict(zip(full["head"], ps[2:5]))

    def step():
        head_loss_sum(embed_forward(idx, e), idx, h).backward()
        opt.step()
    return _best_time_s(step, reps) * 1e3


def _time_allreduce(t: torch.Tensor, group, reps: int, work=None) -> float:
    """Seconds per all-reduce of ``t``. With ``work`` (a compute step), each all-reduce follows the work, as
    in training, and the work's own time is subtracted: the result then includes the wait for the slower rank
    that a synchronous collective pays on a busy machine, which back-to-back all-reduces never see."""
    import torch.distributed as dist

    def once():
        dist.all_reduce(t, group=group)
    dist.barrier()
    if work is None:
        return _best_time_s(once, reps)
    alone = _best_time_s(work, reps)
    dist.barrier()
    both = _best_time_s(lambda: (work(), once()), reps)
    return max(both - alone, 0.1 * _best_time_s(once, reps))


def comm_measurements(job: dict, rank: int, world: int) -> dict:
    """Run on every rank (``profile_machine`` spawns it): all-reduce coefficients for every
    group shape, P2P between stage neighbours, and the overlap slowdown. Returns the same dict on rank 0."""
    import torch.distributed as dist

    dev = f"cuda:{torch.cuda.current_device()}" if job.get("device") == "cuda" else "cpu"
    msg_mb, reps = float(job.get("msg_mb", 1.0)), int(job.get("reps", 10))
    n = max(1, int(msg_mb * 2 ** 20 / 4))
    cfg = ModelConfig.from_dict(job["model"])
    blk = {k: v.to(dev) for k, v in init_params(cfg, 0)["blocks"][0].items()}
    xw = torch.randn(int(job.get("batch", 4)), cfg.seq_len, cfg.d_model,
                     generator=torch.Generator().manual_seed(1)).to(dev)

    def work():  # one layer forward: the compute a collective follows in training
        with torch.no_grad():
            block_forward(xw, blk, cfg.n_head)
    allreduce = {}
    pps = [2 ** k for k in range(world.bit_length()) if 2 ** k < world]
    pools = {pp: GroupPool(RankGrid(world, pp), rank) for pp in pps}  # every group up front, as the runtime does
    for pp in pps:
        S = world // pp
        pool = pools[pp]
        size = 2
        while size <= S:
            for consec in ((True,) if size == S else (True, False)):
                lay = Layout(size, S // size, consec)
                g = pool.get(lay.tp_group(pool.j))
                t_s = _time_allreduce(torch.ones(n, device=dev), g, reps, work if job.get("in_context", True) else None)
                ts = [torch.tensor([t_s], device=dev) for _ in range(world)]
                dist.all_gather(ts, torch.tensor([t_s], device=dev))
                vol_mb = 2 * (size - 1) / size * n * 4 / 2 ** 20
                allreduce[f"{pp}_{size}_{int(consec)}"] = max(float(v) for v in ts) * 1e3 / vol_mb
            size *= 2
    p2p = None
    if world >= 2:
        half = world // 2
        t = torch.ones(int(job.get("p2p_numel", n)), device=dev)
        dist.barrier()
        _sync_cuda()  # NCCL send/recv return before the transfer is done: time finished transfers only
        t0 = time.perf_counter()
        for _ in range(reps):
            if rank < half:
                dist.send(t, dst=rank + half)
                dist.recv(t, src=rank + half)
            else:
                dist.recv(t, src=rank - half)
                dist.send(t, dst=rank - half)
        _sync_cuda()
        p2p = (time.perf_counter() - t0) / (2 * reps) * 1e3 / (t.numel() * 4 / 2 ** 20)
    overlap = measure_overlap(job, rank, world) if world >= 2 else {"overlap_coe": 1.0}
    # Layer times with every rank computing at once: the devices (here, shared CPU cores) as a run sees them.
    dist.barrier()
    lay = measure_layer(ModelConfig.from_dict(job["model"]), int(job.get("batch", 4)), reps=reps, device=dev)
    t = torch.tensor([lay["fwd_ms_per_sample"], lay["fwd_only_ms_per_sample"], lay["fwd_bwd_ms_per_sample"]],
                     device=dev)
    dist.all_reduce(t)
    t = (t / world).tolist()
    lay.update(fwd_ms_per_sample=t[0], fwd_only_ms_per_sample=t[1], fwd_bwd_ms_per_sample=t[2])
    other = torch.tensor([measure_other_ms(ModelConfig.from_dict(job["model"]), int(job.get("batch", 4)), reps,
                                           device=dev)], device=dev)
    dist.all_reduce(other)
    lay["other_ms_per_iter"] = float(other[0]) / world
    return {"rank": rank, "allreduce_ms_per_mb": allreduce, "p2p_ms_per_mb": p2p, "layer": lay, **overlap}


def measure_overlap(job: dict, rank: int, world: int) -> dict:
    """Backward of one block and an all-reduce of ``overlap_mb`` over all ranks: alone, then together.
    The slowdown coefficient is the mean of the two slowdowns (compute and communication), at least 1."""
    import torch.distributed as dist

    cfg = ModelConfig.from_dict(job["model"])
    dev = f"cuda:{torch.cuda.current_device()}" if job.get("device") == "cuda" else "cpu"
    full = init_params(cfg, 0)["blocks"][0]
    p = {k: v.to(dev).requires_grad_() for k, v in full.items()}
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(int(job.get("batch", 4)), cfg.seq_len, cfg.d_model, generator=gen).to(dev)
    reps = int(job.get("reps", 10))
    buf = torch.ones(max(1, int(float(job.get("overlap_mb", 1.0)) * 2 ** 20 / 4)), device=dev)

    def compute():
        for _ in range(reps):
            block_forward(x, p, cfg.n_head).sum().backward()

    def comm_async():
        return [dist.all_reduce(buf, async_op=True) for _ in range(reps)]

    def alone_comm():
        for w in comm_async():
            w.wait()

    def together():  # on a GPU the all-reduces run on NCCL's stream, the compute on the current one
        _sync_cuda()
        t0 = time.perf_counter()
        works = comm_async()
        compute()
        _sync_cuda(stream_only=True)
        tc = time.perf_counter() - t0
        for w in works:
            w.wait()
        _sync_cuda()
        return tc, time.perf_counter() - t0

    dist.barrier()
    t_c = _best_time_s(compute, 3, "min")
    dist.barrier()
    t_a = _best_time_s(alone_comm, 3, "min")
    best = None
    for _ in range(3):  # best of three, like every other timing here
        dist.barrier()
        tc, ta = together()
        best = (tc, ta) if best is None or tc + ta < sum(best) else best
    t_c2, t_a2 = best
    vals = torch.tensor([t_c, t_a, t_c2, t_a2], device=dev)
    dist.all_reduce(vals)
    t_c, t_a, t_c2, t_a2 = (vals / world).tolist()
    # Together, the comm finishes at t_a2 >= its alone time; if compute was longer, what comm slowed is hidden.
    slow_c = t_c2 / t_c
    slow_a = t_a2 / t_a if t_a2 > t_c2 * 1.001 else slow_c
    return {"overlap_coe": max(1.0, 0.5 * (slow_c + slow_a)), "overlap_detail_s": {
        "compute_alone": t_c, "comm_alone": t_a, "compute_overlapped": t_c2, "comm_overlapped": t_a2}}


def profile_machine(cfg: ModelConfig, world_size: int, global_bsz: int, name: str = "measured",
                    device_label: str | None = None, reps: int = 10, timeout_s: float = 120.0,
                    device: str = "cpu", backend: str = "gloo") -> tuple:
    """Measure everything; returns (``ModelProfile``, ``ClusterProfile``, raw measurements dict)."""
    from ..search.profiles import ClusterProfile

    param_mb = cfg.block_param_count() * 4 / 2 ** 20
    job = {"model": cfg.to_dict(), "msg_mb": param_mb,
           "p2p_numel": max(1, global_bsz // world_size) * cfg.seq_len * cfg.d_model,
           "overlap_mb": param_mb, "batch": max(1, global_bsz // world_size), "reps": reps,
           "device": device, "backend": backend}
    comm = spawn_ranks(comm_measurements, job, world_size, timeout_s)[0]
    lay = comm["layer"]
    device_label = device_label or f"{device}/{backend}"
    src = f"measured by lib.galvatron.runtime.profiler on {device_label}, {world_size} ranks, model {cfg.to_dict()}"
    model = _model_profile(cfg, lay, name, src)
    cluster = ClusterProfile(name=f"{name}-{world_size}", n_gpus=world_size, gpus_per_node=world_size,
                             allreduce_ms_per_mb=comm["allreduce_ms_per_mb"], p2p_ms_per_mb=comm["p2p_ms_per_mb"],
                             overlap_coe=comm["overlap_coe"], time_inflation=1.0, source=src)
    return model, cluster, {"layer": lay, "comm": comm}


def write_profile(model, cluster, out_dir: str) -> list[str]:
    """Write ``model_<name>.json`` and ``cluster_<name>.json`` atomically into ``out_dir``; their paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for obj, kind in ((model, "model"), (cluster, "cluster")):
        path = os.path.join(out_dir, f"{kind}_{obj.name}.json")
        atomic.write_json(path, obj.to_dict())
        paths.append(path)
    return paths
