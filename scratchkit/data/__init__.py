"""Where batches come from: synthetic generators, real-format loaders, access traces."""
from scratchkit.data.batch import Batch

__all__ = ["Batch"]
