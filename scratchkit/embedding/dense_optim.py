"""The MLPs' optimizers: torch.optim's SGD and Adagrad, float operation for float operation, without
importing torch.optim's machinery.

Why not torch.optim itself: making any torch.optim optimizer imports torch._dynamo (its methods are
wrapped by `torch._disable_dynamo`), a compiler the kit never uses, and seconds of start-up in
every process that trains. These classes do what torch.optim does with the same defaults (no
momentum, weight decay or learning-rate decay), in the same order:

    SGD       p += -lr * g                                   (`add_(g, alpha=-lr)`)
    Adagrad   s += g * g;  p += -lr * g / (sqrt(s) + eps)    (from s = 0)

with torch.optim's choice of kernels: one tensor at a time on a CPU, the `_foreach_` kernels (each
step's arithmetic as torch.optim's multi-tensor path writes it) when every parameter is on a CUDA
device, torch.optim's default there. The reference trains with torch.optim itself
(measure/reference.py), so the exactness tests compare these with it, bit for bit on a CPU;
tests/test_dense_optim.py compares both paths with torch.optim's, on the CPU.
"""

from __future__ import annotations

import torch


def uses_foreach(params: list[torch.Tensor]) -> bool:
    """torch.optim's default: the multi-tensor kernels when every parameter is on a CUDA device."""
    return bool(params) and all(p.device.type == "cuda" for p in params)


class DenseSGD:
    """Plain SGD: `step()` applies each parameter's `.grad`. foreach: the multi-tensor kernels or
    not; None (the default) decides as torch.optim does (`uses_foreach`)."""

    def __init__(self, params, lr: float, foreach: bool | None = None):
        self.params, self.lr, self.foreach = list(params), lr, foreach

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def _foreach(self, params: list[torch.Tensor]) -> bool:
        return uses_foreach(params) if self.foreach is None else self.foreach

    @torch.no_grad()
    def step(self) -> None:
        params = [p for p in self.params if p.grad is not None]
        grads = [p.grad for p in params]
        if self._foreach(params):
            torch._foreach_add_(params, grads, alpha=-self.lr)
        else:
            for p, g in zip(params, grads):
                p.add_(g, alpha=-self.lr)

    def state_dict(self) -> dict:
        return {"lr": self.lr}

    def load_state_dict(self, state: dict) -> None:
        self.lr = state["lr"]


class DenseAdagrad(DenseSGD):
    """Element-wise Adagrad: one running sum of squared gradients per weight."""

    def __init__(self, params, lr: float, eps: float, foreach: bool | None = None):
        super().__init__(params, lr, foreach)
        self.eps = eps
        self.sums = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    @torch.no_grad()
    def step(self) -> None:
        chosen = [i for i, p in enumerate(self.params) if p.grad is not None]
        params = [self.params[i] for i in chosen]
        grads, sums = [p.grad for p in params], [self.sums[i] for i in chosen]
        if self._foreach(params):
            torch._foreach_addcmul_(sums, grads, grads, value=1)
            std = torch._foreach_sqrt(sums)
            torch._foreach_add_(std, self.eps)
            torch._foreach_addcdiv_(params, torch._foreach_mul(grads, -self.lr), std)
        else:
            for p, g, s in zip(params, grads, sums):
                s.addcmul_(g, g, value=1)
                p.addcdiv_(g, s.sqrt().add_(self.eps), value=-self.lr)

    def state_dict(self) -> dict:
        return {"lr": self.lr, "eps": self.eps, "sums": [s.clone() for s in self.sums]}

    def load_state_dict(self, state: dict) -> None:
        self.lr, self.eps = state["lr"], state["eps"]
        for s, saved in zip(self.sums, state["sums"]):
            s.copy_(saved)
