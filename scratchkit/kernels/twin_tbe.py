"""NumPy twins of tbe.cu, every table's embedding bags at once and the backward fused with the
update (embedding/device_tbe.py): the specification the `.cu` source is tested against, on every
engine (tests/test_kernels_tbe.py). They add a bag's rows and an id's gradients in lookup order and
round every operation on its own, as the kernels do (twin.py says how that makes them bit-exact).

The batch as the kernels take it (T tables, B bags, N lookups in all):

    tables      [T] arrays [rows_t, dim]  each table's rows (or a cache's, a scratchpad's slots)
    index       [N]    the row each lookup reads: index[j] - index_base[t] for table t's lookups
    starts      [T+1]  table t's lookups are positions starts[t] .. starts[t+1]
    offsets     [T*B]  table t's bag b starts at lookup starts[t] + offsets[t*B + b]
    sorted_keys [N]    each lookup's global id (its table's first row, plus its id), sorted stably
    sorted_at   [N]    the lookup at each sorted position: a key's lookups in lookup order
"""

from __future__ import annotations

import numpy as np

from scratchkit.kernels.floats import fma_f32


def bags_of(at: np.ndarray, t: np.ndarray, starts: np.ndarray, offsets: np.ndarray, num_bags: int) -> np.ndarray:
    """The bag of each lookup at positions `at` of tables `t` (the last bag starting at or before it)."""
    bag = np.empty(len(at), dtype=np.int64)
    for table in np.unique(t):
        mine = t == table
        bags = offsets[table * num_bags : (table + 1) * num_bags]
        bag[mine] = np.searchsorted(bags, at[mine] - starts[table], side="right") - 1
    return bag


def tables_of(at: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The table of each lookup at positions `at`."""
    return np.searchsorted(starts, at, side="right") - 1


def tbe_forward(tables, index, index_base, starts, offsets, pooled) -> None:
    """pooled[b, t] = the sum of table t's rows over the lookups of its bag b, in lookup order."""
    num_bags = pooled.shape[0]
    pooled[...] = 0
    for t, rows in enumerate(tables):
        at = np.arange(starts[t], starts[t + 1])
        bag = bags_of(at, np.full(len(at), t), starts, offsets, num_bags)
        np.add.at(pooled[:, t], bag, rows[index[at] - index_base[t]])


def summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets):
    """The distinct keys' runs: (table [R], row [R] each run updates, summed gradient [R, dim]),
    each run's gradients added in lookup order."""
    n, num_bags = len(sorted_keys), grad.shape[0]
    first = np.ones(n, dtype=bool)
    first[1:] = sorted_keys[1:] != sorted_keys[:-1]  # a run starts here
    run = np.cumsum(first) - 1  # [N] the run of each sorted position
    t = tables_of(sorted_at, starts)  # [N]
    bag = bags_of(sorted_at, t, starts, offsets, num_bags)  # [N]
    summed = np.zeros((int(first.sum()), grad.shape[2]), dtype=np.float32)
    np.add.at(summed, run, grad[bag, t])
    t_run = t[first]
    rows = index[sorted_at[first]] - index_base[t_run]
    return t_run, rows, summed


def tbe_backward_sgd(tables, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr) -> None:
    """row = fma(-lr, g, row) for every distinct looked-up row, g its summed gradient. In place."""
    t_run, rows, g = summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets)
    for t, table in enumerate(tables):
        mine = t_run == t
        table[rows[mine]] = fma_f32(-np.float32(lr), g[mine], table[rows[mine]])


def tbe_backward_rowwise_adagrad(
    tables, states, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr, eps
) -> None:
    """s += mean(g*g); row = fma(-lr, g / (sqrt(s) + eps), row). states[t] is [rows_t, 1]."""
    t_run, rows, g = summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets)
    sum_sq = np.zeros(len(rows), dtype=np.float32)
    for c in range(g.shape[1]):  # column order, as the kernel adds them
        sum_sq += g[:, c] * g[:, c]
    for t, (table, state) in enumerate(zip(tables, states)):
        mine = t_run == t
        r = rows[mine]
        s = state[r, 0] + sum_sq[mine] / np.float32(g.shape[1])
        state[r, 0] = s
        denom = np.sqrt(s) + np.float32(eps)
        table[r] = fma_f32(-np.float32(lr), g[mine] / denom[:, None], table[r])


def tbe_backward_adagrad(
    tables, states, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr, eps
) -> None:
    """s += g*g; row = fma(-lr, g / (sqrt(s) + eps), row), element by element. states[t] [rows_t, dim]."""
    t_run, rows, g = summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets)
    for t, (table, state) in enumerate(zip(tables, states)):
        mine = t_run == t
        r, gt = rows[mine], g[mine]
        s = state[r] + gt * gt
        state[r] = s
        table[r] = fma_f32(-np.float32(lr), gt / (np.sqrt(s) + np.float32(eps)), table[r])


def tbe_count_hits(slot_ids, index, keys, key_base, starts, hits) -> None:
    """hits[0] += the lookups j whose slot index[j] of their table holds their id keys[j] - key_base[t]."""
    for t, ids in enumerate(slot_ids):
        at = slice(starts[t], starts[t + 1])
        hits[0] += np.count_nonzero(ids[index[at]] == keys[at] - key_base[t])


TBE_TWINS = (tbe_forward, tbe_backward_sgd, tbe_backward_rowwise_adagrad, tbe_backward_adagrad, tbe_count_hits)
