"""Peak memory of one training step, by category, counted from the live tensors themselves.

``StepMemory`` is a ``TorchDispatchMode``: every tensor an operator reads or writes during the step has its
storage recorded (once, by a weak reference, so a freed storage drops out of the count), and after every
operator the live bytes are summed from the storages' current sizes (FSDP2 frees and regrows its gathered
parameters with ``UntypedStorage.resize_``, which no dispatch mode sees, so sizes are read, never cached).
At every new peak the live bytes are split into

* ``model_states``: parameters, their gradients and the optimizer's states (registered before the step:
  ``register_model_states``, so the step must not be the first: Adam creates its moments then);
* ``activations``: storages autograd saved for backward (``torch.autograd.graph.saved_tensors_hooks``) that are
  not model states and not gathered parameters;
* ``gathered_params``: SDP's all-gathered weights (marked by ``mark_gathered`` where the layer uses them),
  saved for backward or not;
* ``comm_buffers``: buffers allocated inside ``region("comm")`` (gradient buckets, TP all-reduces,
  Slice-Gather, pipeline send/receive);
* ``other_transient``: everything else alive at that moment (gradients of activations, temporaries).

The last three are the transient buffers; the cost model estimates the first two. The same counting runs on
CUDA, where ``torch.cuda.max_memory_allocated`` is reported beside it (it also sees the allocator's rounding).
A storage shared by several tensors (views) is counted once. Not seen: memory outside tensors (the Python and
PyTorch runtime, gloo's own buffers), and with activation checkpointing the inputs that ``checkpoint`` keeps
(its own saved-tensor hooks hide them from ours; they count as other transient).

Used in: book/galvatron/04_from_plan_to_run (through ``jobs.train_job``).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from dataclasses import asdict, dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

CATEGORIES = ("model_states", "activations", "gathered_params", "comm_buffers", "other_transient")
TRANSIENT = ("gathered_params", "comm_buffers", "other_transient")
REGIONS = ("comm",)

_ACTIVE: list = []           # the StepMemory now counting (at most one per process)
_LOCAL = threading.local()   # the region the current thread is in


@contextlib.contextmanager
def region(name: str):
    """Label what is allocated inside as ``name`` (``"comm"``); costs nothing when nothing counts."""
    if name not in REGIONS:
        raise ValueError(f"memory region must be one of {REGIONS}; got {name!r}")
    prev = getattr(_LOCAL, "region", None)
    _LOCAL.region = name
    try:
        yield
    finally:
        _LOCAL.region = prev


def mark_gathered(tensors) -> None:
    """The storages of ``tensors`` (SDP's full weights of a layer) are gathered parameters."""
    if _ACTIVE:
        _ACTIVE[0].mark(tensors, "gather")


def _storages(obj):
    leaves, _ = tree_flatten(obj)
    for t in leaves:
        if isinstance(t, torch.Tensor):
            yield from _tensor_storages(t)


def _tensor_storages(t: torch.Tensor):
    local = getattr(t, "_local_tensor", None)  # a DTensor (FSDP2's shards): its local piece holds the bytes
    if local is not None:
        t = local
    if t.is_meta or getattr(t, "is_sparse", False):
        return
    try:
        st = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
        return
    yield st


def _check_split(name: str, d) -> dict:
    if not isinstance(d, dict) or set(d) != set(CATEGORIES):
        got = sorted(d) if isinstance(d, dict) else type(d).__name__
        raise ValueError(f"memory record: {name} must have exactly the categories {list(CATEGORIES)}; got {got}")
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"memory record: {name}.{k} = {v!r}; must be a non-negative integer of bytes")
    return dict(d)


@dataclass(frozen=True)
class MemoryRecord:
    """One rank's peak of one step, in bytes: the split at the peak (``at_peak``, summing to ``peak_bytes``)
    and each category's own largest value during the step (``maxima``: activations peak at the end of the
    forward, the total often later, in backward, when gradients of activations are live too)."""

    peak_bytes: int
    at_peak: dict
    maxima: dict
    end_bytes: int                 # live after the step (the model states, if nothing leaks)
    cuda_max_allocated: int | None = None  # allocator peak of the step on CUDA (None on CPU)

    def __post_init__(self):
        for k in ("peak_bytes", "end_bytes") + (("cuda_max_allocated",) if self.cuda_max_allocated is not None
                                                 else ()):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"memory record: {k} = {v!r}; must be a non-negative integer of bytes")
        at, mx = _check_split("at_peak", self.at_peak), _check_split("maxima", self.maxima)
        if sum(at.values()) != self.peak_bytes:
            raise ValueError(f"memory record: at_peak sums to {sum(at.values())} bytes, not peak_bytes = "
                             f"{self.peak_bytes}")
        for c in CATEGORIES:
            if not at[c] <= mx[c] <= self.peak_bytes:
                raise ValueError(f"memory record: maxima.{c} = {mx[c]} must lie between at_peak.{c} = {at[c]} "
                                 f"and peak_bytes = {self.peak_bytes}")

    @property
    def transient_at_peak(self) -> int:
        return sum(self.at_peak[c] for c in TRANSIENT)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "MemoryRecord":
        if not isinstance(d, dict):
            raise ValueError(f"memory record: must be an object; got {type(d).__name__}")
        fields = set(cls.__dataclass_fields__)
        unknown, missing = set(d) - fields, fields - set(d) - {"cuda_max_allocated"}
        if unknown or missing:
            raise ValueError(f"memory record: unknown fields {sorted(unknown)}, missing {sorted(missing)}; "
                             f"fields are {sorted(fields)}")
        return cls(**d)


