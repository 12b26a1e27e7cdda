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

    dense: np.ndarray               # [B, num_dense] float32
    ids: tuple[np.ndarray, ...]     # per table t: int64 [nnz_t], rows in [0, table_sizes[t])
    offsets: tuple[np.ndarray, ...] # per table t: int64 [B], start of each bag in ids[t]
    labels: np.ndarray              # [B] float32 in {0, 1}

    @property
    def batch_size(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_tables(self) -> int:
        return len(self.ids)

    def lookups(self) -> int:
        """Embedding lookups in this batch, all tables together."""
        return int(sum(len(i) for i in self.ids))
