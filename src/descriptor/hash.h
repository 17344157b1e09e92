// A word-at-a-time hash of plain bytes for the builder's deduplication tables (instances,
// patterns, formulas), and the index those tables keep. Equal byte strings hash equally; every
// table resolves collisions by comparing the values themselves.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace cm::descriptor {

inline uint64_t hash_bytes(std::span<const unsigned char> bytes, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = (h ^ word) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  for (; i < bytes.size(); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h ^ bytes.size();
}

// The hash of a vector of plain values, chained from `seed`.
template <class T>
uint64_t hash_values(const std::vector<T>& values, uint64_t seed) {
  return hash_bytes(
      {reinterpret_cast<const unsigned char*>(values.data()), values.size() * sizeof(T)}, seed);
}

// Where a deduplicating table keeps its values, by hash: find(h, equal) returns the index of a
// value inserted with hash h for which equal(index) holds, or -1. Open addressing over a
// power-of-two array of (hash, index) slots, grown at half full. A mask given as data can
// make 100,000 distinct patterns, and std::unordered_multimap's node per entry then cost 13%
// of specialize (docs/perf-notes-host.md).
class DedupIndex {
 public:
  template <class Equal>
  int64_t find(uint64_t h, Equal&& equal) const {
    if (slots_.empty()) return -1;
    for (size_t i = h & mask(); slots_[i].index >= 0; i = (i + 1) & mask()) {
      if (slots_[i].hash == h && equal(slots_[i].index)) return slots_[i].index;
    }
    return -1;
  }

  // Precondition: no value inserted before is equal to this one (find returned -1).
  void insert(uint64_t h, int64_t index) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = h & mask();
    while (slots_[i].index >= 0) i = (i + 1) & mask();
    slots_[i] = {h, index};
    ++size_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    int64_t index = -1;  // -1: empty
  };

  size_t mask() const { return slots_.size() - 1; }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(16, 2 * old.size()), Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.index >= 0) insert(s.hash, s.index);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace cm::descriptor
