// Pattern and formula deduplication (see pattern_table.h).
#include "descriptor/pattern_table.h"

#include "descriptor/hash.h"
#include "descriptor/pattern_encode.h"

#include <algorithm>
#include <cstring>

namespace cm::descriptor {
namespace {

std::span<const unsigned char> bytes_of(const desc::GridFormula& f) {
  return {reinterpret_cast<const unsigned char*>(&f), sizeof(f)};
}

}  // namespace

int32_t PatternTable::add_formula(const desc::GridFormula& formula) {
  desc::GridFormula canonical = formula;
  canonical.half_widths_offset = 0;
  const uint64_t h = hash_bytes(bytes_of(canonical), 0);
  const int64_t found = formula_index_.find(h, [&](int64_t i) {
    return std::memcmp(&formulas_[static_cast<size_t>(i)], &canonical, sizeof(canonical)) == 0;
  });
  if (found >= 0) return static_cast<int32_t>(found);
  const auto index = static_cast<int32_t>(formulas_.size());
  formulas_.push_back(canonical);
  formula_index_.insert(h, index);
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
  const int64_t found = pattern_index_.find(
      h, [&](int64_t i) { return same(patterns_[static_cast<size_t>(i)], formula, kind, data); });
  if (found >= 0) return static_cast<uint32_t>(found);
  desc::Pattern p{};
  p.kind = kind;
  p.empty_halves = empty_halves(kind, data);
  p.count = count;
  p.data_offset = append_data(data);
  p.formula = formula;
  const auto index = static_cast<uint32_t>(patterns_.size());
  patterns_.push_back(p);
  data_sizes_.push_back(data.size());
  pattern_index_.insert(h, index);
  return index;
}

uint32_t PatternTable::append_data(std::span<const unsigned char> data) {
  const auto offset = static_cast<uint32_t>(data_.size());
  data_.insert(data_.end(), data.begin(), data.end());
  data_.resize((data_.size() + 7) / 8 * 8, 0);
  return offset;
}

uint32_t PatternTable::add_row_table(std::span<const desc::KeyInterval> rows) {
  return append_data(
      {reinterpret_cast<const unsigned char*>(rows.data()), rows.size() * sizeof(rows[0])});
}

uint32_t PatternTable::add_row_table_pattern(uint32_t data_offset, uint16_t count,
                                             uint8_t empty_halves) {
  desc::Pattern p{};
  p.kind = desc::kPatternRowTable;
  p.empty_halves = empty_halves;
  p.count = count;
  p.data_offset = data_offset;
  p.formula = -1;
  const auto index = static_cast<uint32_t>(patterns_.size());
  patterns_.push_back(p);
  // Not in pattern_index_, so `same` never compares it; data_sizes_ stays indexed like patterns_.
  data_sizes_.push_back(static_cast<size_t>(tile_m_) * count * sizeof(desc::KeyInterval));
  return index;
}

uint8_t PatternTable::empty_halves(desc::PatternKind kind,
                                   std::span<const unsigned char> data) const {
  if (kind == desc::kPatternBands) {  // the builder's bands come fitted, as a RowBand array
    return fitted_bands_empty_halves(
        {reinterpret_cast<const desc::RowBand*>(data.data()), data.size() / sizeof(desc::RowBand)},
        tile_m_);
  }
  bool seen[2] = {false, false};  // whether a row of the half sees a key
  const auto see = [&](int64_t row) { seen[row >= tile_m_ / 2] = true; };
  if (kind == desc::kPatternRowRanges) {
    const size_t per_row = data.size() / sizeof(desc::RowRange) / static_cast<size_t>(tile_m_);
    for (size_t i = 0; i < data.size() / sizeof(desc::RowRange); ++i) {
      desc::RowRange range;
      std::memcpy(&range, data.data() + i * sizeof(range), sizeof(range));
      int lo, hi;
      if (desc::row_range(&range, 1, 0, 0, lo, hi)) see(static_cast<int64_t>(i / per_row));
    }
  } else if (kind == desc::kPatternBitmap) {
    const size_t per_row = static_cast<size_t>(bitmap_words_per_row(tile_n_)) * sizeof(uint32_t);
    for (int32_t r = 0; r < tile_m_; ++r) {
      const unsigned char* row = data.data() + static_cast<size_t>(r) * per_row;
      if (std::any_of(row, row + per_row, [](unsigned char c) { return c != 0; })) see(r);
    }
  } else {
    return 0;  // a formula's rows depend on the tile
  }
  return static_cast<uint8_t>((seen[0] ? 0u : 1u) | (seen[1] ? 0u : 2u));
}

}  // namespace cm::descriptor
