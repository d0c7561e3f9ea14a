#include "engine/tokenizer/bpe_model.h"

#include <queue>

#include "engine/tokenizer/byte_unicode.h"

namespace lockstep {
namespace {

constexpr size_t kMaxId = size_t{1} << 26;  // refuse absurd ids (memory)
constexpr size_t kMaxCachedWordBytes = 256;  // as the crate's cache

struct Symbol {
  uint32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;  // bytes covered; 0 once merged into its left neighbour
};

struct QueueEntry {
  uint32_t rank;
  int32_t pos;
  uint32_t new_id;
  // std::priority_queue pops the largest; make that the lowest (rank, pos).
  bool operator<(const QueueEntry& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

Result<BpeModel> BpeModel::Build(
    std::vector<std::pair<std::string, uint32_t>> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges,
    BpeOptions options, const std::string& where) {
  BpeModel m;
  m.options_ = std::move(options);
  // Ids index a table, so refuse sparse ones that would make it huge.
  const size_t max_bound = std::min<size_t>(kMaxId, 2 * vocab.size() + (1u << 16));
  uint32_t bound = 0;
  for (const auto& [token, id] : vocab) {
    if (id >= max_bound) {
      return InvalidError(where + ".vocab[\"" + token + "\"]: id " + std::to_string(id) +
                          " is implausibly large for " + std::to_string(vocab.size()) +
                          " entries");
    }
    bound = std::max(bound, id + 1);
  }
  m.id_to_token_.resize(bound);
  m.id_used_.assign(bound, false);
  m.token_to_id_.Reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    if (m.id_used_[id]) {
      return InvalidError(where + ".vocab: id " + std::to_string(id) + " is used by both \"" +
                          m.id_to_token_[id] + "\" and \"" + token + "\"");
    }
    m.id_to_token_[id] = std::move(token);
    if (!m.token_to_id_.Insert(m.id_to_token_[id], id, m.id_to_token_)) {
      return InvalidError(where + ".vocab: token \"" + m.id_to_token_[id] + "\" appears twice");
    }
    m.id_used_[id] = true;
  }
  m.vocab_count_ = vocab.size();
  LOCKSTEP_RETURN_IF_ERROR(m.AddMerges(merges, where));
  for (int b = 0; b < 256; ++b) {
    auto id = m.TokenToId(ByteToSymbol(static_cast<uint8_t>(b)));
    m.byte_to_id_[b] = id ? static_cast<int64_t>(*id) : -1;
  }
  if (m.options_.unk_token) {
    m.unk_id_ = m.TokenToId(*m.options_.unk_token);
    if (!m.unk_id_) {
      return InvalidError(where + ".unk_token: \"" + *m.options_.unk_token +
                          "\" is not in the vocab");
    }
  }
  return m;
}

Status BpeModel::AddMerges(const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::string& where) {
  merges_.Reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    joined.assign(a).append(b);
    auto ia = TokenToId(a), ib = TokenToId(b), inew = TokenToId(joined);
    if (!ia || !ib || !inew) {
      const std::string at = where + ".merges[" + std::to_string(rank) + "] (\"" + a +
                             "\", \"" + b + "\"): ";
      if (!ia) return InvalidError(at + "\"" + a + "\" is not in the vocab");
      if (!ib) return InvalidError(at + "\"" + b + "\" is not in the vocab");
      return InvalidError(at + "merged \"" + joined + "\" is not in the vocab");
    }
    // A repeated pair keeps its last rank, as the crate's map build does.
    merges_.Set(*ia, *ib, {static_cast<uint32_t>(rank), *inew});
  }
  return Status::Ok();
}

std::optional<uint32_t> BpeModel::TokenToId(std::string_view token) const {
  return token_to_id_.Find(token, id_to_token_);
}

const std::string* BpeModel::IdToToken(uint32_t id) const {
  if (id >= id_to_token_.size() || !id_used_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<uint32_t>* ids) const {
  // ids holds (id, byte_len) pairs flattened: the unk run length matters
  // only for fusing, so plain ids suffice once fusing is decided here.
  bool last_was_unk = false;
  for (unsigned char byte : word) {
    const int64_t id = byte_to_id_[byte];
    if (id >= 0) {
      ids->push_back(static_cast<uint32_t>(id));
      last_was_unk = false;
    } else if (unk_id_) {
      if (!(options_.fuse_unk && last_was_unk)) ids->push_back(*unk_id_);
      last_was_unk = true;
    }
  }
}

void BpeModel::MergeAll(std::vector<uint32_t>* ids) const {
  const int32_t n = static_cast<int32_t>(ids->size());
  if (n < 2) return;
  std::vector<Symbol> sym(n);
  std::vector<QueueEntry> heap_storage;
  heap_storage.reserve(n * 2);
  std::priority_queue<QueueEntry> queue(std::less<QueueEntry>(), std::move(heap_storage));
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = {(*ids)[i], i - 1, i + 1 < n ? i + 1 : -1, 1};
    if (i + 1 < n) {
      if (const MergeInfo* mi = FindMerge((*ids)[i], (*ids)[i + 1])) {
        queue.push({mi->rank, i, mi->new_id});
      }
    }
  }
  while (!queue.empty()) {
    const QueueEntry top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = sym[left.next];
    const MergeInfo* now = FindMerge(left.id, right.id);
    if (now == nullptr || now->new_id != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const MergeInfo* mi = FindMerge(sym[left.prev].id, left.id)) {
        queue.push({mi->rank, left.prev, mi->new_id});
      }
    }
    if (left.next >= 0) {
      if (const MergeInfo* mi = FindMerge(left.id, sym[left.next].id)) {
        queue.push({mi->rank, top.pos, mi->new_id});
      }
    }
  }
  ids->clear();
  for (const Symbol& s : sym) {
    if (s.len != 0) ids->push_back(s.id);
  }
}

void BpeModel::EncodeWord(std::string_view word, WordCache* cache,
                          std::vector<uint32_t>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    std::string mapped;
    for (unsigned char b : word) mapped += ByteToSymbol(b);
    if (auto id = TokenToId(mapped)) {
      out->push_back(*id);
      return;
    }
  }
  const bool cacheable = cache != nullptr && word.size() < kMaxCachedWordBytes;
  if (cacheable) {
    auto it = cache->find(std::string(word));
    if (it != cache->end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<uint32_t> ids;
  ids.reserve(word.size());
  InitialSymbols(word, &ids);
  MergeAll(&ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cacheable) cache->emplace(std::string(word), std::move(ids));
}

}  // namespace lockstep
