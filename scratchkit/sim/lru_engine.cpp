/* LRU stack distances, streamed: a Fenwick tree over last-use times, with SHARDS sampling.
 *
 * The readable specification of this file is `stack_twin.py` (Mattson's stack as a Python list);
 * `native.py` builds it with g++ and calls it through ctypes; tests check that the two agree.
 *
 * State (memory grows with the ids kept, never with the trace length):
 *   table    open-addressing hash map, id -> its last-use time (key and time in one entry)
 *   marks    one bit per time: set iff the time is the last use of a kept id
 *   tree     Fenwick tree over the marks' 64-bit words (counts of set bits)
 *   owner    time -> table slot of the id used then (valid while its mark is set)
 * An access to id x last used at time p has stack distance = marks after p = live - prefix(p):
 * every kept id used since counts once, at its own last use. Then p is unmarked and the current
 * time is marked. When times run out, the marked times are renumbered 0..live-1 (compaction):
 * O(live) work every ~3 live accesses, so there are at most 4 times per kept id. A bit per time
 * and a tree over words keep both in the L2 cache for a million ids (0.5 MB + 0.25 MB): the one
 * random memory access left per lookup is the hash entry.
 *
 * Sampling (SHARDS, Waldspurger et al. FAST'15): an access is kept iff fmix64(id) < threshold.
 *   exact       threshold = 2^64 - 1 and no hashing at all: every access is kept;
 *   fixed rate  threshold = rate * 2^64: distances are histogrammed as sampled (scaled later);
 *   fixed size  at most `max_ids` ids are kept; when one more arrives, the id with the largest
 *               hash is dropped from the stack and the threshold falls to its hash. Each sampled
 *               access then adds weight 1/rate (rate = threshold / 2^64 at that moment) to the
 *               bin of its scaled distance d / rate; bins are `width` rows wide, and width
 *               doubles (pairs of bins merge) whenever the bins would exceed `max_bins`.
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

const uint64_t EMPTY = ~0ULL;            // no id is 2^64 - 1 (ids are non-negative int64)
const double TWO64 = 18446744073709551616.0;

inline uint64_t fmix64(uint64_t h) {     // murmur3's finalizer, as `setassoc.set_of` computes it
    h ^= h >> 33; h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33; h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33; return h;
}

struct Entry { uint64_t key; int64_t when; };            // key EMPTY: a free slot

struct Engine {
    Entry *table; int64_t tcap; int shift;               // tcap: a power of two
    uint64_t *marks; int32_t *tree; int64_t *owner;      // marks[fcap/64], tree[1..fcap/64]
    int64_t fcap; int64_t now;                           // times 0..fcap-1; next one to hand out
    int64_t live;                                        // ids kept = marks set
    // exact / fixed rate: hist[d] = sampled accesses at distance d
    int64_t *hist; int64_t hcap; int64_t hlen;
    // fixed size: max-heap of the kept ids' hashes; weighted bins of scaled distance
    uint64_t *heap_hash; uint64_t *heap_id; int64_t heap_len; int64_t max_ids;
    double *bins; int64_t blen; int64_t bcap; int64_t max_bins; double width; double weight;
    uint64_t threshold; int exact;
    int64_t seen, sampled, cold;         // accesses fed, accesses kept, first accesses kept
};

void *grow(void *old, int64_t old_n, int64_t new_n, size_t item, int fill) {
    char *p = static_cast<char *>(std::realloc(old, new_n * item));
    if (p) std::memset(p + old_n * item, fill, (new_n - old_n) * item);
    return p;
}

inline int64_t slot_of(const Engine *e, uint64_t id) {     // Fibonacci hashing: top bits
    return static_cast<int64_t>((id * 0x9E3779B97F4A7C15ULL) >> e->shift);
}

inline int64_t find(const Engine *e, uint64_t id) {      // slot of id, or -1
    int64_t mask = e->tcap - 1;
    for (int64_t s = slot_of(e, id);; s = (s + 1) & mask) {
        if (e->table[s].key == id) return s;
        if (e->table[s].key == EMPTY) return -1;
    }
}

int64_t place(Engine *e, uint64_t id, int64_t when) {    // insert a new id; returns its slot
    int64_t mask = e->tcap - 1, s = slot_of(e, id);
    while (e->table[s].key != EMPTY) s = (s + 1) & mask;
    e->table[s].key = id; e->table[s].when = when;
    return s;
}

void rehash(Engine *e, int64_t tcap) {                   // new table; owners follow their slots
    Entry *old = e->table; int64_t n = e->tcap;
    e->tcap = tcap; e->shift = 64;
    for (int64_t c = tcap; c > 1; c >>= 1) e->shift--;
    e->table = static_cast<Entry *>(std::malloc(tcap * sizeof(Entry)));
    std::memset(e->table, 0xFF, tcap * sizeof(Entry));
    for (int64_t s = 0; s < n; s++)
        if (old[s].key != EMPTY) e->owner[old[s].when] = place(e, old[s].key, old[s].when);
    std::free(old);
}

void unplace(Engine *e, int64_t s) {                     // delete slot s (backward shift)
    int64_t mask = e->tcap - 1;
    for (int64_t next = (s + 1) & mask; e->table[next].key != EMPTY; next = (next + 1) & mask) {
        int64_t home = slot_of(e, e->table[next].key);
        // move `next` into the hole `s` unless its home lies cyclically in (s, next]
        if (((next - home) & mask) >= ((next - s) & mask)) {
            e->table[s] = e->table[next];
            e->owner[e->table[s].when] = s;
            s = next;
        }
    }
    e->table[s].key = EMPTY;
}

inline int64_t prefix(const Engine *e, int64_t time) {   // marks at times 0..time
    int64_t w = time >> 6, sum = 0;
    uint64_t upto = ~0ULL >> (63 - (time & 63));         // bits 0..time%64
    sum = __builtin_popcountll(e->marks[w] & upto);
    for (int64_t i = w; i > 0; i &= i - 1) sum += e->tree[i];   // words 0..w-1
    return sum;
}

inline void flip(Engine *e, int64_t time, int32_t v) {   // v = +1 sets the mark, -1 clears it
    int64_t w = time >> 6;
    e->marks[w] ^= 1ULL << (time & 63);
    for (int64_t i = w + 1; i <= e->fcap >> 6; i += i & -i) e->tree[i] += v;
}

void compact(Engine *e) {                                // renumber marked times 0..live-1
    int64_t k = 0, words = e->fcap >> 6;
    for (int64_t w = 0; w < words; w++)
        for (uint64_t bits = e->marks[w]; bits; bits &= bits - 1) {
            int64_t t = (w << 6) + __builtin_ctzll(bits);
            int64_t s = e->owner[t];
            e->owner[k] = s; e->table[s].when = k; k++;
        }
    if (4 * k > e->fcap) {                               // keep at least 3/4 of the times free
        int64_t fcap = ((4 * k + 63) >> 6) << 6;
        e->owner = static_cast<int64_t *>(std::realloc(e->owner, fcap * sizeof(int64_t)));
        e->marks = static_cast<uint64_t *>(std::realloc(e->marks, (fcap >> 6) * sizeof(uint64_t)));
        e->tree = static_cast<int32_t *>(std::realloc(e->tree, ((fcap >> 6) + 1) * sizeof(int32_t)));
        e->fcap = fcap; words = fcap >> 6;
    }
    for (int64_t w = 0; w < words; w++) {                // times 0..k-1 marked
        int64_t lo = w << 6;
        e->marks[w] = k >= lo + 64 ? ~0ULL : (k > lo ? (~0ULL >> (64 - (k - lo))) : 0ULL);
    }
    for (int64_t i = 1; i <= words; i++) {               // node i covers words i-lowbit(i)..i-1
        int64_t low = (i - (i & -i)) << 6, high = i << 6;
        int64_t covered = (k < high ? k : high) - low;
        e->tree[i] = static_cast<int32_t>(covered > 0 ? covered : 0);
    }
    e->now = k;
}

void count(Engine *e, int64_t d) {                       // exact / fixed rate: hist[d] += 1
    if (d >= e->hcap) {
        int64_t cap = e->hcap * 2 > d + 1 ? e->hcap * 2 : d + 1;
        e->hist = static_cast<int64_t *>(grow(e->hist, e->hcap, cap, sizeof(int64_t), 0));
        e->hcap = cap;
    }
    e->hist[d]++;
    if (d >= e->hlen) e->hlen = d + 1;
}

void weigh(Engine *e, double scaled, double w) {         // fixed size: bins[scaled/width] += w
    int64_t b = static_cast<int64_t>(scaled / e->width);
    while (b >= e->max_bins) {                           // merge pairs of bins: width doubles
        int64_t half = (e->blen + 1) / 2;
        for (int64_t i = 0; i < half; i++)
            e->bins[i] = e->bins[2 * i] + (2 * i + 1 < e->blen ? e->bins[2 * i + 1] : 0.0);
        for (int64_t i = half; i < e->blen; i++) e->bins[i] = 0.0;
        e->blen = half; e->width *= 2; b = static_cast<int64_t>(scaled / e->width);
    }
    if (b >= e->bcap) {
        int64_t cap = e->bcap * 2 > b + 1 ? e->bcap * 2 : b + 1;
        e->bins = static_cast<double *>(grow(e->bins, e->bcap, cap, sizeof(double), 0));
        e->bcap = cap;
    }
    e->bins[b] += w;
    if (b >= e->blen) e->blen = b + 1;
}

void heap_push(Engine *e, uint64_t h, uint64_t id) {     // max-heap by hash
    int64_t i = e->heap_len++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (e->heap_hash[up] >= h) break;
        e->heap_hash[i] = e->heap_hash[up]; e->heap_id[i] = e->heap_id[up]; i = up;
    }
    e->heap_hash[i] = h; e->heap_id[i] = id;
}

void heap_pop(Engine *e) {                               // drop the root
    uint64_t h = e->heap_hash[--e->heap_len], id = e->heap_id[e->heap_len];
    int64_t i = 0, n = e->heap_len;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && e->heap_hash[c + 1] > e->heap_hash[c]) c++;
        if (e->heap_hash[c] <= h) break;
        e->heap_hash[i] = e->heap_hash[c]; e->heap_id[i] = e->heap_id[c]; i = c;
    }
    e->heap_hash[i] = h; e->heap_id[i] = id;
}

void forget(Engine *e, uint64_t id) {                    // fixed size: drop a kept id
    int64_t s = find(e, id);
    flip(e, e->table[s].when, -1);
    unplace(e, s);
    e->live--;
}

// One kept access; returns its stack distance among kept ids, -1 for a first access.
inline int64_t touch(Engine *e, uint64_t id) {
    int64_t s = find(e, id), d = -1;
    if (s >= 0) {
        int64_t t = e->table[s].when;
        d = e->live - prefix(e, t);
        flip(e, t, -1);
    } else {
        if (2 * (e->live + 1) > e->tcap) rehash(e, 2 * e->tcap);
        s = place(e, id, 0);
        e->live++;
    }
    if (e->now == e->fcap) compact(e);
    flip(e, e->now, 1); e->owner[e->now] = s; e->table[s].when = e->now; e->now++;
    return d;
}

void feed_one(Engine *e, uint64_t id) {
    if (e->exact) {
        int64_t d = touch(e, id);
        if (d >= 0) count(e, d); else e->cold++;
        return;
    }
    uint64_t h = fmix64(id);
    if (h >= e->threshold) return;
    e->sampled++;
    double w = TWO64 / static_cast<double>(e->threshold);   // 1 / rate, before any drop
    int64_t d = touch(e, id);
    if (e->max_ids == 0) {                               // fixed rate
        if (d >= 0) count(e, d); else e->cold++;
        return;
    }
    e->weight += w;
    if (d >= 0) { weigh(e, static_cast<double>(d) * w, w); return; }
    e->cold++;
    heap_push(e, h, id);
    if (e->live > e->max_ids) {                          // one too many: drop the largest hash
        uint64_t top = e->heap_hash[0], victim = e->heap_id[0];
        heap_pop(e);
        forget(e, victim);
        e->threshold = top;
    }
}

}  // namespace

extern "C" {

// threshold: keep ids with fmix64(id) < threshold (2^64-1 with exact=1: keep all, no hashing);
// max_ids > 0: fixed size with at most max_ids ids; max_bins: bins kept in that mode.
void *sk_lru_new(uint64_t threshold, int exact, int64_t max_ids, int64_t max_bins) {
    Engine *e = static_cast<Engine *>(std::calloc(1, sizeof(Engine)));
    if (!e) return nullptr;
    e->threshold = threshold; e->exact = exact; e->max_ids = max_ids;
    e->max_bins = max_bins > 0 ? max_bins : 1; e->width = 1.0;
    e->tcap = 1024; e->shift = 54;
    e->table = static_cast<Entry *>(std::malloc(e->tcap * sizeof(Entry)));
    std::memset(e->table, 0xFF, e->tcap * sizeof(Entry));
    e->fcap = 4096;
    e->marks = static_cast<uint64_t *>(std::calloc(e->fcap >> 6, sizeof(uint64_t)));
    e->tree = static_cast<int32_t *>(std::calloc((e->fcap >> 6) + 1, sizeof(int32_t)));
    e->owner = static_cast<int64_t *>(std::calloc(e->fcap, sizeof(int64_t)));
    if (max_ids > 0) {
        e->heap_hash = static_cast<uint64_t *>(std::malloc((max_ids + 1) * sizeof(uint64_t)));
        e->heap_id = static_cast<uint64_t *>(std::malloc((max_ids + 1) * sizeof(uint64_t)));
    }
    return e;
}

void sk_lru_free(void *handle) {
    Engine *e = static_cast<Engine *>(handle);
    if (!e) return;
    std::free(e->table); std::free(e->marks); std::free(e->tree); std::free(e->owner);
    std::free(e->hist); std::free(e->heap_hash); std::free(e->heap_id); std::free(e->bins);
    std::free(e);
}

void sk_lru_feed(void *handle, const int64_t *ids, int64_t n) {
    Engine *e = static_cast<Engine *>(handle);
    const int64_t ahead = 16;            // prefetch the hash entry of the access 16 ahead:
    for (int64_t i = 0; i < n; i++) {   // its cache miss overlaps the work on this one
        if (i + ahead < n) {
            uint64_t next = static_cast<uint64_t>(ids[i + ahead]);
            if (e->exact || fmix64(next) < e->threshold)
                __builtin_prefetch(&e->table[slot_of(e, next)]);
        }
        feed_one(e, static_cast<uint64_t>(ids[i]));
    }
    e->seen += n;
}

// counts[6] = seen, sampled, cold, live, hist length, bins length;
// reals[3] = total weight, bin width, threshold / 2^64 (the current rate)
void sk_lru_stats(void *handle, int64_t *counts, double *reals) {
    Engine *e = static_cast<Engine *>(handle);
    counts[0] = e->seen; counts[1] = e->exact ? e->seen : e->sampled; counts[2] = e->cold;
    counts[3] = e->live; counts[4] = e->hlen; counts[5] = e->blen;
    reals[0] = e->weight; reals[1] = e->width;
    reals[2] = e->exact ? 1.0 : static_cast<double>(e->threshold) / TWO64;
}

void sk_lru_hist(void *handle, int64_t *out) {           // out[hist length]
    Engine *e = static_cast<Engine *>(handle);
    if (e->hlen) std::memcpy(out, e->hist, e->hlen * sizeof(int64_t));
}

void sk_lru_bins(void *handle, double *out) {            // out[bins length]
    Engine *e = static_cast<Engine *>(handle);
    if (e->blen) std::memcpy(out, e->bins, e->blen * sizeof(double));
}

}  // extern "C"
