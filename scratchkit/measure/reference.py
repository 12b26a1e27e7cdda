"""A plain PyTorch reference: `nn.EmbeddingBag(sparse=True)` + `torch.optim`, no kit code in the loop.

`scratchkit verify` trains this next to each trainer on the same batches from the same initial
weights, and compares every final parameter. The only things it takes from the kit are *data*: the
batches and the initial weights. Its model, its training loop and its optimizers are written here
with torch alone, so a bug in the kit's shared update cannot hide by appearing on both sides.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from scratchkit.config import OptimizerKind, TrainConfig
from scratchkit.model import init_dense_model
from scratchkit.embedding.tables import init_embedding_weights


class ReferenceDLRM(nn.Module):
    """Same architecture as the kit's DLRM, written out again with torch modules."""

    def __init__(self, config: TrainConfig, num_dense: int):
        super().__init__()
        m, sizes = config.model, config.data.table_sizes
        self.num_dense = num_dense
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, m.dim, mode="sum", sparse=True) for n in sizes)

        def layers(widths, relu_last):
            out = []
            for i in range(len(widths) - 1):
                out.append(nn.Linear(widths[i], widths[i + 1]))
                if i < len(widths) - 2 or relu_last:
                    out.append(nn.ReLU())
            return nn.Sequential(*out)

        self.bottom = layers([max(num_dense, 1), *m.bottom_mlp], True)
        n = len(sizes) + 1
        self.pairs = [(i, j) for i in range(n) for j in range(i)]   # strictly lower triangle, row-major
        self.top = layers([m.dim + len(self.pairs), *m.top_mlp], False)

    def forward(self, dense, ids, offsets):
        if self.num_dense == 0:
            dense = torch.ones(len(offsets[0]), 1, device=offsets[0].device)
        x = self.bottom(dense)
        pooled = [table(i, o) for table, i, o in zip(self.tables, ids, offsets)]
        vectors = torch.stack([x, *pooled], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))
        rows = torch.tensor([p[0] for p in self.pairs], device=x.device)
        cols = torch.tensor([p[1] for p in self.pairs], device=x.device)
        return self.top(torch.cat([x, dots[:, rows, cols]], dim=1)).squeeze(1)


class RowwiseAdagrad(torch.optim.Optimizer):
    """Row-wise Adagrad for sparse gradients, plain torch: one accumulator per row (mean of g^2)."""

    def __init__(self, params, lr, eps):
        super().__init__(params, dict(lr=lr, eps=eps))
        for group in self.param_groups:   # zeros from the start, as torch.optim.Adagrad's "sum"
            for p in group["params"]:
                self.state[p]["sum"] = torch.zeros(p.shape[0], 1, device=p.device)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.coalesce()
                rows, values = grad.indices()[0], grad.values()
                acc = self.state[p]["sum"]
                acc[rows] += values.pow(2).mean(dim=1, keepdim=True)
                p[rows] = p[rows].add_(values / acc[rows].sqrt().add_(group["eps"]), alpha=-group["lr"])


class ReferenceRun:
    """Trains the reference for a number of steps on batches 0, 1, ... of a source."""

    def __init__(self, config: TrainConfig, source, device: str = "cpu"):
        self.config, self.source, self.device = config, source, torch.device(device)
        if config.cpu_threads is not None:
            # the trainers' thread count (trainers/base.py): a matmul splits its sums by thread, so
            # another count would give other last bits (7e-9 on embedding-bound's 512-sample batch)
            torch.set_num_threads(config.cpu_threads)
        model = ReferenceDLRM(config, source.num_dense)
        # initial weights: the same data every trainer starts from
        kit_dense = init_dense_model(config.model, source.num_dense, len(config.data.table_sizes), config.seed)
        model.bottom.load_state_dict(kit_dense.bottom.state_dict())
        model.top.load_state_dict(kit_dense.top.state_dict())
        for table, w in zip(model.tables, init_embedding_weights(config.data.table_sizes,
                                                                  config.model.dim, config.seed)):
            table.weight.data.copy_(w)
        self.model = model.to(self.device)
        dense_params = [*self.model.bottom.parameters(), *self.model.top.parameters()]
        sparse_params = [t.weight for t in self.model.tables]
        o = config.optimizer
        if o.kind is OptimizerKind.SGD:
            self.dense_opt = torch.optim.SGD(dense_params, lr=o.lr)
            self.sparse_opt = torch.optim.SGD(sparse_params, lr=o.lr)
        else:
            self.dense_opt = torch.optim.Adagrad(dense_params, lr=o.lr, eps=o.eps)
            self.sparse_opt = (torch.optim.Adagrad(sparse_params, lr=o.lr, eps=o.eps)
                               if o.kind is OptimizerKind.ADAGRAD else RowwiseAdagrad(sparse_params, o.lr, o.eps))
        self.steps_done = 0

    def train(self, steps: int) -> list[float]:
        losses = []
        for _ in range(steps):
            batch = self.source.batch(self.steps_done)
            to = lambda a: torch.from_numpy(a).to(self.device)
            logits = self.model(to(batch.dense), [to(i) for i in batch.ids], [to(o) for o in batch.offsets])
            loss = F.binary_cross_entropy_with_logits(logits, to(batch.labels))
            self.dense_opt.zero_grad(set_to_none=True)
            self.sparse_opt.zero_grad(set_to_none=True)
            loss.backward()
            with torch.sparse.check_sparse_tensor_invariants(enable=False):
                for table in self.model.tables:   # sum duplicate ids once, in lookup order
                    table.weight.grad = table.weight.grad.coalesce()
                self.dense_opt.step()
                self.sparse_opt.step()
            losses.append(float(loss.detach()))
            self.steps_done += 1
        return losses

    def embedding_weights(self) -> list[torch.Tensor]:
        return [t.weight.detach().cpu() for t in self.model.tables]

    def embedding_state(self) -> list[torch.Tensor | None]:
        if self.config.optimizer.kind is OptimizerKind.SGD:
            return [None] * len(self.model.tables)
        return [self.sparse_opt.state[t.weight]["sum"].cpu() for t in self.model.tables]

    def dense_parameters(self) -> list[torch.Tensor]:
        return [p.detach().cpu() for p in [*self.model.bottom.parameters(), *self.model.top.parameters()]]
