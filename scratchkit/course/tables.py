"""The course's own tables, as HTML (the results model: scratchkit/measure/report.py, whose
`bench_table`, `bound_table` and `validation_table` the notebooks show too).

    sampling_table(samples)             exact vs SHARDS-sampled LRU curves: error and time
"""

from __future__ import annotations

from scratchkit.measure.report import Table


def sampling_table(samples) -> Table:
    """`analysis.sampled_lru`'s curves: what each rate lists, its error from 1/rate rows up, its time."""
    rows = [
        [
            "exact" if s.rate == 1.0 else f"{s.rate:g}",
            f"{s.curve.capacities.size:,}",
            f"{s.trusted_from:,}",
            f"{100 * s.mae:.2f}",
            f"{100 * s.max_error:.1f}",
            f"{1000 * s.seconds:.2f}",
        ]
        for s in samples
    ]
    return Table(
        [
            "sample rate",
            "capacities listed",
            "trusted from (rows)",
            "mean error (points)",
            "largest error (points)",
            "ms",
        ],
        rows,
        caption="Errors are hit-rate percentage points against the exact curve, at every capacity "
        "from the trusted one to the distinct ids.",
    )
