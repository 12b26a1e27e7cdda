"""calibration/tbe_timings.py's update curve: a sparser update costs no less a row than a denser one
of the same row size and table, so a sparse point timed as nothing (a small difference from the
call's fixed cost, lost in noise) is raised to its denser neighbour's, and a small table's sparse
update is not priced as free."""

from scratchkit.calibration.tbe_timings import sparse_no_cheaper
from scratchkit.costmodel.hardware import RowCurve


def test_a_sparse_point_timed_as_nothing_takes_its_denser_neighbours_price():
    timed = [(0.05, 4.5e-11), (0.25, 1.7e-8), (0.6, 1.45e-8), (0.98, 1.0e-8)]
    assert sparse_no_cheaper(64, 2**18, timed) == [
        (64, 2**18, 0.05, 1.7e-8),
        (64, 2**18, 0.25, 1.7e-8),
        (64, 2**18, 0.6, 1.45e-8),
        (64, 2**18, 0.98, 1.0e-8),
    ]
    steady = [(0.05, 3e-8), (0.25, 2e-8)]  # already no cheaper: unchanged
    assert sparse_no_cheaper(64, 2**20, steady) == [(64, 2**20, 0.05, 3e-8), (64, 2**20, 0.25, 2e-8)]


def test_a_small_tables_sparse_update_is_priced_near_its_neighbours_not_free():
    """`small`'s update: 880 of 20,000 rows of 64 B a table (4.4%), its footprint the rows the whole
    step touches (8 tables: about 7,000 rows, 440 KiB; `Work.in_step`), between the 256 KiB and
    1 MiB tables' points. With the 256 KiB table's sparsest point floored it is priced at under
    a tenth of either neighbour's."""
    floored = [(0.05, 4.5e-11), (0.25, 1.7e-8), (0.6, 1.45e-8)]
    bigger = [(0.05, 2.1e-8), (0.25, 2.2e-8), (0.6, 1.35e-8)]
    raw = RowCurve(tuple((64, 2**18, d, s) for d, s in floored) + tuple((64, 2**20, d, s) for d, s in bigger))
    fixed = RowCurve(tuple(sparse_no_cheaper(64, 2**18, floored) + sparse_no_cheaper(64, 2**20, bigger)))
    at = lambda curve: curve.seconds_per_row(64, 7000 * 64, 0.044)
    assert at(raw) < 2e-9  # what the floored point made of it
    assert 1.7e-8 <= at(fixed) <= 2.2e-8


def test_the_backward_is_timed_past_radix_min_a_table_in_both_calibrations():
    """Past RADIX_MIN lookups a table the loop sorts by its radix sort, not introsort: a curve timed
    only below it priced embedding-bound's 82k lookups a table at introsort's cost of 2k."""
    from scratchkit.calibration.kit_timings import TABLES
    from scratchkit.calibration.tbe_timings import BACKWARD_LOOKUPS
    from scratchkit.embedding.tbe_native import RADIX_MIN

    assert all(max(sizes) >= TABLES * RADIX_MIN for sizes in BACKWARD_LOOKUPS)
