#include "engine/ops/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

namespace lockstep::ops {
namespace {

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The next whitespace-separated word of `line` from `at`, or empty.
std::string_view NextWord(std::string_view line, size_t* at) {
  while (*at < line.size() && (line[*at] == ' ' || line[*at] == '\t')) ++*at;
  const size_t begin = *at;
  while (*at < line.size() && line[*at] != ' ' && line[*at] != '\t') ++*at;
  return line.substr(begin, *at - begin);
}

// One buddyinfo line's free bytes in blocks of >= kHugePageBytes.
size_t LineHugeBytes(std::string_view line, size_t page_bytes) {
  size_t at = 0;
  if (NextWord(line, &at) != "Node") return 0;
  NextWord(line, &at);  // "0,"
  if (NextWord(line, &at) != "zone") return 0;
  if (NextWord(line, &at) == "DMA") return 0;
  size_t total = 0;
  for (int order = 0;; ++order) {
    const std::string_view w = NextWord(line, &at);
    if (w.empty() || order >= 40) break;
    size_t count = 0;
    const auto r = std::from_chars(w.data(), w.data() + w.size(), count);
    if (r.ec != std::errc() || r.ptr != w.data() + w.size()) return 0;
    const size_t block = page_bytes << order;
    if (block >= kHugePageBytes) total += count * block;
  }
  return total;
}

bool TransparentHugePagesOn() {
  const std::string mode = ReadSmallFile("/sys/kernel/mm/transparent_hugepage/enabled");
  return mode.find("[never]") == std::string::npos && !mode.empty();
}

}  // namespace

size_t FreeHugeBlockBytes(std::string_view buddyinfo, size_t page_bytes) {
  size_t total = 0;
  while (!buddyinfo.empty()) {
    const size_t end = buddyinfo.find('\n');
    total += LineHugeBytes(buddyinfo.substr(0, end), page_bytes);
    if (end == std::string_view::npos) break;
    buddyinfo.remove_prefix(end + 1);
  }
  return total;
}

bool HugePagesFreeFor(size_t bytes) {
  if (bytes < kHugePageBytes || !TransparentHugePagesOn()) return false;
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return false;
  const size_t free_huge =
      FreeHugeBlockBytes(ReadSmallFile("/proc/buddyinfo"), static_cast<size_t>(page));
  return free_huge / 5 >= bytes / 4;
}

void FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

LargeBuffer AllocateLarge(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kHugePageBytes - 1) / kHugePageBytes *
                         kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (HugePagesFreeFor(rounded)) (void)madvise(p, rounded, MADV_HUGEPAGE);
  return LargeBuffer(static_cast<uint8_t*>(p));
}

}  // namespace lockstep::ops
