// Checkpoint::ReadAll: every opened file read once, hashed and consumed in
// the same pass (checkpoint.h).
//
// Each file is cut into pieces of at most kPieceBytes: runs of whole units
// of one sink's tensor, and the bytes no sink wants (the header, tensors
// another stage uses), which are only hashed. A thread that finds files no
// one is reading, and a free buffer for each, becomes their reader for one
// piece of each, up to kSha256Lanes files at once where UpdateLanes
// compresses several streams for about the cost of one (one file at once
// otherwise): it reads the pieces and feeds them to the files' hashes
// together, so each file's hash sees its bytes in order; a piece with a
// sink is then queued, and any thread with nothing to read hands queued
// pieces to their sinks. Buffers are bounded,
// so a reader that runs ahead of the sinks turns to feeding them instead.
// A GGUF file hashed whole and by parts (Parts::kAll) feeds its parts'
// hashes from the queue too, in order, one piece of a file at a time, so
// they run beside the whole file's hash instead of doubling its thread's
// work (unless UpdateLanes hashes both for about the cost of one).
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "base/populate.h"
#include "engine/io/checkpoint.h"
#include "engine/io/sha256_lanes.h"

namespace lockstep {
namespace {

constexpr uint64_t kPieceBytes = uint64_t{4} << 20;

struct Piece {
  uint64_t offset = 0;  // in the file
  uint64_t size = 0;
  const TensorSink* sink = nullptr;  // null: hashed only
  uint64_t at = 0;                   // offset within the sink's tensor
  int part = -1;                     // FileStream::parts index, or -1
};

// A part of a file hashed on its own (DigestRange).
struct PartStream {
  const DigestRange* range = nullptr;
  Sha256Stream sha;
  Digest digest{};
};

struct FileStream {
  const TensorFile* file = nullptr;
  bool whole = true;  // the whole file is hashed (else only its parts)
  std::vector<PartStream> parts;  // sorted by offset, disjoint
  std::vector<Piece> pieces;
  size_t next = 0;    // next piece to read
  bool busy = false;  // a thread is reading (and hashing) a piece
  bool part_busy = false;  // a thread is hashing a piece into its part's stream
  Sha256Stream sha;
  Digest digest{};
};

// [begin, end) of a file, in one part or in none (-1).
struct Region {
  uint64_t begin, end;
  int part;
};

// What is read of the file: all of it when hashed whole (the gaps between
// parts in regions of no part), else only its parts.
std::vector<Region> RegionsOf(const FileStream& f) {
  std::vector<Region> out;
  uint64_t pos = 0;
  for (size_t i = 0; i < f.parts.size(); ++i) {
    const DigestRange& r = *f.parts[i].range;
    if (f.whole && r.offset > pos) out.push_back({pos, r.offset, -1});
    out.push_back({r.offset, r.offset + r.size, static_cast<int>(i)});
    pos = r.offset + r.size;
  }
  if (f.whole && f.file->size() > pos) out.push_back({pos, f.file->size(), -1});
  return out;
}

// The file's pieces in order; `sinks` sorted by offset.
Status CutPieces(FileStream& f, const std::vector<const TensorSink*>& sinks) {
  size_t s = 0;
  for (const Region& region : RegionsOf(f)) {
    uint64_t pos = region.begin;
    auto hashed_only = [&](uint64_t end) {
      for (; pos < end; pos += std::min(kPieceBytes, end - pos)) {
        f.pieces.push_back({pos, std::min(kPieceBytes, end - pos), nullptr, 0, region.part});
      }
    };
    for (; s < sinks.size() && sinks[s]->tensor.info->offset < region.end; ++s) {
      const TensorSink* sink = sinks[s];
      const TensorInfo& t = *sink->tensor.info;
      if (t.offset < pos || t.offset + t.nbytes > region.end) {
        return InvalidError(f.file->path() + ": tensor \"" + t.name +
                            "\" overlaps another one being read, or a part it is not in");
      }
      hashed_only(t.offset);
      const uint64_t unit = sink->unit_bytes == 0 ? std::max<uint64_t>(t.nbytes, 1) : sink->unit_bytes;
      const uint64_t step = std::max<uint64_t>(1, kPieceBytes / unit) * unit;
      for (uint64_t at = 0; at < t.nbytes; at += step) {
        f.pieces.push_back({t.offset + at, std::min(step, t.nbytes - at), sink, at, region.part});
      }
      pos = t.offset + t.nbytes;
    }
    hashed_only(region.end);
  }
  if (s < sinks.size()) {
    return InvalidError(f.file->path() + ": tensor \"" + sinks[s]->tensor.info->name +
                        "\" is outside the parts being read");
  }
  if (f.pieces.empty()) f.digest = f.sha.Finalize();
  for (PartStream& p : f.parts) {
    if (p.range->size == 0) p.digest = p.sha.Finalize();
  }
  return Status::Ok();
}

// A piece's bytes, reused from piece to piece (never zero-filled).
struct Buffer {
  std::unique_ptr<uint8_t[]> data;
  size_t capacity = 0;
  std::span<uint8_t> Hold(size_t n) {
    if (n > capacity) {
      data.reset(new uint8_t[n]);
      PopulateForWrite(data.get(), n);  // read into at once, not a fault per page
      capacity = n;
    }
    return {data.get(), n};
  }
};

class ReadPass {
 public:
  ReadPass(std::vector<FileStream>& files, size_t threads)
      : files_(files),
        lanes_(Sha256LanesPay(2) ? kSha256Lanes : 1),
        defer_parts_(threads > 1 && lanes_ == 1),
        max_buffers_(2 * threads + 2 * lanes_) {}

