"""One mini-batch of a DLRM-style model, in EmbeddingBag's (ids, offsets) convention."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Batch:
    """Dense features, per-table sparse ids and the click labels of `B` samples.

    Table `t`'s bag for sample `b` is `ids[t][offsets[t][b] : offsets[t][b+1]]` (the last bag runs
    to the end of `ids[t]`), exactly what `torch.nn.functional.embedding_bag` takes.
    """

    dense: np.ndarray  # [B, num_dense] float32
    ids: tuple[np.ndarray, ...]  # per table t: int64 [nnz_t], rows in [0, table_sizes[t])
    offsets: tuple[np.ndarray, ...]  # per table t: int64 [B], start of each bag in ids[t]
    labels: np.ndarray  # [B] float32 in {0, 1}

    @property
    def batch_size(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_tables(self) -> int:
        return len(self.ids)

    def lookups(self) -> int:
        """Embedding lookups in this batch, all tables together."""
        return int(sum(len(i) for i in self.ids))

    def nbytes(self) -> int:
        """Bytes of the batch's arrays (and of any batch it carries: a routed batch's global one)."""
        arrays = (self.dense, self.labels, *self.ids, *self.offsets)
        return int(sum(np.asarray(a).nbytes for a in arrays))


def micro_batch(batch: Batch, part: int, parts: int) -> Batch:
    """Samples part*B/parts .. (part+1)*B/parts - 1 of `batch`, as a batch of their own.

    A global batch trained as `parts` micro-batches (gradient accumulation), or by `parts` ranks
    that each take one (scratchkit/distributed): rank r's share is `micro_batch(batch, r, N)`.
    """
    size = batch.batch_size
    if parts <= 0 or size % parts:
        raise ValueError(
            f"a batch of {size} samples does not split into {parts} equal micro-batches: "
            f"the batch size must be a multiple of the number of parts (ranks)"
        )
    if not 0 <= part < parts:
        raise ValueError(f"part {part} is out of range [0, {parts})")
    lo, hi = part * size // parts, (part + 1) * size // parts
    ids, offsets = [], []
    for table_ids, table_offsets in zip(batch.ids, batch.offsets):
        first = int(table_offsets[lo])
        end = int(table_offsets[hi]) if hi < size else len(table_ids)
        ids.append(table_ids[first:end])
        offsets.append(table_offsets[lo:hi] - first)
    return Batch(dense=batch.dense[lo:hi], ids=tuple(ids), offsets=tuple(offsets), labels=batch.labels[lo:hi])
