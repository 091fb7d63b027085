"""Bytes per value under fp32 training and under mixed precision (Micikevicius et al. 2018).

Mixed precision keeps 16-bit (bf16/fp16) parameters for compute, activations and every message between GPUs
that carries activations or parameters, and fp32 master weights and Adam moments in memory: 2 + 4 + 4 + 4 =
14 bytes per parameter besides the gradient (Rajbhandari et al. 2020, "K = 12" optimizer bytes). The gradient
is accumulated and reduced in ``grad_bytes`` (Megatron-LM accumulates and all-reduces gradients in fp32 for
bf16, ``accumulate_allreduce_grads_in_fp32``; DeepSpeed's ZeRO paper counts 2).

Without mixed precision (the previous rule of ``analytic.py``): weights, gradients and messages of parameters
and gradients are 4 bytes, Adam's two moments 8, so 16 bytes of model state per parameter; activations keep
the dtype's size (2 for bf16) as before. Used in: ``cost.py`` (``step_estimate``), ``zero.py``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bytes:
    """Bytes per value: ``param`` (working copy), ``grad`` (accumulated and reduced), ``optimizer`` (master
    weights and Adam moments), ``activation`` and ``message`` (activations and parameters sent)."""

    param: int
    grad: int
    optimizer: int
    activation: int
    message: int

    @property
    def states(self) -> int:
        """Model-state bytes per parameter without sharding."""
        return self.param + self.grad + self.optimizer


def bytes_per_value(mixed: bool, grad_bytes: int = 4, act_bytes: int = 2) -> Bytes:
    """The byte sizes under mixed precision (``mixed``) or the fp32 rule."""
    if grad_bytes not in (2, 4):
        raise ValueError(f"grad_bytes must be 2 or 4; got {grad_bytes!r}")
    if mixed:
        return Bytes(param=2, grad=grad_bytes, optimizer=12, activation=act_bytes, message=2)
    return Bytes(param=4, grad=4, optimizer=8, activation=act_bytes, message=4)
