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
from scratchkit.data.batch import micro_batch
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
        self.pairs = [(i, j) for i in range(n) for j in range(i)]  # strictly lower triangle, row-major
        self.top = layers([m.dim + len(self.pairs), *m.top_mlp], False)

    def forward(self, dense, ids, offsets):
        if self.num_dense == 0:
            dense = torch.ones(len(offsets[0]), 1, device=offsets[0].device)
        x = self.bottom(dense)
        return self.interact(x, [table(i, o) for table, i, o in zip(self.tables, ids, offsets)])

    def interact(self, x, pooled):
        """The bottom MLP's output x [B, dim] and each table's pooled vectors pooled[t] [B, dim] ->
        logits [B] (a peer with its own embedding, benchmarks/bench_peers.py, calls this too)."""
        vectors = torch.stack([x, *pooled], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))
        rows = torch.tensor([p[0] for p in self.pairs], device=x.device)
        cols = torch.tensor([p[1] for p in self.pairs], device=x.device)
        return self.top(torch.cat([x, dots[:, rows, cols]], dim=1)).squeeze(1)


class RowwiseAdagrad(torch.optim.Optimizer):
    """Row-wise Adagrad for sparse gradients, plain torch: one accumulator per row (mean of g^2)."""

    def __init__(self, params, lr, eps):
        super().__init__(params, dict(lr=lr, eps=eps))
        for group in self.param_groups:  # zeros from the start, as torch.optim.Adagrad's "sum"
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
        for table, w in zip(
            model.tables, init_embedding_weights(config.data.table_sizes, config.model.dim, config.seed)
        ):
            table.weight.data.copy_(w)
        self.model = model.to(self.device)
        for table in self.model.tables:  # each backward's sparse gradient coalesced as it arrives
            table.weight.register_hook(lambda grad: grad.coalesce())
        dense_params = [*self.model.bottom.parameters(), *self.model.top.parameters()]
        sparse_params = [t.weight for t in self.model.tables]
        o = config.optimizer
        if o.kind is OptimizerKind.SGD:
            self.dense_opt = torch.optim.SGD(dense_params, lr=o.lr)
            self.sparse_opt = torch.optim.SGD(sparse_params, lr=o.lr)
        else:
            self.dense_opt = torch.optim.Adagrad(dense_params, lr=o.lr, eps=o.eps)
            self.sparse_opt = (
                torch.optim.Adagrad(sparse_params, lr=o.lr, eps=o.eps)
                if o.kind is OptimizerKind.ADAGRAD
                else RowwiseAdagrad(sparse_params, o.lr, o.eps)
            )
        self.steps_done = 0

    def train(self, steps: int, micro_batches: int = 1) -> list[float]:
        """Train `steps` batches; returns each batch's loss.

        micro_batches N > 1: each batch as N micro-batches of B/N samples (`micro_batch`) with
        gradient accumulation in order: micro-batch r's loss / N goes backward, autograd adds its
        gradients to those of micro-batches 0..r-1, and one optimizer step follows the last. The
        tables' sparse gradient of each micro-batch is coalesced as it arrives (the hook in
        __init__), then added to the sum so far, row by row: ((g_0 + g_1) + g_2) + ... Without the
        hook autograd would concatenate the micro-batches' lookups and coalesce them once, summing
        each row's duplicates in the order of an unstable sort of the whole batch's ids, an order
        a rank that owns only some rows cannot reproduce (scratchkit/distributed/exchange.py).
        The loss returned is the mean of the micro-batches' losses.
        """
        losses = []
        for _ in range(steps):
            batch = self.source.batch(self.steps_done)
            parts = (
                [batch] if micro_batches == 1 else [micro_batch(batch, r, micro_batches) for r in range(micro_batches)]
            )
            to = lambda a: torch.from_numpy(a).to(self.device)
            self.dense_opt.zero_grad(set_to_none=True)
            self.sparse_opt.zero_grad(set_to_none=True)
            total = 0.0
            for part in parts:
                logits = self.model(to(part.dense), [to(i) for i in part.ids], [to(o) for o in part.offsets])
                loss = F.binary_cross_entropy_with_logits(logits, to(part.labels))
                (loss if micro_batches == 1 else loss / micro_batches).backward()
                total += float(loss.detach())
            with torch.sparse.check_sparse_tensor_invariants(enable=False):
                for table in self.model.tables:  # sum duplicate ids once, in lookup order
                    table.weight.grad = table.weight.grad.coalesce()
                self.dense_opt.step()
                self.sparse_opt.step()
            losses.append(total / micro_batches)
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