class StepMemory(TorchDispatchMode):
    """Count live tensor bytes while active; ``record()`` gives the peak by category (see the module)."""

    def __init__(self):
        super().__init__()
        self.info: dict = {}     # id(storage) -> [weakref, label, counted bytes, category]
        self.totals = dict.fromkeys(CATEGORIES, 0)
        self.gathered: set = set()  # ids of the storages marked "gather"
        self.peak = 0
        self.at_peak, self.maxima = dict.fromkeys(CATEGORIES, 0), dict.fromkeys(CATEGORIES, 0)
        self._hooks = None

    # -- what is tracked: running totals per category, adjusted when a storage appears, changes role, is
    # touched again (its size is read anew: FSDP2 regrows storages between operators) or is freed -------------
    @staticmethod
    def _category(label, saved: bool) -> str:
        if label == "model_states":
            return "model_states"
        if label == "gather":
            return "gathered_params"
        if saved:
            return "activations"
        return "comm_buffers" if label == "comm" else "other_transient"

    def _freed(self, key):
        entry = self.info.pop(key, None)
        if entry is not None:
            self.totals[entry[3]] -= entry[2]

    def _track(self, st, label=None, saved=False, relabel=False) -> None:
        key = id(st)
        entry = self.info.get(key)
        if entry is None or entry[0]() is not st:
            if entry is not None:  # a dead storage whose id was reused before its callback ran
                self._freed(key)
            import weakref

            ref = weakref.ref(st, lambda _, key=key: self._freed(key))
            entry = self.info[key] = [ref, label, 0, self._category(label, saved), saved]
        elif relabel and entry[1] != "model_states":
            entry[1] = label
        if saved:
            entry[4] = True
        cat, n = self._category(entry[1], entry[4]), st.nbytes()
        self.totals[entry[3]] -= entry[2]
        self.totals[cat] += n
        entry[2], entry[3] = n, cat

    def register_model_states(self, tensors) -> None:
        """Parameters, gradients, optimizer states: counted as model states from now on."""
        for st in _storages(list(tensors)):
            self._track(st, "model_states", relabel=True)

    def mark(self, tensors, label: str) -> None:
        for st in _storages(list(tensors)):
            self._track(st, label, relabel=True)
            if label == "gather":
                self.gathered.add(id(st))
        self._update()

    def _see(self, obj) -> None:
        label = getattr(_LOCAL, "region", None)
        for st in _storages(obj):
            self._track(st, label)

    def _pack(self, t):
        for st in _tensor_storages(t):
            self._track(st, getattr(_LOCAL, "region", None), saved=True)
        return t

    # -- the count -------------------------------------------------------------------------------------
    def _update(self) -> None:
        for key in list(self.gathered):  # gathered weights: FSDP2 frees them by resizing, unseen
            entry = self.info.get(key)
            if entry is None:
                self.gathered.discard(key)
                continue
            if entry[1] == "gather":
                st = entry[0]()
                if st is not None and st.nbytes() != entry[2]:
                    self.totals[entry[3]] += st.nbytes() - entry[2]
                    entry[2] = st.nbytes()
        total = sum(self.totals.values())
        for c, v in self.totals.items():
            self.maxima[c] = max(self.maxima[c], v)
        if total > self.peak:
            self.peak, self.at_peak = total, dict(self.totals)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self._see((args, kwargs))
        out = func(*args, **kwargs)
        self._see((args, kwargs, out))  # sizes again: an operator may have resized or filled a storage
        self._update()
        return out

    def __enter__(self):
        if _ACTIVE:
            raise RuntimeError("a StepMemory is already counting in this process")
        _ACTIVE.append(self)
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        self._update()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._hooks.__exit__(*exc)
            _ACTIVE.remove(self)

    def record(self, cuda_max_allocated: int | None = None, settle_s: float = 1.0) -> MemoryRecord:
        """The step's record. ``end_bytes`` counts what is still alive, once anything but the model states has
        had up to ``settle_s`` to go: a communication thread may drop its last reference to a bucket a moment
        after ``wait()`` has returned (seen as a 41 KB "leak" of the hand-written SDP on a loaded CI machine),
        and reference cycles wait for the collector. A real leak stays and is counted."""
        gc.collect()                                # cycles once; a thread's last reference goes by itself
        deadline = time.monotonic() + settle_s
        while True:
            live = [e for e in list(self.info.values()) if e[0]() is not None]
            if all(e[3] == "model_states" for e in live) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        end = sum(st.nbytes() for st in (e[0]() for e in live) if st is not None)
        return MemoryRecord(peak_bytes=self.peak, at_peak=dict(self.at_peak), maxima=dict(self.maxima),
                            end_bytes=end, cuda_max_allocated=cuda_max_allocated)


__all__ = ["CATEGORIES", "TRANSIENT", "MemoryRecord", "StepMemory", "region", "mark_gathered"]
