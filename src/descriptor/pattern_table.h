// The deduplicated pattern table and grid formula table shared by all instances and both
// forms of a descriptor. Identical patterns (same kind, formula and data bytes) and identical
// formulas get one index each; lookups hash the bytes.
#pragma once

#include "descriptor/hash.h"

#include <compilemask/descriptor.h>

#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

class PatternTable {
 public:
  // Patterns are for tiles of tile_m x tile_n.
  PatternTable(int32_t tile_m, int32_t tile_n) : tile_m_(tile_m), tile_n_(tile_n) {}

  // Returns the table index of `formula` (its reserved field is ignored).
  int32_t add_formula(const desc::GridFormula& formula);

  // Returns the index of the pattern (kind, formula, data). `count` is the RowBand count for
  // band and grid kinds, the ranges per row for row ranges, 0 for bitmaps. Pattern::data_offset
  // holds the offset into data(); Pattern::empty_halves marks the halves whose rows the bands,
  // the row ranges or the bitmap leave empty.
  uint32_t add(desc::PatternKind kind, int32_t formula, uint16_t count,
               std::span<const unsigned char> data);

  // Stores `rows`, a kPatternRowTable table, and returns its data offset. Not deduplicated:
  // each query tile has a table of its own rows.
  uint32_t add_row_table(std::span<const desc::KeyInterval> rows);
  // Returns a new kPatternRowTable pattern over the table at `data_offset` (add_row_table)
  // with `count` intervals per row and the given empty halves, which the caller's tiles must
  // leave empty. Not deduplicated: the caller keeps one per table and empty_halves.
  uint32_t add_row_table_pattern(uint32_t data_offset, uint16_t count, uint8_t empty_halves);

  const std::vector<desc::Pattern>& patterns() const { return patterns_; }
  const std::vector<unsigned char>& data() const { return data_; }
  const std::vector<desc::GridFormula>& formulas() const { return formulas_; }

 private:
  bool same(const desc::Pattern& p, int32_t formula, uint8_t kind,
            std::span<const unsigned char> data) const;
  // Pattern::empty_halves of a bands, row-ranges or bitmap pattern; 0 for the grid kinds.
  uint8_t empty_halves(desc::PatternKind kind, std::span<const unsigned char> data) const;
  // Appends `data` at an 8-byte aligned offset of data() and returns the offset.
  uint32_t append_data(std::span<const unsigned char> data);

  int32_t tile_m_, tile_n_;

  std::vector<desc::Pattern> patterns_;
  std::vector<size_t> data_sizes_;   // per pattern, the bytes `same` compares
  std::vector<unsigned char> data_;  // each pattern's data starts 8-byte aligned
  DedupIndex pattern_index_;
  std::vector<desc::GridFormula> formulas_;
  DedupIndex formula_index_;
};

}  // namespace cm::descriptor
