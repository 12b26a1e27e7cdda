/* A batch's raw values to rows of their tables' dictionaries: np.searchsorted(dictionary,
 * values) for every table that has one, in one call (scratchkit/data/row_maps.py, `RowMapper`;
 * tests/test_row_maps_native.py holds it equal to NumPy's searchsorted).
 *
 * Why. A Criteo batch of 128 samples looks up 26 x 128 values. NumPy does it as 26 calls, each
 * a binary search per value; in a dictionary of a million values most steps of such a search
 * miss every cache (~100 ns each), one after the other. Here all the batch's searches in one
 * table advance a step together: the loads of one step do not depend on each other, so the CPU
 * has many misses in flight at once instead of one.
 *
 * raw      [n, T] row-major, uint32 or uint64 (`raw_wide`)
 * tables   [k] the tables to map; dicts[j] its sorted distinct values, sizes[j] how many,
 *          dict_wide[j] 0: uint32, 1: uint64
 * out      [T, n] int64: out[t*n + i] = the number of values of t's dictionary below raw[i, t]
 *          (its rank when present), for t in `tables`; other rows of `out` are left alone
 * scratch  [n] int64
 */
#include <cstdint>

namespace {

template <typename R, typename K>
void search(const R *raw, int64_t n, int64_t num_tables, int64_t t, const K *dict, int64_t size,
            int64_t *out, int64_t *base) {
    for (int64_t i = 0; i < n; i++) base[i] = 0;
    for (int64_t len = size; len > 1;) {          // the same halving for every search: lockstep
        int64_t half = len / 2;
        for (int64_t i = 0; i < n; i++) {
            K key = (K)raw[i * num_tables + t];      // as values.astype(dictionary.dtype)
            base[i] += dict[base[i] + half - 1] < key ? half : 0;
        }
        len -= half;
    }
    for (int64_t i = 0; i < n; i++) {
        K key = (K)raw[i * num_tables + t];
        out[t * n + i] = base[i] + (size > 0 && dict[base[i]] < key);
    }
}

template <typename R>
void map_tables(const R *raw, int64_t n, int64_t num_tables, int64_t k, const int64_t *tables,
                const void *const *dicts, const int64_t *sizes, const int64_t *dict_wide,
                int64_t *out, int64_t *scratch) {
    for (int64_t j = 0; j < k; j++) {
        if (dict_wide[j])
            search(raw, n, num_tables, tables[j], (const uint64_t *)dicts[j], sizes[j], out, scratch);
        else
            search(raw, n, num_tables, tables[j], (const uint32_t *)dicts[j], sizes[j], out, scratch);
    }
}

}  // namespace

extern "C" {

void sk_rows_searched(const void *raw, int64_t raw_wide, int64_t n, int64_t num_tables, int64_t k,
                      const int64_t *tables, const void *const *dicts, const int64_t *sizes,
                      const int64_t *dict_wide, int64_t *out, int64_t *scratch) {
    if (raw_wide)
        map_tables((const uint64_t *)raw, n, num_tables, k, tables, dicts, sizes, dict_wide, out, scratch);
    else
        map_tables((const uint32_t *)raw, n, num_tables, k, tables, dicts, sizes, dict_wide, out, scratch);
}

}  // extern "C"
