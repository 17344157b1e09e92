// Per-tile piece collection and band fitting (see piece_gather.h).
#include "descriptor/piece_gather.h"

#include <algorithm>
#include <limits>

namespace cm::descriptor {

bool PieceGatherer::steady(const RowIntervals& rows, int32_t q) const {
  const int64_t* offsets = rows.offsets.data() + (q - 2);
  const int64_t count = offsets[1] - offsets[0];
  if (offsets[2] - offsets[1] != count || offsets[3] - offsets[2] != count) return false;
  // Rows are contiguous: row q-1 follows row q-2, and row q follows row q-1.
  const Interval* a = rows.intervals.data() + offsets[0];
  const Interval* b = a + count;
  const Interval* c = b + count;
  for (int64_t j = 0; j < count; ++j) {
    const int32_t lo_step = c[j].lo - b[j].lo, hi_step = c[j].hi - b[j].hi;
    if (lo_step != b[j].lo - a[j].lo || hi_step != b[j].hi - a[j].hi) return false;
    if (lo_step != 0 && (static_cast<uint32_t>(lo_step + 128) > 255u ||
                         keys_.tile_of(c[j].lo) != keys_.tile_of(a[j].lo)))
      return false;
    if (hi_step != 0 && (static_cast<uint32_t>(hi_step + 128) > 255u ||
                         keys_.tile_of(c[j].hi - 1) != keys_.tile_of(a[j].hi - 1)))
      return false;
  }
  return true;
}

int64_t PieceGatherer::rows_in_tile(int32_t key, int32_t step) const {
  if (step == 0) return std::numeric_limits<int64_t>::max();
  const int32_t tile = keys_.tile_of(key);
  return step > 0 ? (int64_t{keys_.end(tile)} - 1 - key) / step
                  : (int64_t{key} - keys_.start(tile)) / -step;
}

int32_t PieceGatherer::stretch_end(const RowIntervals& rows, int32_t q, int32_t q_end) {
  const int64_t count = rows.row_size(q);
  const Interval* c = rows.row(q);
  const Interval* b = c - count;
  int64_t limit = q_end - 1 - q;  // rows after q that may follow
  steps_.resize(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) {
    const Interval step{c[j].lo - b[j].lo, c[j].hi - b[j].hi};
    steps_[static_cast<size_t>(j)] = step;
    limit = std::min({limit, rows_in_tile(c[j].lo, step.lo), rows_in_tile(c[j].hi - 1, step.hi)});
  }
  const int64_t* offsets = rows.offsets.data();
  const Interval* steps = steps_.data();
  int32_t e = q;
  for (; e - q < limit; ++e) {
    if (offsets[e + 2] - offsets[e + 1] != count) break;
    const Interval* next = rows.intervals.data() + offsets[e + 1];
    const Interval* now = next - count;
    int64_t j = 0;
    while (j < count && next[j].lo - now[j].lo == steps[j].lo &&
           next[j].hi - now[j].hi == steps[j].hi)
      ++j;
    if (j < count) break;
  }
  return e;
}

namespace {

// Calls f(i, lo, hi) for every piece of row q in the partial key tiles: i indexes `partial`,
// [lo, hi) is tile-relative. Returns the number of pieces.
template <class F>
int64_t for_each_piece(const RowIntervals& rows, int32_t q, std::span<const int32_t> partial,
                       const TileAxis& keys, F&& f) {
  int64_t pieces = 0;
  const int32_t first_tile = partial.front(), last_partial = partial.back();
  auto next = partial.begin();
  for (const Interval* it = rows.row(q); it != rows.row(q + 1) && next != partial.end(); ++it) {
    const auto [lo, hi] = *it;
    const int32_t last_tile = keys.tile_of(hi - 1);
    if (last_tile < first_tile) continue;
    const int32_t lo_tile = keys.tile_of(lo);
    if (lo_tile > last_partial) break;
    next = std::lower_bound(next, partial.end(), lo_tile);
    for (auto p = next; p != partial.end() && *p <= last_tile; ++p, ++pieces) {
      const int32_t k0 = keys.start(*p), k1 = keys.end(*p);
      f(static_cast<size_t>(p - partial.begin()), std::max(lo, k0) - k0, std::min(hi, k1) - k0);
    }
  }
  return pieces;
}

}  // namespace

void PieceGatherer::gather(const RowIntervals& rows, int32_t q0, int32_t q1,
                           std::span<const int32_t> partial) {
  if (fitters_.size() < partial.size()) fitters_.resize(partial.size());
  for (size_t i = 0; i < partial.size(); ++i) fitters_[i].reset();
  if (!partial.empty()) {
    // When rows q-3 .. q are steady (see steady()), every piece of q and of the rows that
    // continue the same way extends a band whose slope rows q-2 and q-1 fixed: that stretch
    // is handed at once to the fitters row q-1 touched. The test reads every interval of
    // three rows, so it is left out for rows with many intervals and few pieces (grid
    // neighbourhoods), where gathering is the cheaper way.
    bool previous_steady = false;
    int64_t pieces = 0;  // pieces of the latest gathered row
    for (int32_t q = q0; q < q1; ++q) {
      const bool now_steady = q - q0 >= 2 && 2 * pieces >= rows.row_size(q) && steady(rows, q);
      if (now_steady && previous_steady) {
        touched_.clear();
        for_each_piece(rows, q - 1, partial, keys_, [&](size_t i, int32_t, int32_t) {
          if (touched_.empty() || touched_.back() != i) touched_.push_back(i);
        });
        const int32_t end = stretch_end(rows, q, q1);
        for (size_t i : touched_) fitters_[i].extend_to(end - q0);
        q = end;
        previous_steady = false;  // row end + 1 breaks the stretch, so it is not steady
        continue;
      }
      previous_steady = now_steady;
      pieces = for_each_piece(rows, q, partial, keys_, [&](size_t i, int32_t lo, int32_t hi) {
        fitters_[i].add(q - q0, lo, hi);
      });
    }
  }
  for (size_t i = 0; i < partial.size(); ++i) fitters_[i].finish();
}

void PieceGatherer::pieces_of(const RowIntervals& rows, int32_t q0, int32_t q1, int32_t n,
                              std::vector<RowPiece>& pieces) const {
  pieces.clear();
  const int32_t k0 = keys_.start(n), k1 = keys_.end(n);
  for (int32_t q = q0; q < q1; ++q) {
    for (const Interval* it = rows.row(q); it != rows.row(q + 1); ++it) {
      if (it->hi <= k0 || it->lo >= k1) continue;
      pieces.push_back({q - q0, std::max(it->lo, k0) - k0, std::min(it->hi, k1) - k0});
    }
  }
}

}  // namespace cm::descriptor
