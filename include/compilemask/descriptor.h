// The CompileMask descriptor: a versioned, position-independent binary blob that tells an
// attention kernel, for every (query tile, key tile) pair, whether it is empty, full or partial,
// and for partial tiles how to mask elements. One header serves host and device code.
//
// Conventions (see docs/descriptor.md for the full format):
//   * Query row q and key column k are 0-based token indices. Tiles are at most tile_m queries
//     by tile_n keys; query tile m covers rows [q_starts[m], q_starts[m+1]) and key tile n
//     columns [k_starts[n], k_starts[n+1]) (the tile-start tables, see q_tile_span). Tiles
//     restart at the boundaries of block-diagonal masks (packed sequences), so a tile may be
//     shorter than tile_m or tile_n anywhere, not only at nq or nk.
//   * Every interval is half-open [lo, hi). An interval with hi <= lo is empty.
//   * All offsets are in bytes from the first byte of the blob; every section starts 16-byte
//     aligned. Integers are little-endian.
//   * "Forward form": per query tile, runs of key tiles. "Transposed form": per key tile, runs
//     of query tiles (for the backward pass). Both reference one shared pattern table, and a
//     pattern is always expressed in (query row, key column) orientation relative to the tile
//     origin, so a partial tile has the same pattern id in both forms.
//   * Tiles absent from every run are empty and must never be touched by a kernel; so are the
//     tiles of a kPatternGridSparse run for which partial_tile_nonempty() is false.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define CM_HD __host__ __device__ __forceinline__
#else
#define CM_HD inline
#endif

