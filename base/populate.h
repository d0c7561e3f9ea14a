// Fresh memory backed in one call before its first write.
//
// The first write to a never-touched 4 KB page takes a page fault. On a
// guest whose hypervisor intercepts every fault that dominates the cost of
// fresh memory: 64 MB written page by page took 157-175 ms on one such
// guest, populated by one madvise(MADV_POPULATE_WRITE) (8-9 ms) and then
// written 82-100 ms in all; what is left is the host's own first touch of
// each page, which only huge pages remove. A step's buffers (the KV cache,
// the rows' logits, the scratch) are fresh memory the first time a session
// grows into them: verifying a receipt took ~5,000 faults inside its
// recomputation, and 15,490 in all (1,191 since). PopulateForWrite asks the
// kernel to back a range at once; it is a hint that changes timing, never
// contents, and does nothing where the call is missing or refused (a
// kernel before 5.14). Stateless; thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

namespace lockstep {

// Backs the whole 4 KB pages inside [p, p + bytes) with memory, as writing
// them would, in one call. Ranges holding no whole page cost nothing.
// Returns whether the pages are now backed (true for such ranges); false
// where the kernel lacks or refused the call, the first writes then fault.
bool PopulateForWrite(void* p, size_t bytes);

// Growth below this is left to fault: a decode step grows its KV cache by
// a few hundred bytes, into pages a reserved cache already holds, and a
// call per step would cost more than the rare fault it saves.
inline constexpr size_t kPopulateMinBytes = size_t{64} << 10;

// v.resize(n, value), the storage of elements it adds populated before
// they are written when that is at least kPopulateMinBytes. Capacity still
// grows geometrically, so a vector grown an element at a time stays
// amortised O(1).
template <class T>
void ResizePopulated(std::vector<T>& v, size_t n, const T& value = T()) {
  if (n > v.capacity()) {  // the elements kept move to storage populated first
    std::vector<T> grown;
    grown.reserve(std::max(n, 2 * v.capacity()));
    if (n * sizeof(T) >= kPopulateMinBytes) PopulateForWrite(grown.data(), n * sizeof(T));
    grown.insert(grown.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
    v.swap(grown);
  } else if ((n - std::min(n, v.size())) * sizeof(T) >= kPopulateMinBytes) {
    PopulateForWrite(v.data() + v.size(), (n - v.size()) * sizeof(T));
  }
  v.resize(n, value);
}

}  // namespace lockstep