  // Runs until every piece is read and consumed, or an error.
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!error_.ok()) return;
      if (std::vector<FileStream*> read = FilesToRead(); !read.empty()) {
        ReadSome(read, lock);
      } else if (!ready_.empty()) {
        if (!ConsumeOne(lock)) cv_.wait(lock);  // only pieces of parts another thread hashes
      } else if (AllRead()) {
        return;
      } else {
        cv_.wait(lock);
      }
    }
  }

  Status error() const { return error_; }

 private:
  struct Ready {
    const Piece* piece;
    Buffer buffer;
    FileStream* part_of = nullptr;  // its part's hash is still to be fed (deferred)
  };

  // Whether a piece's part is hashed by a consumer rather than its reader:
  // where one stream a call is what UpdateLanes does best (SHA extensions),
  // a file's whole hash and its parts' run on two threads.
  bool Deferred(const FileStream& f, const Piece& p) const {
    return defer_parts_ && f.whole && p.part >= 0;
  }

  // The files to read a piece of now: every one no one is reading, up to
  // lanes_, or none while there are not buffers for all of them (so their
  // hashes advance together, and the sinks drain the queue).
  std::vector<FileStream*> FilesToRead() {
    std::vector<FileStream*> out;
    for (FileStream& f : files_) {
      if (out.size() < lanes_ && !f.busy && f.next < f.pieces.size()) out.push_back(&f);
    }
    if (free_.size() + (max_buffers_ - buffers_) < out.size()) out.clear();
    return out;
  }

  bool AllRead() const {
    return std::all_of(files_.begin(), files_.end(), [](const FileStream& f) {
      return !f.busy && f.next == f.pieces.size();
    });
  }

  Buffer TakeBuffer() {
    if (free_.empty()) {
      ++buffers_;
      return {};
    }
    Buffer b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

  void ReadSome(const std::vector<FileStream*>& files, std::unique_lock<std::mutex>& lock) {
    struct Job {
      FileStream* f;
      const Piece* piece;
      bool last;
      Buffer buf;
      Status st;
    };
    std::vector<Job> jobs;
    for (FileStream* f : files) {
      const Piece& p = f->pieces[f->next++];
      f->busy = true;
      jobs.push_back({f, &p, f->next == f->pieces.size(), TakeBuffer(), Status::Ok()});
    }
    lock.unlock();
    std::vector<Sha256Stream*> streams;
    std::vector<std::span<const uint8_t>> bytes;
    for (Job& j : jobs) {
      const std::span<uint8_t> b = j.buf.Hold(j.piece->size);
      j.st = j.f->file->ReadRange(j.piece->offset, b);
      if (!j.st.ok()) continue;
      if (j.f->whole) {
        streams.push_back(&j.f->sha);
        bytes.push_back(b);
      }
      if (j.piece->part >= 0 && !Deferred(*j.f, *j.piece)) {
        streams.push_back(&j.f->parts[static_cast<size_t>(j.piece->part)].sha);
        bytes.push_back(b);
      }
    }
    for (size_t i = 0; i < streams.size(); i += kSha256Lanes) {
      const size_t n = std::min(kSha256Lanes, streams.size() - i);
      UpdateLanes(std::span<Sha256Stream* const>(streams.data() + i, n),
                  std::span<const std::span<const uint8_t>>(bytes.data() + i, n));
    }
    for (Job& j : jobs) {
      if (!j.st.ok()) continue;
      if (j.last && j.f->whole) j.f->digest = j.f->sha.Finalize();
      if (j.piece->part >= 0 && !Deferred(*j.f, *j.piece)) FinishPart(*j.f, *j.piece);
    }
    lock.lock();
    for (Job& j : jobs) {
      j.f->busy = false;
      if (!j.st.ok()) {
        if (error_.ok()) error_ = j.st;
        free_.push_back(std::move(j.buf));
      } else if (j.piece->sink != nullptr || Deferred(*j.f, *j.piece)) {
        ready_.push_back({j.piece, std::move(j.buf), Deferred(*j.f, *j.piece) ? j.f : nullptr});
      } else {
        free_.push_back(std::move(j.buf));
      }
    }
    cv_.notify_all();
  }

  static void FinishPart(FileStream& f, const Piece& piece) {
    PartStream& p = f.parts[static_cast<size_t>(piece.part)];
    if (piece.offset + piece.size == p.range->offset + p.range->size) p.digest = p.sha.Finalize();
  }

  // The first queued piece a thread may take: a file's deferred part
  // pieces one at a time, in the order they were read. False when every
  // queued piece waits for another thread's part hash.
  bool ConsumeOne(std::unique_lock<std::mutex>& lock) {
    std::vector<const FileStream*> waiting;  // files an earlier queued piece of is ahead
    auto it = ready_.begin();
    for (; it != ready_.end(); ++it) {
      FileStream* f = it->part_of;
      if (f == nullptr) break;
      if (!f->part_busy && std::find(waiting.begin(), waiting.end(), f) == waiting.end()) break;
      waiting.push_back(f);
    }
    if (it == ready_.end()) return false;
    Ready r = std::move(*it);
    ready_.erase(it);
    if (r.part_of != nullptr) r.part_of->part_busy = true;
    lock.unlock();
    const std::span<const uint8_t> bytes(r.buffer.data.get(), r.piece->size);
    if (r.part_of != nullptr) {
      r.part_of->parts[static_cast<size_t>(r.piece->part)].sha.Update(bytes);
      FinishPart(*r.part_of, *r.piece);
    }
    if (r.piece->sink != nullptr) r.piece->sink->take(r.piece->at, bytes);
    lock.lock();
    if (r.part_of != nullptr) r.part_of->part_busy = false;
    free_.push_back(std::move(r.buffer));
    cv_.notify_all();
    return true;
  }

  std::vector<FileStream>& files_;
  // Files one reader hashes together: kSha256Lanes where UpdateLanes
  // compresses even two for about the cost of one (no SHA extensions);
  // otherwise one, so the other threads read and hash the other files at
  // the same time.
  const size_t lanes_;
  const bool defer_parts_;
  const size_t max_buffers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Ready> ready_;
  std::vector<Buffer> free_;
  size_t buffers_ = 0;  // handed out so far
  Status error_;
};

}  // namespace