namespace cm::desc {

inline constexpr uint32_t kMagic = 0x4B534D43u;  // "CMSK" in little-endian byte order
inline constexpr uint16_t kVersion = 7;
inline constexpr int kMaxTileM = 256;  // pattern row indices are stored in 8 bits
inline constexpr int kMaxTileN = 256;
inline constexpr int kMaxTiles = 65535;  // tile indices in runs are 16-bit
// A run whose pattern is kPatternGridSparse never holds more than this many consecutive empty
// tiles, so a kernel skipping them does bounded work (see partial_tile_nonempty).
inline constexpr int kMaxSparseGap = 16;

// The blob starts with this header.
struct Header {
  uint32_t magic;         // kMagic
  uint16_t version;       // kVersion
  uint16_t header_bytes;  // sizeof(Header), for forward compatibility
  uint64_t total_bytes;   // size of the whole blob
  int32_t nq, nk;         // query and key lengths
  int32_t tile_m, tile_n;
  int32_t num_q_tiles, num_k_tiles;  // entries of the tile-start tables, less one
  int32_t batch, heads;              // the (b, h) grid the instance map covers
  int32_t num_instances;             // distinct masks after deduplication across (b, h)
  int32_t num_patterns;
  int32_t num_grid_formulas;
  int32_t reserved0;
  uint32_t instance_map_offset;   // int32[batch * heads]: instance index of (b, h) at b*heads + h
  uint32_t instances_offset;      // Instance[num_instances]
  uint32_t patterns_offset;       // Pattern[num_patterns]
  uint32_t grid_formulas_offset;  // GridFormula[num_grid_formulas]
  uint32_t q_starts_offset;  // int32[num_q_tiles + 1]: query tile m is [q_starts[m], q_starts[m+1])
  uint32_t k_starts_offset;  // int32[num_k_tiles + 1]: key tile n is [k_starts[n], k_starts[n+1])
  uint64_t reserved1;
};
static_assert(sizeof(Header) == 96, "descriptor header layout is part of the format");

// One distinct mask. Offsets point at arrays inside the blob.
struct Instance {
  uint32_t q_tiles_offset;    // TileRow[num_q_tiles]: forward form, one row per query tile
  uint32_t k_tiles_offset;    // TileRow[num_k_tiles]: transposed form, one row per key tile
  uint32_t fwd_order_offset;  // uint16[num_q_tiles]: query tiles by descending cost (LPT order)
  uint32_t bwd_order_offset;  // uint16[num_k_tiles]: key tiles by descending cost
  uint64_t visible_pairs;     // exact number of visible (q, k) pairs of this mask
  uint64_t reserved0;
};
static_assert(sizeof(Instance) == 32, "descriptor layout");

// The work of one query tile (forward) or key tile (transposed): runs of fully visible tiles
// (no mask code needed) and runs of partially visible tiles (masked from a pattern).
struct TileRow {
  uint32_t full_offset;     // FullRun[full_count]
  uint32_t partial_offset;  // PartialRun[partial_count]
  uint16_t full_count;
  uint16_t partial_count;
  float cost;  // estimated work in units of one full tile, for load balancing
};
static_assert(sizeof(TileRow) == 16, "descriptor layout");

// Tiles [first, first + count) along the other axis, all fully visible.
struct FullRun {
  uint16_t first;
  uint16_t count;
};
static_assert(sizeof(FullRun) == 4, "descriptor layout");

// Tiles [first, first + count), all partial and all masked by one pattern.
struct PartialRun {
  uint16_t first;
  uint16_t count;
  uint32_t pattern;  // index into the pattern table
};
static_assert(sizeof(PartialRun) == 8, "descriptor layout");

enum PatternKind : uint8_t {
  // Affine row bands: data is RowBand[count]. Row r of the tile sees the union, over the bands
  // that contain r, of the columns [lo(r), hi(r)) clamped to [0, tile_n).
  kPatternBands = 1,
  // Bitmap: data is uint32[tile_m * words_per_row], words_per_row = ceil(tile_n / 32); bit c of
  // row r is word r*words_per_row + c/32, bit c%32. Set means visible.
  kPatternBitmap = 2,
  // Grid neighbourhood formula (absolute coordinates) united with a bands residual: data is
  // RowBand[count] (the residual, possibly count == 0) and `formula` names the GridFormula.
  kPatternGrid = 3,
  // Grid neighbourhood formula alone (count == 0, no data); masks like kPatternGrid. A
  // PartialRun with this pattern may also span empty tiles (at most kMaxSparseGap in a row):
  // its members are exactly the tiles for which partial_tile_nonempty() is true, and a kernel
  // must skip the others. (Added in version 2.)
  kPatternGridSparse = 4,
  // Per-row ranges: data is RowRange[tile_m * count], row r's ranges at [r * count, r * count
  // + count). Row r sees the union of its non-empty ranges. For rows whose pieces no few bands
  // describe (windows drawn per row), a kernel reads each row's ranges in one load instead of
  // walking every band. (Added in version 6.)
  kPatternRowRanges = 5,
  // The rows' own key intervals: data is KeyInterval[tile_m * count] in the instance's key
  // columns (not tile-relative), row r's at [r * count, r * count + count), rows past the query
  // tile's end empty. Row r sees the union of its intervals, restricted to the tile. One table
  // serves every key tile of one query tile (and so does the pattern, for the tiles with the
  // same empty_halves), so rows whose bounds are drawn per row cost O(rows) bytes, not
  // O(partial tiles x tile_m). (Added in version 7.)
  kPatternRowTable = 6,
};

// True for the kinds whose masking includes a GridFormula.
CM_HD bool is_grid_kind(uint8_t kind) {
  return kind == kPatternGrid || kind == kPatternGridSparse;
}

struct Pattern {
  uint8_t kind;  // PatternKind
  // Bit h set: rows [h * tile_m / 2, (h + 1) * tile_m / 2) see no key in any tile masked by
  // this pattern, so a kernel that walks half tiles may skip that half. A hint: 0 claims
  // nothing (grid kinds always, and descriptors written before the field had a name).
  uint8_t empty_halves;
  uint16_t count;  // RowBand entries (bands and grid kinds); ranges or intervals per row
  uint32_t data_offset;
  int32_t formula;  // GridFormula index for the grid kinds, else -1
  uint32_t reserved1;
};
static_assert(sizeof(Pattern) == 16, "descriptor layout");

// Whether half `half` (0: the first tile_m / 2 rows, 1: the rest) of every tile masked by
// pattern p sees no key (Pattern::empty_halves).
CM_HD bool half_is_empty(const Pattern& p, int half) {
  return (p.empty_halves >> half) & 1u;
}

// Rows [row_first, row_last] (tile-relative) see [lo0 + lo_slope*(r-row_first),
// hi0 + hi_slope*(r-row_first)) in tile-relative key columns, clamped to [0, tile_n).
struct RowBand {
  uint8_t row_first;
  uint8_t row_last;
  int8_t lo_slope;
  int8_t hi_slope;
  int16_t lo0;
  int16_t hi0;
};
static_assert(sizeof(RowBand) == 8, "descriptor layout");

// Tile-relative key columns [first, last + 1) of one row, or nothing when first > last
// (written as {255, 0}). Storing the last column instead of the end keeps tile_n = 256 in 8 bits.
struct alignas(2) RowRange {
  uint8_t first;
  uint8_t last;
};
static_assert(sizeof(RowRange) == 2, "descriptor layout");
inline constexpr RowRange kEmptyRowRange{255, 0};

// Row r's k-th range of a kPatternRowRanges pattern with `count` ranges per row: true, with
// the columns [lo, hi), when it is not empty.
CM_HD bool row_range(const RowRange* ranges, int count, int r, int k, int& lo, int& hi) {
  const RowRange range = ranges[r * count + k];
  lo = range.first;
  hi = range.last + 1;
  return lo < hi;
}

// Key columns [lo, hi) of one row of a kPatternRowTable pattern, in the instance's key columns;
// empty when hi <= lo (the builder writes {0, 0}).
struct alignas(8) KeyInterval {  // aligned so that a reader loads it at once
  int32_t lo;
  int32_t hi;
};
static_assert(sizeof(KeyInterval) == 8, "descriptor layout");

enum GridShape : int32_t {
  kShapeBox = 0,      // |dt| <= rt, |dy| <= ry, |dx| <= rx
  kShapeEllipse = 1,  // dt²/rt² + dy²/ry² + dx²/rx² < 1 (for 2D grids dt is 0 and rt is 1)
};

// The largest radius a GridFormula may have: the ellipse test squares products of radii and
// offsets, which stay exact in 64-bit arithmetic up to this bound.
inline constexpr int32_t kMaxGridRadius = 1024;

// A neighbourhood on a grid of frames x rows x cols tokens starting at token `start`. Query
// rows in [q_lo, q_hi) whose position lies on the grid see the grid keys around them. Only the
// part of the neighbourhood inside the grid is visible.
//
// Token order (the grid's layout): frame by frame; inside a frame the columns are cut into
// vertical strips of `strip` columns (the last one narrower when `strip` does not divide
// `cols`), laid out strip by strip, each strip row by row. strip == cols is the plain row-major
// layout. Narrow strips keep a tile's tokens close in 2D, so a neighbourhood mask touches far
// fewer tiles (see docs/language.md, strip_grid).
struct GridFormula {
  int32_t q_lo, q_hi;          // query rows the formula applies to
  int32_t start;               // first token of the grid (keys)
  int32_t center_start;        // first token of the grid the query's centre lies on
  int32_t frames, rows, cols;  // grid extent; frames == 1 for 2D grids
  int32_t strip;               // strip width in columns, in [1, cols]
  int32_t shape;               // GridShape
  int32_t rt, ry, rx;          // radii, each in [0, kMaxGridRadius] ([1, ...] for ellipses)
  // int16 half_widths[(grid_table_dt_max + 1) * (grid_table_dy_max + 1)]: the formula's
  // grid_half_width for every |dt|, |dy| a grid holds, tabulated so kernels need no square root
  // (see grid_half_width_table). Written by the builder; 0 in formulas not yet placed in a blob.
  uint32_t half_widths_offset;
  uint32_t reserved;
};
static_assert(sizeof(GridFormula) == 56, "descriptor layout");

// ---- Accessors, usable from host and device code -------------------------------------------

template <class T>
CM_HD const T* at(const void* blob, uint32_t offset) {
  return reinterpret_cast<const T*>(static_cast<const unsigned char*>(blob) + offset);
}

CM_HD const Header& header(const void* blob) {
  return *at<Header>(blob, 0);
}

// The instance that masks head h of batch row b. A descriptor made for batch 1 (heads 1) serves
// every batch row (head) of the call, so the rule lives here for the kernels, the reference and
// the tools alike.
CM_HD int instance_of(const void* blob, int b, int h) {
  const Header& hd = header(blob);
  const int row = hd.batch == 1 ? 0 : b, head = hd.heads == 1 ? 0 : h;
  return at<int32_t>(blob, hd.instance_map_offset)[row * hd.heads + head];
}

CM_HD const Instance& instance(const void* blob, int index) {
  return at<Instance>(blob, header(blob).instances_offset)[index];
}

CM_HD const Instance& mask_of(const void* blob, int b, int h) {
  return instance(blob, instance_of(blob, b, h));
}

CM_HD const TileRow& q_tile(const void* blob, const Instance& inst, int m) {
  return at<TileRow>(blob, inst.q_tiles_offset)[m];
}

CM_HD const TileRow& k_tile(const void* blob, const Instance& inst, int n) {
  return at<TileRow>(blob, inst.k_tiles_offset)[n];
}

CM_HD const FullRun* full_runs(const void* blob, const TileRow& row) {
  return at<FullRun>(blob, row.full_offset);
}

CM_HD const PartialRun* partial_runs(const void* blob, const TileRow& row) {
  return at<PartialRun>(blob, row.partial_offset);
}

// The key tiles (query tiles, for a transposed row) that a row's runs list.
CM_HD int listed_tiles(const void* blob, const TileRow& row) {
  int tiles = 0;
  for (int i = 0; i < row.full_count; ++i) tiles += full_runs(blob, row)[i].count;
  for (int i = 0; i < row.partial_count; ++i) tiles += partial_runs(blob, row)[i].count;
  return tiles;
}

CM_HD const Pattern& pattern(const void* blob, uint32_t index) {
  return at<Pattern>(blob, header(blob).patterns_offset)[index];
}

CM_HD const GridFormula& grid_formula(const void* blob, int index) {
  return at<GridFormula>(blob, header(blob).grid_formulas_offset)[index];
}

// The tokens [begin, end) of one tile along one axis.
struct TileSpan {
  int begin, end;
  CM_HD int size() const { return end - begin; }
};

// Tile t of a tile-start table.
CM_HD TileSpan tile_span(const int32_t* starts, int t) {
  return {starts[t], starts[t + 1]};
}

// Rows of query tile m.
CM_HD TileSpan q_tile_span(const void* blob, int m) {
  return tile_span(at<int32_t>(blob, header(blob).q_starts_offset), m);
}

// Columns of key tile n.
CM_HD TileSpan k_tile_span(const void* blob, int n) {
  return tile_span(at<int32_t>(blob, header(blob).k_starts_offset), n);
}

// The tile of a tile-start table (count tiles) that holds token x, 0 <= x < starts[count]:
// binary search, for readers that go from tokens to tiles (renderers).
CM_HD int tile_holding(const int32_t* starts, int count, int x) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (starts[mid] <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

CM_HD int q_tile_of(const void* blob, int q) {
  const Header& hd = header(blob);
  return tile_holding(at<int32_t>(blob, hd.q_starts_offset), hd.num_q_tiles, q);
}

CM_HD int k_tile_of(const void* blob, int k) {
  const Header& hd = header(blob);
  return tile_holding(at<int32_t>(blob, hd.k_starts_offset), hd.num_k_tiles, k);
}

CM_HD int clamp_int(long long v, int lo, int hi) {
  return v < lo ? lo : (v > hi ? hi : static_cast<int>(v));
}

// Largest w >= 0 with w*w <= v (v >= 0). Exact integer square root.
CM_HD long long isqrt_floor(long long v) {
  long long w = static_cast<long long>(__builtin_sqrt(static_cast<double>(v)));
  while (w * w > v) --w;
  while ((w + 1) * (w + 1) <= v) ++w;
  return w;
}

// Half-width in columns of a grid neighbourhood at frame offset dt and row offset dy, or -1 if
// that (dt, dy) slice of the neighbourhood is empty.
CM_HD long long grid_half_width(const GridFormula& f, long long dt, long long dy) {
  if (f.shape == kShapeBox) {
    const bool inside = (dt < 0 ? -dt : dt) <= f.rt && (dy < 0 ? -dy : dy) <= f.ry;
    return inside ? f.rx : -1;
  }
  // dt²·(ry·rx)² + dy²·(rt·rx)² + dx²·(rt·ry)² < (rt·ry·rx)²
  const long long rt = f.rt, ry = f.ry, rx = f.rx;
  const long long budget =
      rt * rt * ry * ry * rx * rx - dt * dt * ry * ry * rx * rx - dy * dy * rt * rt * rx * rx;
  if (budget <= 0) return -1;
  return isqrt_floor((budget - 1) / (rt * rt * ry * ry));
}

// The half-width table covers the frame and row offsets that occur on the grid within the
// radii: |dt| <= grid_table_dt_max, |dy| <= grid_table_dy_max. Beyond them no key is visible.
CM_HD int grid_table_dt_max(const GridFormula& f) {
  return f.rt < f.frames - 1 ? f.rt : f.frames - 1;
}
CM_HD int grid_table_dy_max(const GridFormula& f) {
  return f.ry < f.rows - 1 ? f.ry : f.rows - 1;
}
CM_HD int64_t grid_table_entries(const GridFormula& f) {
  return int64_t{grid_table_dt_max(f) + 1} * (grid_table_dy_max(f) + 1);
}

// Where grid_half_width(f, dt, dy) lies in the formula's half_widths table (laid out as
// GridFormula::half_widths_offset describes), or -1 when |dt| or |dy| is past the table (no key
// visible there); for |dt| < frames, |dy| < rows.
CM_HD int grid_half_width_index(const GridFormula& f, int dt, int dy) {
  const int adt = dt < 0 ? -dt : dt, ady = dy < 0 ? -dy : dy;
  const int dy_max = grid_table_dy_max(f);
  if (adt > grid_table_dt_max(f) || ady > dy_max) return -1;
  return adt * (dy_max + 1) + ady;
}

// grid_half_width(f, dt, dy) read from the formula's table in the blob.
CM_HD int grid_half_width_table(const void* blob, const GridFormula& f, int dt, int dy) {
  const int i = grid_half_width_index(f, dt, dy);
  return i < 0 ? -1 : at<int16_t>(blob, f.half_widths_offset)[i];
}

// ---- Grid geometry, in the token order of GridFormula ----------------------------------------

CM_HD int imin(int a, int b) {
  return a < b ? a : b;
}
CM_HD int imax(int a, int b) {
  return a > b ? a : b;
}

// Tokens on the grid. Fits in int32 for every formula that passes the builder's checks.
CM_HD int grid_extent(const GridFormula& f) {
  return f.frames * f.rows * f.cols;
}

// Width of the strip whose first column is x0.
CM_HD int strip_width(const GridFormula& f, int x0) {
  return imin(f.strip, f.cols - x0);
}

// First column of the strip that holds column x. Integer divisions dominate the grid walks in
// the kernels' masking, so this and grid_cell skip them in the common cases: row-major grids
// (one strip) and single frames.
CM_HD int strip_start(const GridFormula& f, int x) {
  return f.strip == f.cols ? 0 : x - x % f.strip;
}

// A grid position: frame t, row y, column x.
struct GridCell {
  int t, y, x;
};

// Offset from the grid's first token of the token at cell c.
CM_HD int grid_offset(const GridFormula& f, const GridCell& c) {
  const int x0 = strip_start(f, c.x);
  return c.t * f.rows * f.cols + x0 * f.rows + c.y * strip_width(f, x0) + (c.x - x0);
}

// Division of values in [0, 2^31) by a fixed positive divisor d: one multiply-high and one
// correction instead of an integer division. Kernels keep one for a formula's strip width,
// since every masked row's centre divides by it (grid_cell); the builder one for the tile size
// (TileAxis::tile_of, in the classification's inner loops).
struct Divisor {
  int d;
  uint32_t magic;  // ceil(2^32 / d) for d >= 2
};

CM_HD Divisor divisor(int d) {
  return {d, d >= 2 ? static_cast<uint32_t>(0xFFFFFFFFull / static_cast<uint32_t>(d) + 1) : 0u};
}

// n / v.d for n in [0, 2^31). magic = (2^32 + e) / d with 0 <= e < d, so n * magic / 2^32 =
// n / d + n e / (d 2^32) exceeds n / d by less than 1 / 2: the estimate is the quotient or
// one more.
CM_HD int divide(int n, const Divisor& v) {
  if (v.d == 1) return n;
  const uint32_t u = static_cast<uint32_t>(n);
#ifdef __CUDA_ARCH__
  uint32_t q = __umulhi(u, v.magic);
#else
  uint32_t q = static_cast<uint32_t>((static_cast<uint64_t>(u) * v.magic) >> 32);
#endif
  if (q * static_cast<uint32_t>(v.d) > u) --q;
  return static_cast<int>(q);
}

// The cell of the token at offset rel in [0, grid_extent) from the grid's first token.
// by_strip, if given (d != 0), is divisor(f.strip): it replaces the division within full-width
// strips.
CM_HD GridCell grid_cell(const GridFormula& f, int rel, Divisor by_strip = {0, 0u}) {
  const int plane = f.rows * f.cols;
  const int t = f.frames == 1 ? 0 : rel / plane;
  const int in_frame = rel - t * plane;
  // Earlier strips are all full width.
  const int x0 = f.strip == f.cols ? 0 : in_frame / (f.strip * f.rows) * f.strip;
  const int width = strip_width(f, x0);
  const int local = in_frame - x0 * f.rows;
  const int y = by_strip.d != 0 && width == f.strip ? divide(local, by_strip) : local / width;
  return {t, y, x0 + local - y * width};
}

// Consecutive tokens on one grid row inside one strip: columns [x0, x1) of row y of frame t; the
// token of column x0 lies at offset `first` from the grid's first token.
struct GridSegment {
  int t, y, x0, x1, first;
};

// The grid offsets [a, b), clipped to the grid, with the cell of a: where a segment walk
// starts. Kernels compute it once per key tile, not once per row (it costs a division).
struct GridRange {
  int a, b;
  GridCell first;  // grid_cell(a), when a < b
};

CM_HD GridRange grid_range(const GridFormula& f, int a, int b, Divisor by_strip = {0, 0u}) {
  GridRange r{imax(a, 0), imin(b, grid_extent(f)), {0, 0, 0}};
  if (r.a < r.b) r.first = grid_cell(f, r.a, by_strip);
  return r;
}

// Calls visit(segment) for the segments that cover the grid offsets of `range`, in token
// order, each cut to the range. Stops when visit returns false.
template <class Visit>
CM_HD void for_each_grid_segment(const GridFormula& f, const GridRange& range, Visit&& visit) {
  int a = range.a;
  const int b = range.b;
  if (a >= b) return;
  GridCell c = range.first;
  int x0 = strip_start(f, c.x);
  while (true) {
    const int run = imin(x0 + strip_width(f, x0) - c.x, b - a);
    if (!visit(GridSegment{c.t, c.y, c.x, c.x + run, a})) return;
    a += run;
    if (a >= b) return;
    if (++c.y == f.rows) {  // the strip's next row, else the next strip, else the next frame
      c.y = 0;
      x0 += f.strip;
      if (x0 >= f.cols) {
        x0 = 0;
        ++c.t;
      }
    }
    c.x = x0;
  }
}

// The same over the grid offsets [a, b) (clipped to the grid).
template <class Visit>
CM_HD void for_each_grid_segment(const GridFormula& f, int a, int b, Visit&& visit) {
  for_each_grid_segment(f, grid_range(f, a, b), visit);
}

// Calls emit(lo, hi) for the runs of grid offsets [lo, hi) inside `range` that a centre at
// cell c sees, in increasing order. half_width(dt, dy) is the neighbourhood's column
// half-width at that frame and row offset, or -1 (grid_half_width, or its table in kernels).
// Walks every segment of the range: for short ranges such as one key tile.
template <class HalfWidth, class Emit>
CM_HD void for_each_visible_run(const GridFormula& f, const GridCell& c, const GridRange& range,
                                HalfWidth&& half_width, Emit&& emit) {
  for_each_grid_segment(f, range, [&](const GridSegment& s) {
    const int w = half_width(s.t - c.t, s.y - c.y);
    if (w >= 0) {
      const int first = imax(c.x - w, s.x0), end = imin(c.x + w + 1, s.x1);
      if (first < end) emit(s.first + first - s.x0, s.first + end - s.x0);
    }
    return true;
  });
}

// The same over the grid offsets [a, b).
template <class HalfWidth, class Emit>
CM_HD void for_each_visible_run(const GridFormula& f, const GridCell& c, int a, int b,
                                HalfWidth&& half_width, Emit&& emit) {
  for_each_visible_run(f, c, grid_range(f, a, b), half_width, emit);
}

// for_each_visible_run restricted to the strips and rows within the radii: for long ranges
// such as a whole key row.
template <class HalfWidth, class Emit>
CM_HD void for_each_neighbourhood_run(const GridFormula& f, const GridCell& c, int a, int b,
                                      HalfWidth&& half_width, Emit&& emit) {
  const int t_lo = imax(c.t - f.rt, 0), t_hi = imin(c.t + f.rt, f.frames - 1);
  const int y_lo = imax(c.y - f.ry, 0), y_hi = imin(c.y + f.ry, f.rows - 1);
  const int x_lo = imax(c.x - f.rx, 0), x_hi = imin(c.x + f.rx, f.cols - 1);
  for (int t = t_lo; t <= t_hi; ++t) {
    for (int x0 = strip_start(f, x_lo); x0 <= x_hi; x0 += f.strip) {
      const int lo = imax(grid_offset(f, {t, y_lo, x0}), a);
      const int hi = imin(grid_offset(f, {t, y_hi, x0}) + strip_width(f, x0), b);
      for_each_visible_run(f, c, lo, hi, half_width, emit);
    }
  }
}

// Whether query row q has a centre: q is among the formula's query rows and on its grid.
CM_HD bool grid_has_center(const GridFormula& f, int q) {
  const long long rel = static_cast<long long>(q) - f.center_start;
  return q >= f.q_lo && q < f.q_hi && rel >= 0 && rel < grid_extent(f);
}

// The grid cell of query row q's centre, or false when it has none (grid_has_center). by_strip
// as for grid_cell.
CM_HD bool grid_center(const GridFormula& f, int q, GridCell& c, Divisor by_strip = {0, 0u}) {
  if (!grid_has_center(f, q)) return false;
  c = grid_cell(f, static_cast<int>(static_cast<long long>(q) - f.center_start), by_strip);
  return true;
}

// Calls emit(lo, hi) for each visible key interval of query row q within the key columns
// [k0, k1), in increasing order, for a grid formula. Intervals are absolute and non-empty.
// half_width as for for_each_neighbourhood_run.
template <class HalfWidth, class Emit>
CM_HD void for_each_grid_interval(const GridFormula& f, int q, int k0, int k1,
                                  HalfWidth&& half_width, Emit&& emit) {
  GridCell c;
  if (!grid_center(f, q, c)) return;
  const long long a = static_cast<long long>(k0) - f.start,
                  b = static_cast<long long>(k1) - f.start;
  if (b <= 0 || a >= grid_extent(f)) return;
  for_each_neighbourhood_run(f, c, static_cast<int>(a < 0 ? 0 : a), static_cast<int>(b), half_width,
                             [&](int lo, int hi) { emit(f.start + lo, f.start + hi); });
}

// As above, each half-width computed (grid_half_width).
template <class Emit>
CM_HD void for_each_grid_interval(const GridFormula& f, int q, int k0, int k1, Emit&& emit) {
  for_each_grid_interval(
      f, q, k0, k1, [&](int dt, int dy) { return static_cast<int>(grid_half_width(f, dt, dy)); },
      emit);
}

// True if some query row in [q0, q1) sees some key in [k0, k1) through the formula. Exact.
// half_width as for for_each_neighbourhood_run. Cost: (query segments) x (key segments), one
// half_width each within the radii; a 128 x 128 tile on a row-major grid of 128 or more
// columns has at most 2 x 2, on 16-column strips at most 9 x 9.
template <class HalfWidth>
CM_HD bool grid_tile_touched(const GridFormula& f, int q0, int q1, int k0, int k1,
                             HalfWidth&& half_width) {
  const long long extent = grid_extent(f);
  // Centres, relative to center_start, and keys, relative to start, as [a, b) ranges.
  long long qa = static_cast<long long>(q0 > f.q_lo ? q0 : f.q_lo) - f.center_start;
  long long qb = static_cast<long long>(q1 < f.q_hi ? q1 : f.q_hi) - f.center_start;
  long long ka = static_cast<long long>(k0) - f.start, kb = static_cast<long long>(k1) - f.start;
  if (qa < 0) qa = 0;
  if (qb > extent) qb = extent;
  if (ka < 0) ka = 0;
  if (kb > extent) kb = extent;
  if (qa >= qb || ka >= kb) return false;
  bool touched = false;
  for_each_grid_segment(f, static_cast<int>(qa), static_cast<int>(qb), [&](const GridSegment& qs) {
    for_each_grid_segment(f, static_cast<int>(ka), static_cast<int>(kb),
                          [&](const GridSegment& ks) {
                            const int dt = ks.t - qs.t, dy = ks.y - qs.y;
                            if (dt < -f.rt || dt > f.rt || dy < -f.ry || dy > f.ry) return true;
                            const int w = half_width(dt, dy);
                            // Centres [x0, x1) see columns [x0 - w, x1 + w).
                            touched = w >= 0 && qs.x0 - w < ks.x1 && qs.x1 + w > ks.x0;
                            return !touched;
                          });
    return !touched;
  });
  return touched;
}

// Row r (tile-relative) of a band as written, not clamped: true, with [lo, hi), when the band
// covers row r. The kernels' column sets clamp by themselves (tile_mask.cuh).
CM_HD bool band_interval(const RowBand& band, int r, int& lo, int& hi) {
  if (r < band.row_first || r > band.row_last) return false;
  const int d = r - band.row_first;
  lo = band.lo0 + band.lo_slope * d;
  hi = band.hi0 + band.hi_slope * d;
  return true;
}

// Row r of a band clamped to [0, tile_n): true, with [lo, hi), when the band covers row r and
// the interval is not empty.
CM_HD bool band_row(const RowBand& band, int r, int tile_n, int& lo, int& hi) {
  if (!band_interval(band, r, lo, hi)) return false;
  lo = clamp_int(lo, 0, tile_n);
  hi = clamp_int(hi, 0, tile_n);
  return lo < hi;
}

// Calls emit(lo, hi) with the intervals a pattern lists for row r (tile-relative) of a tile
// whose keys start at k0: a row-ranges or row-table pattern's entries for the row, or the
// bands' (the grid kinds' residual bands too), tile-relative and not clamped, so they may
// reach outside [0, tile_n) or be empty. Bitmaps and grid formulas list nothing here.
template <class Emit>
CM_HD void for_each_listed_interval(const void* blob, const Pattern& p, int k0, int r,
                                    Emit&& emit) {
  if (p.kind == kPatternRowRanges) {
    const RowRange* ranges = at<RowRange>(blob, p.data_offset);
    for (int k = 0; k < p.count; ++k) {
      int lo, hi;
      if (row_range(ranges, p.count, r, k, lo, hi)) emit(lo, hi);
    }
  } else if (p.kind == kPatternRowTable) {
    const KeyInterval* row = at<KeyInterval>(blob, p.data_offset) + r * p.count;
    for (int k = 0; k < p.count; ++k) {
      const KeyInterval interval = row[k];  // one 8-byte load
      emit(interval.lo - k0, interval.hi - k0);
    }
  } else if (p.kind != kPatternBitmap) {
    const RowBand* bands = at<RowBand>(blob, p.data_offset);
    for (int i = 0; i < p.count; ++i) {
      const RowBand band = bands[i];  // one load of the whole band
      int lo, hi;
      if (band_interval(band, r, lo, hi)) emit(lo, hi);
    }
  }
}

// Calls emit(lo, hi) with tile-relative column intervals [lo, hi) ⊆ [0, tile_n) whose union,
// cut at the tile's width, is the visible part of row r (tile-relative) of a partial tile at
// origin (q0, k0) with pattern p. Intervals may overlap and are not sorted. Bitmap patterns
// emit one interval per set run.
template <class Emit>
CM_HD void for_each_pattern_interval(const void* blob, const Pattern& p, int q0, int k0, int r,
                                     Emit&& emit) {
  const Header& hd = header(blob);
  if (p.kind == kPatternBitmap) {
    const int words = (hd.tile_n + 31) / 32;
    const uint32_t* bits = at<uint32_t>(blob, p.data_offset) + r * words;
    int c = 0;
    while (c < hd.tile_n) {
      if (!((bits[c / 32] >> (c % 32)) & 1u)) {
        ++c;
        continue;
      }
      const int lo = c;
      while (c < hd.tile_n && ((bits[c / 32] >> (c % 32)) & 1u)) ++c;
      emit(lo, c);
    }
    return;
  }
  for_each_listed_interval(blob, p, k0, r, [&](int lo, int hi) {
    lo = clamp_int(lo, 0, hd.tile_n);
    hi = clamp_int(hi, 0, hd.tile_n);
    if (lo < hi) emit(lo, hi);
  });
  if (is_grid_kind(p.kind)) {
    const GridFormula& f = grid_formula(blob, p.formula);
    for_each_grid_interval(f, q0 + r, k0, k0 + hd.tile_n,
                           [&](int lo, int hi) { emit(lo - k0, hi - k0); });
  }
}

// True if tile (m, n), listed in a PartialRun with pattern p, is non-empty. Always true except
// for kPatternGridSparse, whose runs may span empty tiles that a kernel must skip.
CM_HD bool partial_tile_nonempty(const void* blob, const Pattern& p, int m, int n) {
  if (p.kind != kPatternGridSparse) return true;
  const TileSpan rows = q_tile_span(blob, m), cols = k_tile_span(blob, n);
  const GridFormula& f = grid_formula(blob, p.formula);
  return grid_tile_touched(f, rows.begin, rows.end, cols.begin, cols.end,
                           [&](int dt, int dy) { return grid_half_width_table(blob, f, dt, dy); });
}

}  // namespace cm::desc
