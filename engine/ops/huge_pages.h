// Huge pages for fresh memory: whether a buffer about to be touched for the
// first time should ask for 2 MB pages before that touch or after it.
//
// Asking first (MADV_HUGEPAGE, then the first touch) backs the buffer with
// 2 MB pages at once: one fault per 2 MB instead of 512, and on a guest
// whose hypervisor shadows or backs its page tables lazily, first writes at
// memory speed rather than a trip to the host per 4 KB page (2.5 GB: 0.08 s
// against 2.9 s on one such guest). But with the kernel's THP defrag at
// "madvise", a fault in such a buffer may compact memory synchronously when
// no free 2 MB block is left, which cost seconds on a machine whose memory
// was full of page cache. So ask first only when the buddy allocator's free
// blocks of 2 MB and more already cover the buffer (with a quarter to spare
// for everyone else); otherwise populate with small pages and advise after,
// leaving the collapse to khugepaged. The answer is a hint: it changes
// timing, never contents.
// Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace lockstep::ops {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Bytes held in free blocks of at least kHugePageBytes, from the text of
// /proc/buddyinfo ("Node 0, zone Normal c0 c1 ... c10", count of free blocks
// of 2^order pages of `page_bytes`). Zone DMA is left out; lines that do not
// parse count nothing.
size_t FreeHugeBlockBytes(std::string_view buddyinfo, size_t page_bytes);

// Whether `bytes` of fresh memory should ask for huge pages before their
// first touch: free 2 MB blocks cover 1.25 x bytes now (read from
// /proc/buddyinfo; false when it cannot be read or THP is off).
bool HugePagesFreeFor(size_t bytes);

// Runs `populate` (a buffer's first touch) with `advise` (its MADV_HUGEPAGE)
// before it when HugePagesFreeFor(bytes), after it otherwise: the one place
// that order is decided.
template <class Advise, class Populate>
void PopulateAdvisingHugePages(size_t bytes, Advise&& advise, Populate&& populate) {
  const bool huge_first = HugePagesFreeFor(bytes);
  if (huge_first) advise();
  populate();
  if (!huge_first) advise();
}

// A large buffer about to be written for the first time: `bytes` rounded
// up to whole huge pages, 2 MB aligned, with huge pages advised before the
// first touch when HugePagesFreeFor(bytes). Contents unspecified. Throws
// std::bad_alloc when the memory is not there.
struct FreeDeleter {
  void operator()(uint8_t* p) const;
};
using LargeBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;
LargeBuffer AllocateLarge(size_t bytes);

}  // namespace lockstep::ops
