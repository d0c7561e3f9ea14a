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
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

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
};

struct FileStream {
  const SafetensorsFile* file = nullptr;
  std::vector<Piece> pieces;
  size_t next = 0;    // next piece to read
  bool busy = false;  // a thread is reading (and hashing) a piece
  Sha256Stream sha;
  Digest digest{};
};

// The file's pieces in order; `sinks` sorted by offset.
Status CutPieces(FileStream& f, const std::vector<const TensorSink*>& sinks) {
  uint64_t pos = 0;
  auto hashed_only = [&](uint64_t end) {
    for (; pos < end; pos += std::min(kPieceBytes, end - pos)) {
      f.pieces.push_back({pos, std::min(kPieceBytes, end - pos), nullptr, 0});
    }
  };
  for (const TensorSink* s : sinks) {
    const TensorInfo& t = *s->tensor.info;
    if (t.offset < pos) {
      return InvalidError(f.file->path() + ": tensor \"" + t.name +
                          "\" overlaps another one being read");
    }
    hashed_only(t.offset);
    const uint64_t unit = s->unit_bytes == 0 ? std::max<uint64_t>(t.nbytes, 1) : s->unit_bytes;
    const uint64_t step = std::max<uint64_t>(1, kPieceBytes / unit) * unit;
    for (uint64_t at = 0; at < t.nbytes; at += step) {
      f.pieces.push_back({t.offset + at, std::min(step, t.nbytes - at), s, at});
    }
    pos = t.offset + t.nbytes;
  }
  hashed_only(f.file->size());
  if (f.pieces.empty()) f.digest = f.sha.Finalize();
  return Status::Ok();
}

// A piece's bytes, reused from piece to piece (never zero-filled).
struct Buffer {
  std::unique_ptr<uint8_t[]> data;
  size_t capacity = 0;
  std::span<uint8_t> Hold(size_t n) {
    if (n > capacity) {
      data.reset(new uint8_t[n]);
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
        max_buffers_(2 * threads + 2 * lanes_) {}

  // Runs until every piece is read and consumed, or an error.
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!error_.ok()) return;
      if (std::vector<FileStream*> read = FilesToRead(); !read.empty()) {
        ReadSome(read, lock);
      } else if (!ready_.empty()) {
        ConsumeOne(lock);
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
  };

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
      streams.push_back(&j.f->sha);
      bytes.push_back(b);
    }
    UpdateLanes(streams, bytes);
    for (Job& j : jobs) {
      if (j.st.ok() && j.last) j.f->digest = j.f->sha.Finalize();
    }
    lock.lock();
    for (Job& j : jobs) {
      j.f->busy = false;
      if (!j.st.ok()) {
        if (error_.ok()) error_ = j.st;
        free_.push_back(std::move(j.buf));
      } else if (j.piece->sink != nullptr) {
        ready_.push_back({j.piece, std::move(j.buf)});
      } else {
        free_.push_back(std::move(j.buf));
      }
    }
    cv_.notify_all();
  }

  void ConsumeOne(std::unique_lock<std::mutex>& lock) {
    Ready r = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    r.piece->sink->take(r.piece->at, std::span<const uint8_t>(r.buffer.data.get(), r.piece->size));
    lock.lock();
    free_.push_back(std::move(r.buffer));
    cv_.notify_all();
  }

  std::vector<FileStream>& files_;
  // Files one reader hashes together: kSha256Lanes where UpdateLanes
  // compresses even two for about the cost of one (no SHA extensions);
  // otherwise one, so the other threads read and hash the other files at
  // the same time.
  const size_t lanes_;
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
                                                    int threads) const {
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
  for (size_t i = 0; i < files_.size(); ++i) {
    files[i].file = files_[i].get();
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

  std::vector<FileDigest> out;
  if (sharded_) out.push_back({kShardIndexFile, index_sha256_});
  const size_t first = out.size();
  for (const FileStream& f : files) {
    const std::string& p = f.file->path();
    out.push_back({p.substr(p.rfind('/') + 1), f.digest});
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const FileDigest& a, const FileDigest& b) { return a.file < b.file; });
  return out;
}

}  // namespace lockstep
