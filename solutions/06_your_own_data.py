"""Solutions to notebook 06's exercises, as a learner might write them (see 01's file)."""
import math

import numpy as np


def hottest_share(trace, fraction):
    trace = np.asarray(trace)
    if trace.size == 0:
        raise ValueError("an empty trace has no lookups to share")
    counts = np.sort(np.unique(trace, return_counts=True)[1])[::-1]
    hottest = max(1, math.ceil(fraction * counts.size))
    return counts[:hottest].sum() / trace.size


def table_rows(values, max_rows):
    distinct = np.unique(values)
    if max_rows is None or distinct.size <= max_rows:
        return np.searchsorted(distinct, values)
    return values % max_rows
