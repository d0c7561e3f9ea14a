#include "base/populate.h"

#include <sys/mman.h>

#include <cstdint>

namespace lockstep {

bool PopulateForWrite(void* p, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) / kPage * kPage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / kPage * kPage;
  if (begin >= end) return true;
#ifdef MADV_POPULATE_WRITE
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
#else
  return false;
#endif
}

}  // namespace lockstep
