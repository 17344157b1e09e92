// Element masking of partial tiles. A thread computes visibility for one or more rows of a
// tile as a bit set over key columns, from the descriptor's pattern intervals; each element
// then costs one bit test and a select. Which columns the bits stand for is the Columns
// policy: all 128 columns of a row, one 32-bit word per accumulator quad thread (the forward's
// QuadColumns), or 32 consecutive keys of a visibility bitmap word (the backward's
// WindowColumns). Everything here is host-callable too, so that tests/gpu/tile_mask_test.cu
// checks the masking against dense masks on machines without a GPU.
#pragma once

#include <compilemask/descriptor.h>

#include <cute/config.hpp>

#include <stdint.h>

#include <array>

namespace cm::sm90 {

inline constexpr int kMaskTileN = 128;  // the key-tile width the masking assumes

// Column c of a tile is bit 2j + e of quad word `quad` for c = 8j + 2 * quad + e (j < 16,
// e < 2), quad = lane % 4: the columns a thread holds of a 128-wide wgmma accumulator. So the
// columns of quad q below x (x in [0, kMaskTileN]) are its 2 (x / 8) lowest bits plus those of
// the last partial group of 8 columns that lie at 2q or 2q + 1.
__host__ __device__ inline int quad_count_below(int x, int q) {
  return 2 * (x >> 3) + min(max((x & 7) - 2 * q, 0), 2);
}

// The n lowest bits, n in [0, 32]. Only the table below calls it, once per launch, so the
// device needs no faster form than the host's.
__host__ __device__ inline uint32_t low_bits(int n) {
  return n >= 32 ? ~0u : (1u << n) - 1u;
}

// The 128 columns of a tile row as four quad words, word q for the threads with
// lane % 4 == q: computed once per row, read by each quad thread with one 32-bit load.
struct alignas(16) QuadBits {
  uint32_t quad[4];
  __host__ __device__ QuadBits& operator|=(const QuadBits& o) {
    CUTE_UNROLL
    for (int q = 0; q < 4; ++q) quad[q] |= o.quad[q];
    return *this;
  }
  __host__ __device__ QuadBits& operator&=(const QuadBits& o) {
    CUTE_UNROLL
    for (int q = 0; q < 4; ++q) quad[q] &= o.quad[q];
    return *this;
  }
};

// The quad words of the columns below x, for x in [0, kMaskTileN]: QuadColumns's table.
__host__ __device__ inline QuadBits quad_bits_below(int x) {
  QuadBits bits;
  CUTE_UNROLL
  for (int q = 0; q < 4; ++q) bits.quad[q] = low_bits(quad_count_below(x, q));
  return bits;
}

// quad_bits_below(x) at index x: the table QuadColumns reads. The forward fills one in shared
// memory at launch; the host tests use this one.
inline const QuadBits* host_quad_bits_below() {
  static const auto table = [] {
    std::array<QuadBits, kMaskTileN + 1> t;
    for (int x = 0; x <= kMaskTileN; ++x) t[x] = quad_bits_below(x);
    return t;
  }();
  return table.data();
}

class QuadColumns {
 public:
  using Bits = QuadBits;
  // `below`: quad_bits_below(x) at index x for x in [0, kMaskTileN]. A range is then two
  // 16-byte loads and four and-nots, against about 50 instructions computed; the mask warps
  // compute one or two ranges per row (clear's forward 3.9% faster, perf-notes v13f).
  __host__ __device__ explicit QuadColumns(const QuadBits* below) : below_(below) {}

  __host__ __device__ static Bits filled(bool all) {
    const uint32_t w = all ? ~0u : 0u;
    return {{w, w, w, w}};
  }
  // Columns [lo, hi) (tile-relative, any integers). Columns below hi and not below lo: empty
  // for hi <= lo, since the table grows with x.
  __host__ __device__ Bits range(int lo, int hi) const {
    const QuadBits below_hi = below_[min(max(hi, 0), kMaskTileN)];
    const QuadBits below_lo = below_[min(max(lo, 0), kMaskTileN)];
    Bits bits;
    CUTE_UNROLL
    for (int q = 0; q < 4; ++q) bits.quad[q] = below_hi.quad[q] & ~below_lo.quad[q];
    return bits;
  }
  __host__ __device__ int lo() const { return 0; }
  __host__ __device__ int hi() const { return kMaskTileN; }

  // A bitmap row (4 words, column c is bit c % 32 of word c / 32) in quad order: quad q takes
  // bits 2q and 2q + 1 of every byte (columns 8j + 2q + e), 8 bits per word.
  __host__ __device__ static Bits from_bitmap(const uint32_t* row) {
    Bits bits = filled(false);
    CUTE_UNROLL
    for (int w = 0; w < kMaskTileN / 32; ++w) {
      const uint32_t word = row[w];
      CUTE_UNROLL
      for (int q = 0; q < 4; ++q) {
        uint32_t x = (word >> (2 * q)) & 0x03030303u;  // bits 0, 1, 8, 9, 16, 17, 24, 25
        x = (x | (x >> 6)) & 0x000F000Fu;              // bits 0-3, 16-19
        x = (x | (x >> 12)) & 0xFFu;                   // bits 0-7
        bits.quad[q] |= x << (8 * w);
      }
    }
    return bits;
  }

 private:
  const QuadBits* below_;
};

// Column 32 * word + i is bit i: one word of a row of a 128-column visibility bitmap.
class WindowColumns {
 public:
  using Bits = uint32_t;
  __host__ __device__ static Bits filled(bool all) { return all ? ~0u : 0u; }
  __host__ __device__ explicit WindowColumns(int word) : first_(32 * word) {}

