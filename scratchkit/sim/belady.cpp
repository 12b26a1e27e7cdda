/* Belady's OPT hits at one capacity, on positions: the C twin of `mrc._opt_hits`.
 *
 * keys[t] is the next use of access t's row (>= n and distinct for rows never used again), so
 * every key names one future access. pending[k] says a resident row is next used at k: access t
 * hits iff pending[t]. On a miss with the cache full, the resident row with the furthest pending
 * key is the victim, taken from a max-heap of keys. A hit leaves its old key in the heap (stale:
 * pending is clear); stale keys are skipped when they surface, and the heap is rebuilt from the
 * pending keys alone whenever it grows past twice the capacity, so it stays O(capacity).
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

void sift_down(int64_t *heap, int64_t n, int64_t i) {
    int64_t v = heap[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap[c + 1] > heap[c]) c++;
        if (heap[c] <= v) break;
        heap[i] = heap[c]; i = c;
    }
    heap[i] = v;
}

void push(int64_t *heap, int64_t *n, int64_t v) {
    int64_t i = (*n)++;
    while (i > 0 && heap[(i - 1) / 2] < v) { heap[i] = heap[(i - 1) / 2]; i = (i - 1) / 2; }
    heap[i] = v;
}

int64_t pop(int64_t *heap, int64_t *n) {
    int64_t top = heap[0];
    heap[0] = heap[--*n];
    if (*n) sift_down(heap, *n, 0);
    return top;
}

}  // namespace

extern "C" {

// Hits of OPT with `capacity` rows; -1 if memory ran out. keys[n], each < 2n.
int64_t sk_belady_hits(const int64_t *keys, int64_t n, int64_t capacity) {
    uint8_t *pending = static_cast<uint8_t *>(std::calloc(2 * n + 1, 1));
    int64_t limit = 2 * capacity + 16;
    int64_t *heap = static_cast<int64_t *>(std::malloc((limit + 1) * sizeof(int64_t)));
    if (!pending || !heap) { std::free(pending); std::free(heap); return -1; }
    int64_t size = 0, resident = 0, hits = 0;
    for (int64_t t = 0; t < n; t++) {
        if (pending[t]) {                                 // this access was a row's next use
            hits++;
            pending[t] = 0;
        } else if (resident == capacity) {
            for (;;) {                                    // furthest pending key; skip stale
                int64_t victim = pop(heap, &size);
                if (pending[victim]) { pending[victim] = 0; break; }
            }
        } else {
            resident++;
        }
        pending[keys[t]] = 1;
        if (size == limit) {                              // rebuild from the live keys alone
            int64_t kept = 0;
            for (int64_t i = 0; i < size; i++)
                if (pending[heap[i]]) heap[kept++] = heap[i];
            size = kept;
            for (int64_t i = size / 2 - 1; i >= 0; i--) sift_down(heap, size, i);
        }
        push(heap, &size, keys[t]);
    }
    std::free(pending); std::free(heap);
    return hits;
}

}  // extern "C"
