/* A block of Criteo TSV lines decoded in one pass: what scratchkit/data/criteo.py's line parser
 * (`parse_line` + `CriteoFormat.rows_to_chunk`) makes of them, or "this block needs the line
 * parser" (tests/test_criteo_native.py holds the two equal over random and corrupted lines).
 *
 * Why. pandas' C tokenizer reads a Criteo line in ~4.5 us here; pyarrow's CSV reader takes ~1.6x
 * that just to split the fields, before NumPy checks and decodes them column by column (the
 * kit's fallback, fields.py). This loop reads each byte once, checks it against the grammar and
 * decodes it on the spot: one pass, no intermediate columns.
 *
 * The grammar (the line parser's `_GOOD_LINE`, narrowed where the line parser is the better judge):
 *     line    = label (TAB count?){13} (TAB hex{0,16}){26} ("\n" | "\r\n" | the end of the block)
 *     label   = "0" | "1"
 *     count   = "-"? digit{1,18}            (the line parser takes up to 308 digits: a longer
 *                                            count, past int64, is declined and left to it)
 *     hex     = [0-9A-Fa-f]{0,16}
 * Anything else anywhere in the block (a wrong column count, a blank line, a lone "\r", a byte
 * outside the grammar, more lines than the caller counted) declines the whole block: the caller
 * reads it again line by line, which names the line and counts what it skips.
 *
 * Output per line i (row-major arrays the caller allocates for `max_lines` lines):
 *     labels[i]                 0 or 1
 *     dense[i*13 + j]           log_table[max(x, 0)] for a count below table_size (missing: 0);
 *                               a larger count is listed in (big_pos, big_val) for the caller
 *                               to compute with NumPy's log1p, bit for bit as the other paths
 *     sparse[i*26 + t]          the hex value (missing: 0), uint32 or uint64 (`Out`)
 *     dense_missing[i*13 + j], dense_negative[i*13 + j] (x < 0), categorical_missing[i*26 + t]
 * Returns the lines decoded, DECLINE, or WIDE when a uint32 call meets a hex of more than 8
 * digits (the caller calls the uint64 version).
 */
#include <cstdint>

