// The orders the table-batched backward (table_batched.cpp) coalesces a table's gradients in:
// torch.sort's own, and the kit's by-id order (SummationOrder.BY_ID). Built in torch_sort.cpp.
#pragma once
#include <cstdint>
#include <vector>

namespace sk {

// An element packs (id << 32) | position, so the ids and positions must be below 2^32.
typedef uint64_t Packed;
inline uint32_t id_of(Packed e) { return static_cast<uint32_t>(e >> 32); }
inline int64_t position_of(Packed e) { return static_cast<int64_t>(e & 0xffffffffu); }

// ids [n] -> `a` [n] packed in torch.sort's order (n below 32768). False: an id or n out of range.
bool sort_like_torch(const int64_t* ids, int64_t n, std::vector<Packed>& a);

// ids [n] -> `a` [n] packed, sorted by id and, within an id, by position. False: out of range.
bool sort_by_id(const int64_t* ids, int64_t n, std::vector<Packed>& a);

}  // namespace sk
