// Classifies the key tiles of one query tile row from difference arrays over key tiles. Only
// the tiles where some count changes are visited, so a tile row costs O(rows + intervals +
// changes log changes), not O(key tiles): long full stretches come out as one segment.
#pragma once

#include "descriptor/tile_axes.h"
#include "specialize/row_intervals.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace cm::descriptor {

// Key tiles [first, end) that share one state. listed_touch: some listed interval meets the
// tile; listed_full: every row's listed intervals cover its clipped area; formula_touch: the
// tile row's grid formula reaches the tile.
struct TileSegment {
  int32_t first;
  int32_t end;
  bool listed_touch;
  bool listed_full;
  bool formula_touch;
};

class TileRowClassifier {
 public:
  // Pre: `keys` outlives the classifier.
  explicit TileRowClassifier(const TileAxis& keys);

  // Pre: rows valid (input_checks.h), 0 <= q0 < q1 <= rows.nq. Adds the intervals of rows
  // [q0, q1) and returns their total width (visible pairs).
  int64_t add_rows(const RowIntervals& rows, int32_t q0, int32_t q1);

  // Marks the key tiles meeting keys [lo, hi) as reached by the formula (0 <= lo < hi); keys
  // at or past nk, where a grid may reach, are no tile's.
  void add_formula_touch(int64_t lo, int64_t hi) {
    hi = std::min<int64_t>(hi, keys_.length());
    if (lo >= hi) return;
    bump(&Counts::formula, keys_.tile_of(lo), 1);
    bump(&Counts::formula, keys_.tile_of(hi - 1) + 1, -1);
  }

  // Post: `segments` (cleared first) holds, in increasing order, the maximal segments of tiles
  // touched by something, for a tile row of `num_rows` rows. The classifier is reset.
  void finish(int32_t num_rows, std::vector<TileSegment>& segments);

 private:
  // Difference-array entries of one key tile, together so that a bump touches one line:
  // listed intervals touching the tile, listed intervals covering the whole (clipped) tile,
  // formula reach; `changed` flags the tiles listed in changed_. All zero between tile rows.
  struct Counts {
    int32_t touch = 0;
    int32_t cover = 0;
    int32_t formula = 0;
    int32_t changed = 0;
  };

  [[gnu::always_inline]] void bump(int32_t Counts::*field, int32_t tile, int32_t delta) {
    Counts& c = counts_[static_cast<size_t>(tile)];
    c.*field += delta;
    if (!c.changed) {
      c.changed = 1;
      changed_.push_back(tile);
    }
  }

  // The tiles one listed interval meets: first and last touched, and [cover_first,
  // cover_end) wholly inside it; every interval with lo in [lo_min, lo_max] and hi in
  // [hi_min, hi_max] meets the same ones.
  struct IntervalTiles {
    int32_t first, last, cover_first, cover_end;
    int32_t lo_min, lo_max, hi_min, hi_max;
  };
  IntervalTiles tiles_of(int32_t lo, int32_t hi) const;
  // Bumps the tiles of pending_ for `repeats` rows (none when repeats is 0).
  void flush_pending(int32_t repeats);

  const TileAxis& keys_;
  int32_t num_tiles_;
  std::vector<Counts> counts_;  // num_tiles_ + 1 entries
  std::vector<int32_t> changed_;
  std::vector<IntervalTiles> pending_;  // per interval of the latest rows of add_rows
};

}  // namespace cm::descriptor