Result<std::vector<FileDigest>> Checkpoint::ReadAll(std::span<const TensorSink> sinks,
                                                    int threads, Parts which) const {
  std::vector<FileStream> files(files_.size());
  std::vector<std::vector<const TensorSink*>> by_file(files_.size());
  for (const TensorSink& s : sinks) {
    auto it = std::find_if(files_.begin(), files_.end(),
                           [&](const auto& f) { return f.get() == s.tensor.file; });
    if (it == files_.end() || s.tensor.info == nullptr) {
      return InvalidError(path_ + ": a tensor to read is not in an opened file");
    }
    by_file[static_cast<size_t>(it - files_.begin())].push_back(&s);
  }
  // A GGUF file's parts: all of them when asked or partial, else the
  // header alone (checked against the parse below, not reported).
  const bool report_parts = gguf_ && (partial_ || which == Parts::kAll);
  const size_t hashed_parts = report_parts ? parts_.size() : std::min<size_t>(parts_.size(), 1);
  for (size_t i = 0; i < files_.size(); ++i) {
    files[i].file = files_[i].get();
    files[i].whole = !partial_;
    if (gguf_) {
      files[i].parts = std::vector<PartStream>(hashed_parts);
      for (size_t p = 0; p < hashed_parts; ++p) files[i].parts[p].range = &parts_[p];
    }
    std::sort(by_file[i].begin(), by_file[i].end(), [](const TensorSink* a, const TensorSink* b) {
      return a->tensor.info->offset < b->tensor.info->offset;
    });
    LOCKSTEP_RETURN_IF_ERROR(CutPieces(files[i], by_file[i]));
  }
  const size_t n = static_cast<size_t>(std::max(threads, 1));
  ReadPass pass(files, n);
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < n; ++t) helpers.emplace_back([&pass] { pass.Work(); });
  pass.Work();
  for (std::thread& t : helpers) t.join();
  LOCKSTEP_RETURN_IF_ERROR(pass.error());

  if (gguf_ && files[0].parts[0].digest != gguf_header_sha256_) {
    return MismatchError(path_ + ": its header hashes otherwise than when it was parsed: "
                                 "the file changed while it was being loaded");
  }
  std::vector<FileDigest> out;
  if (sharded_) out.push_back({kShardIndexFile, index_sha256_});
  const size_t first = out.size();
  for (const FileStream& f : files) {
    if (!f.whole) continue;
    const std::string& p = f.file->path();
    out.push_back({p.substr(p.rfind('/') + 1), f.digest});
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const FileDigest& a, const FileDigest& b) { return a.file < b.file; });
  if (report_parts) {
    for (const PartStream& p : files[0].parts) out.push_back({p.range->name, p.digest});
  }
  return out;
}

}  // namespace lockstep
