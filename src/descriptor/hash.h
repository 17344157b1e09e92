// A word-at-a-time hash of plain bytes for the builder's deduplication tables (instances,
// patterns, formulas). Equal byte strings hash equally; every table resolves collisions by
// comparing the values themselves.
#pragma once

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

}  // namespace cm::descriptor
