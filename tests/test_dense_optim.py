"""The MLPs' optimizers (scratchkit/embedding/dense_optim.py) against torch.optim itself, which the
reference trains with: the same bits, one tensor at a time (a CPU's default) and with the
multi-tensor `_foreach_` kernels (CUDA's default, run here on the CPU), through a checkpoint too."""

from __future__ import annotations

import copy

import pytest
import torch

from scratchkit.embedding.dense_optim import DenseAdagrad, DenseSGD, uses_foreach

LR, EPS = 0.05, 1e-8


def pair(kind: str, foreach: bool):
    """The same parameters twice: one set for the kit's optimizer, one for torch.optim's."""
    generator = torch.Generator().manual_seed(0)
    mine = [torch.randn(7, 5, generator=generator, requires_grad=True), torch.randn(5, generator=generator)]
    mine[1].requires_grad_(True)
    theirs = [p.detach().clone().requires_grad_(True) for p in mine]
    if kind == "sgd":
        return mine, theirs, DenseSGD(mine, LR, foreach), torch.optim.SGD(theirs, lr=LR, foreach=foreach)
    return (
        mine,
        theirs,
        DenseAdagrad(mine, LR, EPS, foreach),
        torch.optim.Adagrad(theirs, lr=LR, eps=EPS, foreach=foreach),
    )


def steps(mine, theirs, ours, torchs, count: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for step in range(count):
        grads = [torch.randn(p.shape, generator=generator) * 10 ** (step % 3) for p in mine]
        ours.zero_grad(set_to_none=True)
        torchs.zero_grad(set_to_none=True)
        for p, q, g in zip(mine, theirs, grads):
            p.grad, q.grad = g.clone(), g.clone()
        mine[1].grad = None if step == 2 else mine[1].grad  # a parameter without a gradient is left alone
        theirs[1].grad = None if step == 2 else theirs[1].grad
        ours.step()
        torchs.step()


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_the_same_bits_as_torch_optim(kind, foreach):
    mine, theirs, ours, torchs = pair(kind, foreach)
    steps(mine, theirs, ours, torchs, 6, seed=1)
    for p, q in zip(mine, theirs):
        assert torch.equal(p, q)
        assert not torch.equal(p, q.detach() + 1e-3)  # guards the test: they moved, and equality can fail


def test_the_kernels_are_chosen_as_torch_optim_chooses_them():
    assert not uses_foreach([torch.zeros(1)]) and not uses_foreach([])
    assert DenseSGD([torch.zeros(1)], LR)._foreach([torch.zeros(1)]) is False


def test_a_checkpoint_resumes_the_same_bits():
    mine, theirs, ours, torchs = pair("adagrad", foreach=False)
    steps(mine, theirs, ours, torchs, 3, seed=1)
    saved, weights = copy.deepcopy(ours.state_dict()), [p.detach().clone() for p in mine]
    steps(mine, theirs, ours, torchs, 3, seed=2)
    with torch.no_grad():
        for p, w in zip(mine, weights):
            p.copy_(w)
    resumed = DenseAdagrad(mine, lr=1.0, eps=1.0)
    resumed.load_state_dict(saved)
    steps(mine, [p.detach().clone().requires_grad_(True) for p in mine], resumed, DenseSGD([], 0.0), 3, seed=2)
    for p, q in zip(mine, theirs):
        assert torch.equal(p, q)
