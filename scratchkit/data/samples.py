"""Where the kit finds Criteo data it does not ship, inside the repository only.

COMMITTED_SAMPLE   datasets/samples/criteo-synthetic.tsv: 48 made-up rows in Criteo's format,
                   committed (datasets/make_samples.py writes it)
KAGGLE_SAMPLE      datasets/real/criteo-kaggle-sample/train.tsv: the 7,200-row Criteo Kaggle
                   sample, which you place (or link) there yourself: git ignores datasets/real/,
                   since Criteo released the data for research use, not for redistribution
                   (datasets/README.md). The notebooks, scripts and tests that use it read it
                   from here and fall back or skip where it is absent.
"""

from __future__ import annotations

from pathlib import Path

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
COMMITTED_SAMPLE = DATASETS / "samples" / "criteo-synthetic.tsv"
KAGGLE_SAMPLE = DATASETS / "real" / "criteo-kaggle-sample" / "train.tsv"
PLACE_IT = f"place or link the Criteo Kaggle sample at {KAGGLE_SAMPLE} (datasets/README.md)"
