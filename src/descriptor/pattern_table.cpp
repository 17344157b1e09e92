// Pattern and formula deduplication (see pattern_table.h).
#include "descriptor/pattern_table.h"

#include <cstring>

namespace cm::descriptor {
namespace {

// FNV-1a over the bytes, seeded with a small tag; collisions are resolved by comparing bytes.
uint64_t hash_bytes(std::span<const unsigned char> bytes, uint64_t tag) {
  uint64_t h = 0xcbf29ce484222325ull ^ tag;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::span<const unsigned char> bytes_of(const desc::GridFormula& f) {
  return {reinterpret_cast<const unsigned char*>(&f), sizeof(f)};
}

}  // namespace

int32_t PatternTable::add_formula(const desc::GridFormula& formula) {
  desc::GridFormula canonical = formula;
  canonical.half_widths_offset = 0;
  const uint64_t h = hash_bytes(bytes_of(canonical), 0);
  const auto [begin, end] = formula_index_.equal_range(h);
  for (auto it = begin; it != end; ++it) {
    if (std::memcmp(&formulas_[it->second], &canonical, sizeof(canonical)) == 0) {
      return it->second;
    }
  }
  const auto index = static_cast<int32_t>(formulas_.size());
  formulas_.push_back(canonical);
  formula_index_.emplace(h, index);
  return index;
}

bool PatternTable::same(const desc::Pattern& p, int32_t formula, uint8_t kind,
                        std::span<const unsigned char> data) const {
  return p.kind == kind && p.formula == formula &&
         data_sizes_[&p - patterns_.data()] == data.size() &&
         (data.empty() ||  // memcmp must not see the null pointer of an empty span
          std::memcmp(data_.data() + p.data_offset, data.data(), data.size()) == 0);
}

uint32_t PatternTable::add(desc::PatternKind kind, int32_t formula, uint16_t count,
                           std::span<const unsigned char> data) {
  const uint64_t h = hash_bytes(data, (uint64_t{kind} << 32) ^ static_cast<uint32_t>(formula));
  const auto [begin, end] = pattern_index_.equal_range(h);
  for (auto it = begin; it != end; ++it) {
    if (same(patterns_[it->second], formula, kind, data)) return it->second;
  }
  desc::Pattern p{};
  p.kind = kind;
  p.count = count;
  p.data_offset = static_cast<uint32_t>(data_.size());
  p.formula = formula;
  data_.insert(data_.end(), data.begin(), data.end());
  data_.resize((data_.size() + 7) / 8 * 8, 0);
  const auto index = static_cast<uint32_t>(patterns_.size());
  patterns_.push_back(p);
  data_sizes_.push_back(data.size());
  pattern_index_.emplace(h, index);
  return index;
}

}  // namespace cm::descriptor
