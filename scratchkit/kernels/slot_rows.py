"""The scratchpad's rows on the device, addressed by slot: `capacity` rows of `dim` floats and their
optimizer state, gathered and scattered by the kernels of `rows.cu`, looked up in bags and updated
by those of `embedding_bag.cu` (twin.py, their NumPy specification).

The scratchpad (scratchpad.py) checks the slots and offsets it is given and keeps their books;
this class checks what only the rows know (a row's width, its state, the optimizer's numbers)
and runs the kernels. Slots and offsets come as engine arrays; rows, states and gradients in any
form engine_arrays.py takes.
"""

from __future__ import annotations

import math

from scratchkit.config import OptimizerKind


class SlotRows:
    """rows [capacity, dim] and state [capacity, state_width] float32 (None when state_width is 0)
    in `engine`'s memory; `arrays` converts what a caller gives (engine_arrays.EngineArrays)."""

    def __init__(self, engine, arrays, capacity: int, dim: int, state_width: int):
        xp = engine.xp
        self.engine, self.arrays, self.dim, self.state_width = engine, arrays, dim, state_width
        self.rows = xp.zeros((capacity, dim), dtype=xp.float32)
        self.state = xp.zeros((capacity, state_width), dtype=xp.float32) if state_width else None

    def gather(self, slots) -> tuple:
        """(rows [n, dim], state [n, state_width] or None) of `slots` [n] (copies)."""
        rows = self.engine.gather_rows(self.rows, slots)
        return rows, None if self.state is None else self.engine.gather_rows(self.state, slots)

    def scatter(self, slots, rows, state=None) -> None:
        """Write rows [n, dim] (and state [n, state_width], required when state_width > 0) into
        distinct `slots` [n]."""
        rows = self.arrays.floats(rows, "rows", (slots.size, self.dim))
        if self.state is not None:
            if state is None:
                raise ValueError(
                    f"state is required: this scratchpad keeps {self.state_width} "
                    "optimizer floats per slot, and a row without its state is stale"
                )
            state = self.arrays.floats(state, "state", (slots.size, self.state_width))
        elif state is not None:
            raise ValueError("state given, but this scratchpad has state_width 0")
        self.engine.scatter_rows(self.rows, slots, rows)
        if state is not None:
            self.engine.scatter_rows(self.state, slots, state)

    def bag_forward(self, slots, offsets):
        """Pooled sums [num_bags, dim]: bag b sums rows[slots[offsets[b]:offsets[b+1]]]."""
        return self.engine.embedding_bag_forward(self.rows, slots, offsets)

    def backward_update(self, slots, offsets, grad_pooled, optimizer: OptimizerKind, lr: float, eps: float) -> None:
        """`bag_forward`'s backward fused with the optimizer step, in place: each row's gradient is
        the sum of its lookups' bag gradients `grad_pooled` [num_bags, dim], in lookup order."""
        grad_pooled = self.arrays.floats(grad_pooled, "grad_pooled", (offsets.size, self.dim))
        for name, value in (("lr", lr), ("eps", eps)):
            if not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        needed = {OptimizerKind.SGD: None, OptimizerKind.ROWWISE_ADAGRAD: 1, OptimizerKind.ADAGRAD: self.dim}[optimizer]
        if needed is not None and self.state_width != needed:
            raise ValueError(
                f"{optimizer.value} needs state_width {needed}, but this scratchpad has state_width {self.state_width}"
            )
        args = (slots, offsets, grad_pooled)
        if optimizer is OptimizerKind.SGD:
            self.engine.embedding_bag_backward_sgd(self.rows, *args, lr)
        elif optimizer is OptimizerKind.ROWWISE_ADAGRAD:
            self.engine.embedding_bag_backward_rowwise_adagrad(self.rows, self.state, *args, lr, eps)
        else:
            self.engine.embedding_bag_backward_adagrad(self.rows, self.state, *args, lr, eps)