  __host__ __device__ uint32_t range(int lo, int hi) const {
    const int a = max(lo - first_, 0), b = min(hi - first_, 32);
    return b > a ? static_cast<uint32_t>((uint64_t{1} << b) - (uint64_t{1} << a)) : 0u;
  }
  __host__ __device__ int lo() const { return first_; }
  __host__ __device__ int hi() const { return first_ + 32; }

  // The word of a bitmap row (4 words, column c is bit c % 32 of word c / 32) under the window.
  __host__ __device__ Bits from_bitmap(const uint32_t* row) const { return row[first_ / 32]; }

 private:
  int first_;
};

// Whether a key tile with pattern `pattern` (-1: full) and `width` keys needs element
// masking: partial tiles, and tiles narrower than kMaskTileN (cut by nk or by the end of a
// block, desc::k_tile_span), whose K rows past the width belong to no tile or to the next.
__host__ __device__ inline bool tile_needs_mask(int pattern, int width) {
  return pattern >= 0 || width < kMaskTileN;
}

// The pattern kind that row_visibility reads as a full tile: nothing is masked. Pattern kinds
// start at 1.
inline constexpr uint8_t kFullTileKind = 0;

// What masking one tile reads from the descriptor: its pattern and, for the grid kinds, the
// pattern's formula, both by value, then where the tile's keys lie (at_keys). Load it once per
// tile (or keep it while the pattern index stays the same) in a local variable. Read per row,
// the chain of dependent global loads from the header to the formula's fields was what limited
// the forward's mask warps on grid masks (perf-notes, v13); a pointer chosen between two
// patterns would place them in local memory.
struct TileMask {
  desc::Pattern pattern;
  desc::GridFormula formula;  // the grid kinds only
  desc::Divisor by_strip;     // divisor(formula.strip) from tile_mask_for_rows, else d = 0
  int k0;                     // the key tile's first key
  desc::GridRange keys;       // the grid kinds: the grid offsets under the columns

  // Places the mask on the key tile starting at k0, for the columns `cols`. The grid kinds
  // find the cell where the tile's keys start here, once per tile (a division) instead of once
  // per row.
  template <class Columns>
  __host__ __device__ void at_keys(int first_key, const Columns& cols) {
    k0 = first_key;
    if (desc::is_grid_kind(pattern.kind)) {
      const int base = formula.start - k0;  // tile-relative column of the grid's first token
      keys = desc::grid_range(formula, cols.lo() - base, cols.hi() - base, by_strip);
    }
  }
};

// The mask of a tile for row_visibility: pattern `index` of the descriptor, or a full tile for
// a negative index. Place it with at_keys before reading rows.
__host__ __device__ inline TileMask tile_mask(const void* blob, int index) {
  TileMask m{};
  if (index < 0) {
    m.pattern.kind = kFullTileKind;
    return m;
  }
  m.pattern = desc::pattern(blob, static_cast<uint32_t>(index));
  if (desc::is_grid_kind(m.pattern.kind)) m.formula = desc::grid_formula(blob, m.pattern.formula);
  return m;
}

// tile_mask for a mask kept over many rows (the forward's mask warps keep it while the pattern
// stays the same): with the grid kinds' strip divisor, whose one division saves one per row.
// The backward makes a mask per step for one row per thread, where it would not pay.
__host__ __device__ inline TileMask tile_mask_for_rows(const void* blob, int index) {
  TileMask m = tile_mask(blob, index);
  if (desc::is_grid_kind(m.pattern.kind)) m.by_strip = desc::divisor(m.formula.strip);
  return m;
}

// Adds to `bits` the visibility bits, among `cols` (those of m.at_keys), of query row q for the
// grid formula of m: the intervals of desc::for_each_grid_interval, with tabulated
// half-widths, walking only the grid segments under the columns.
template <class Columns>
__host__ __device__ void add_grid_row_bits(const void* blob, const TileMask& m, int q,
                                           const Columns& cols, typename Columns::Bits& bits) {
  const desc::GridFormula& f = m.formula;
  desc::GridCell c;
  if (!desc::grid_center(f, q, c, m.by_strip)) return;
  const int base = f.start - m.k0;
  desc::for_each_visible_run(
      f, c, m.keys, [&](int dt, int dy) { return desc::grid_half_width_table(blob, f, dt, dy); },
      [&](int lo, int hi) { bits |= cols.range(base + lo, base + hi); });
}

// Visibility bits, among `cols` (those of m.at_keys), of tile-relative row r of the partial
// tile whose first row is q0, masked by `m`, restricted to key columns below `key_limit`
// (tile-relative: the tile's width). A full tile applies only the key limit.
template <class Columns>
__host__ __device__ typename Columns::Bits row_visibility(const void* blob, const TileMask& m,
                                                          int q0, int r, int key_limit,
                                                          const Columns& cols) {
  const desc::Pattern& p = m.pattern;
  const bool full = p.kind == kFullTileKind;
  typename Columns::Bits visible = Columns::filled(full);
  if (!full) {
    if (p.kind == desc::kPatternBitmap) {  // rows of kMaskTileN / 32 words
      visible = cols.from_bitmap(desc::at<uint32_t>(blob, p.data_offset) + r * (kMaskTileN / 32));
    } else {
      // Columns sets clamp by themselves, so the listed intervals go in as written.
      desc::for_each_listed_interval(blob, p, m.k0, r,
                                     [&](int lo, int hi) { visible |= cols.range(lo, hi); });
      if (desc::is_grid_kind(p.kind)) add_grid_row_bits(blob, m, q0 + r, cols, visible);
    }
  }
  if (key_limit < kMaskTileN) visible &= cols.range(0, key_limit);
  return visible;
}

}  // namespace cm::sm90