namespace {

const int64_t DECLINE = -1;
const int64_t WIDE = -2;
const int NUM_DENSE = 13, NUM_CATEGORICAL = 26, MAX_COUNT_DIGITS = 18, MAX_HEX_DIGITS = 16;

struct HexTable {                      // byte -> its hex value, or 16 for a byte that is no hex digit
    uint8_t value[256];
    HexTable() {
        for (int b = 0; b < 256; b++) value[b] = 16;
        for (int d = 0; d < 10; d++) value['0' + d] = (uint8_t)d;
        for (int d = 0; d < 6; d++) value['a' + d] = value['A' + d] = (uint8_t)(10 + d);
    }
};
const HexTable HEX;

inline bool is_digit(uint8_t b) { return (uint8_t)(b - '0') < 10; }

struct Outputs {
    uint8_t *labels;
    float *dense;
    const float *log_table;
    int64_t table_size;
    void *sparse;
    uint8_t *dense_missing, *dense_negative, *categorical_missing;
    int64_t *big_pos, *big_val, big;   // counts of at least table_size: where, what; how many
};

// One count field from p (just after its tab); false if it is malformed or too long.
inline bool count_field(const uint8_t *&p, const uint8_t *end, int64_t at, Outputs &o) {
    bool negative = p < end && *p == '-';
    p += negative;
    const uint8_t *digits = p;
    uint64_t digits_value = 0;                           // unsigned: a long count wraps, no UB
    while (p < end && is_digit(*p)) digits_value = digits_value * 10 + (*p++ - '0');
    int64_t n = p - digits;
    if (n > MAX_COUNT_DIGITS || (negative && n == 0)) return false;
    int64_t x = (int64_t)digits_value;                   // < 10**18 < 2**63
    o.dense_missing[at] = n == 0;
    o.dense_negative[at] = negative && x > 0;            // "-0" is 0, not negative (as x < 0 says)
    if (negative) x = 0;                                 // clipped: log(1 + max(x, 0))
    if (x < o.table_size) {
        o.dense[at] = o.log_table[x];
    } else {
        o.dense[at] = 0.0f;                              // the caller writes log1p(x) here
        o.big_pos[o.big] = at;
        o.big_val[o.big++] = x;
    }
    return true;
}

// Exactly 8 hex digits at p (and then no ninth), as Criteo writes its hashes: the 8 table
// lookups do not wait on each other, where the loop's shift-or chain does (~2x the whole loop).
inline bool eight_digits(const uint8_t *p, const uint8_t *end, uint32_t &value) {
    if (end - p <= 8) return false;
    const uint8_t *v = HEX.value;
    uint32_t d[8] = {v[p[0]], v[p[1]], v[p[2]], v[p[3]], v[p[4]], v[p[5]], v[p[6]], v[p[7]]};
    if ((d[0] | d[1] | d[2] | d[3] | d[4] | d[5] | d[6] | d[7]) >= 16 || v[p[8]] < 16) return false;
    value = d[0] << 28 | d[1] << 24 | d[2] << 20 | d[3] << 16 | d[4] << 12 | d[5] << 8 | d[6] << 4 | d[7];
    return true;
}

// One hex field; false if malformed (more than 16 digits), `wide` set past 8 digits.
template <typename Out>
inline bool hex_field(const uint8_t *&p, const uint8_t *end, int64_t at, Outputs &o, bool &wide) {
    uint32_t eight;
    if (eight_digits(p, end, eight)) {
        static_cast<Out *>(o.sparse)[at] = eight;
        o.categorical_missing[at] = 0;
        p += 8;
        return true;
    }
    const uint8_t *digits = p;
    uint64_t v = 0;
    uint8_t d;
    while (p < end && (d = HEX.value[*p]) < 16) {
        v = v << 4 | d;
        p++;
    }
    int64_t n = p - digits;
    if (n > MAX_HEX_DIGITS) return false;
    if (sizeof(Out) < 8 && n > 8) wide = true;
    static_cast<Out *>(o.sparse)[at] = (Out)v;
    o.categorical_missing[at] = n == 0;
    return true;
}

template <typename Out>
int64_t parse(const uint8_t *p, int64_t size, int64_t max_lines, Outputs &o) {
    const uint8_t *end = p + size;
    int64_t line = 0;
    bool wide = false;
    o.big = 0;
    while (p < end) {
        if (line == max_lines || (*p != '0' && *p != '1')) return DECLINE;
        o.labels[line] = *p++ - '0';
        for (int j = 0; j < NUM_DENSE; j++) {
            if (p == end || *p++ != '\t' || !count_field(p, end, line * NUM_DENSE + j, o))
                return DECLINE;
        }
        for (int t = 0; t < NUM_CATEGORICAL; t++) {
            if (p == end || *p++ != '\t' || !hex_field<Out>(p, end, line * NUM_CATEGORICAL + t, o, wide))
                return DECLINE;
        }
        if (wide) return WIDE;
        if (p < end) {                                   // the line ends here, or the block does
            if (*p == '\r' && ++p == end) return DECLINE;     // a lone "\r" ends the block
            if (*p++ != '\n') return DECLINE;               // a lone "\r", or more fields
        }
        line++;
    }
    return line;
}

}  // namespace

extern "C" {

// The block's lines decoded (see the top of this file); `wide_out` 0: sparse is uint32 [lines, 26],
// 1: uint64. Reads data[0, size), writes only the arrays given; never allocates.
int64_t sk_criteo_parse(const uint8_t *data, int64_t size, int64_t max_lines, int64_t wide_out,
                        const float *log_table, int64_t table_size, uint8_t *labels, float *dense,
                        void *sparse, uint8_t *dense_missing, uint8_t *dense_negative,
                        uint8_t *categorical_missing, int64_t *big_pos, int64_t *big_val,
                        int64_t *big_count) {
    Outputs o{labels, dense, log_table, table_size, sparse, dense_missing, dense_negative,
              categorical_missing, big_pos, big_val, 0};
    int64_t lines = wide_out ? parse<uint64_t>(data, size, max_lines, o)
                             : parse<uint32_t>(data, size, max_lines, o);
    *big_count = o.big;
    return lines;
}

}  // extern "C"
