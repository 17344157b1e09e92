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
  p.data_offset = static_cast<uint32_t>(data_.size());
  p.formula = formula;
  data_.insert(data_.end(), data.begin(), data.end());
  data_.resize((data_.size() + 7) / 8 * 8, 0);
  const auto index = static_cast<uint32_t>(patterns_.size());
  patterns_.push_back(p);
  data_sizes_.push_back(data.size());
  pattern_index_.insert(h, index);
  return index;
}

uint8_t PatternTable::empty_halves(desc::PatternKind kind,
                                   std::span<const unsigned char> data) const {
  std::vector<uint8_t> row_seen(static_cast<size_t>(tile_m_), 0);
  if (kind == desc::kPatternBands) {
    std::vector<desc::RowBand> bands(data.size() / sizeof(desc::RowBand));
    std::memcpy(bands.data(), data.data(), bands.size() * sizeof(desc::RowBand));
    for (const desc::RowBand& b : bands) {
      for (int r = b.row_first; r <= b.row_last && r < tile_m_; ++r) {
        int lo, hi;
        if (desc::band_row(b, r, tile_n_, lo, hi)) row_seen[static_cast<size_t>(r)] = 1;
      }
    }
  } else if (kind == desc::kPatternRowRanges) {
    const size_t per_row = data.size() / sizeof(desc::RowRange) / static_cast<size_t>(tile_m_);
    for (size_t i = 0; i < data.size() / sizeof(desc::RowRange); ++i) {
      desc::RowRange range;  // copied out: the bytes need not be aligned
      std::memcpy(&range, data.data() + i * sizeof(range), sizeof(range));
      int lo, hi;
      if (desc::row_range(&range, 1, 0, 0, lo, hi)) row_seen[i / per_row] = 1;
    }
  } else if (kind == desc::kPatternBitmap) {
    const size_t per_row = static_cast<size_t>(bitmap_words_per_row(tile_n_)) * sizeof(uint32_t);
    for (int32_t r = 0; r < tile_m_; ++r) {
      const unsigned char* row = data.data() + static_cast<size_t>(r) * per_row;
      row_seen[static_cast<size_t>(r)] =
          std::any_of(row, row + per_row, [](unsigned char c) { return c != 0; });
    }
  } else {
    return 0;  // a formula's rows depend on the tile
  }
  uint8_t empty = 0;
  for (int half = 0; half < 2; ++half) {
    const auto first = row_seen.begin() + half * (tile_m_ / 2);
    const auto end = half == 0 ? row_seen.begin() + tile_m_ / 2 : row_seen.end();
    if (std::none_of(first, end, [](uint8_t seen) { return seen != 0; })) empty |= 1u << half;
  }
  return empty;
}

}  // namespace cm::descriptor
