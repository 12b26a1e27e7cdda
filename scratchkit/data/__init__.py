"""Where batches come from: synthetic generators, real-format loaders, access traces.

    source, config = scratchkit.data.open("criteo", "train.tsv", batch_size=128)

`open` (scratchkit/data/open_data.py) reads Criteo TSV, MovieLens and TorchRec's Criteo `.npy`
files, streaming, and derives the TrainConfig that matches the data.
"""

from scratchkit.data.batch import Batch


def open(kind, path=None, **options):  # noqa: A001 (scratchkit.data.open, as the issue names it)
    """(source, config) for a data file: see `scratchkit.data.open_data.open_data`."""
    from scratchkit.data.open_data import open_data

    return open_data(kind, path, **options)


def config_for(source, **options):
    """The TrainConfig that matches a batch source: see `scratchkit.data.open_data.config_for`."""
    from scratchkit.data.open_data import config_for as derive

    return derive(source, **options)


__all__ = ["Batch", "open", "config_for"]
