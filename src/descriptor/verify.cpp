// Structural verification of descriptor blobs (see decode.h). Every read is bounds-checked
// before it happens, so a corrupt blob yields a cm::Error, never a crash.
#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include "descriptor/decode.h"
#include "descriptor/half_widths.h"
#include "descriptor/input_checks.h"
#include "descriptor/pattern_encode.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace cm {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw Error("descriptor verification: " + message);
}

std::string str(int64_t v) {
  return std::to_string(v);
}

class Verifier {
 public:
  Verifier(const void* blob, size_t size) : blob_(blob), size_(size) {}

  void run() {
    check_header();
    check_instance_map();
    check_formulas();
    check_patterns();
    for (int32_t i = 0; i < hd().num_instances; ++i) check_instance(i);
  }

 private:
  // Tile (major, other) of one form with its pattern (kFull for full tiles).
  using Tile = std::tuple<int32_t, int32_t, uint32_t>;
  static constexpr uint32_t kFull = 0xFFFFFFFFu;

  const desc::Header& hd() const { return desc::header(blob_); }

  // `count` objects of `elem` bytes at `offset` must lie inside the blob, `align`-aligned.
  void require_array(uint64_t offset, uint64_t count, uint64_t elem, uint64_t align,
                     const std::string& what) const {
    if (offset % align != 0)
      fail(what + " offset " + str(int64_t(offset)) + " is not " + str(int64_t(align)) +
           "-byte aligned");
    if (offset > size_ || count * elem > size_ - offset) {
      fail(what + " [" + str(int64_t(offset)) + ", +" + str(int64_t(count * elem)) +
           ") runs past the end of the " + str(int64_t(size_)) + "-byte blob");
    }
  }

  void check_header() const {
    if (reinterpret_cast<uintptr_t>(blob_) % 8 != 0) fail("the blob must be 8-byte aligned");
    if (size_ < sizeof(desc::Header)) {
      fail("the blob is smaller than its " + str(int64_t{sizeof(desc::Header)}) + "-byte header");
    }
    const desc::Header& h = hd();
    if (h.magic != desc::kMagic) fail("bad magic (expected \"CMSK\")");
    if (h.version != desc::kVersion) {
      fail("version " + str(h.version) + " is not the supported version " + str(desc::kVersion));
    }
    if (h.header_bytes != sizeof(desc::Header)) {
      fail("header_bytes must be " + str(int64_t{sizeof(desc::Header)}));
    }
    if (h.total_bytes != size_) {
      fail("total_bytes " + str(int64_t(h.total_bytes)) + " differs from the blob size " +
           str(int64_t(size_)));
    }
    for (const auto& [name, tile, limit] : {std::tuple{"tile_m", h.tile_m, desc::kMaxTileM},
                                            std::tuple{"tile_n", h.tile_n, desc::kMaxTileN}}) {
      if (tile < 16 || tile > limit || tile % 16 != 0) {
        fail(std::string(name) + " = " + str(tile) + " must be a multiple of 16 in [16, " +
             str(limit) + "]");
      }
    }
    if (h.nq < 0 || h.nk < 0) fail("nq and nk must be >= 0");
    if (h.num_q_tiles < 0 || h.num_k_tiles < 0 || h.num_q_tiles > desc::kMaxTiles ||
        h.num_k_tiles > desc::kMaxTiles) {
      fail("num_q_tiles and num_k_tiles must be in [0, 65535]");
    }
    check_tile_starts(h.q_starts_offset, h.num_q_tiles, h.nq, h.tile_m, "query");
    check_tile_starts(h.k_starts_offset, h.num_k_tiles, h.nk, h.tile_n, "key");
    if (h.batch < 1 || h.heads < 1 || h.num_instances < 1) {
      fail("batch, heads and num_instances must be >= 1");
    }
    if (h.num_patterns < 0 || h.num_grid_formulas < 0) fail("negative table size");
    require_array(h.instance_map_offset, uint64_t(h.batch) * uint64_t(h.heads), 4, 16,
                  "instance map");
    require_array(h.instances_offset, uint64_t(h.num_instances), sizeof(desc::Instance), 16,
                  "instance table");
    require_array(h.patterns_offset, uint64_t(h.num_patterns), sizeof(desc::Pattern), 16,
                  "pattern table");
    require_array(h.grid_formulas_offset, uint64_t(h.num_grid_formulas), sizeof(desc::GridFormula),
                  16, "grid formula table");
  }

  void check_instance_map() const {
    const desc::Header& h = hd();
    const int32_t* map = desc::at<int32_t>(blob_, h.instance_map_offset);
    for (int64_t i = 0; i < int64_t{h.batch} * h.heads; ++i) {
      if (map[i] < 0 || map[i] >= h.num_instances) {
        fail("instance map entry " + str(i) + " = " + str(map[i]) + " is not an instance index");
      }
    }
  }

  void check_formulas() const {
    for (int32_t i = 0; i < hd().num_grid_formulas; ++i) {
      const desc::GridFormula& f = desc::grid_formula(blob_, i);
      const std::string name = "grid formula " + str(i);
      const std::string problem = descriptor::grid_formula_problem(f, hd().nq);
      if (!problem.empty()) fail(name + ": " + problem);
      check_half_widths(f, name);
    }
  }

  // The table must hold exactly the formula's half-widths: kernels trust it.
  void check_half_widths(const desc::GridFormula& f, const std::string& name) const {
    const std::vector<int16_t> want = descriptor::half_width_table(f);
    require_array(f.half_widths_offset, want.size(), sizeof(int16_t), 16,
                  name + " half-width table");
    const int16_t* have = desc::at<int16_t>(blob_, f.half_widths_offset);
    const int row = desc::grid_table_dy_max(f) + 1;
    for (size_t i = 0; i < want.size(); ++i) {
      if (have[i] != want[i]) {
        fail(name + ": half-width table entry (dt " + str(int64_t(i) / row) + ", dy " +
             str(int64_t(i) % row) + ") is " + str(have[i]) + ", the formula gives " +
             str(want[i]));
      }
    }
  }

  void check_patterns() const {
    const desc::Header& h = hd();
    for (int32_t i = 0; i < h.num_patterns; ++i) {
      const desc::Pattern& p = desc::pattern(blob_, static_cast<uint32_t>(i));
      const std::string name = "pattern " + str(i);
      if (p.kind == desc::kPatternBitmap) {
        if (p.formula != -1) fail(name + ": a bitmap pattern must have formula -1");
        require_array(p.data_offset, 1, descriptor::bitmap_bytes(h.tile_m, h.tile_n), 4,
                      name + " bitmap");
        check_empty_halves(p, name);
        continue;
      }
      if (p.kind == desc::kPatternRowRanges) {
        check_row_ranges(p, name);
        check_empty_halves(p, name);
        continue;
      }
      if (p.kind == desc::kPatternRowTable) {
        check_row_table(p, name);  // its empty halves depend on the tile: check_instance
        continue;
      }
      if (p.kind != desc::kPatternBands && !desc::is_grid_kind(p.kind)) {
        fail(name + ": unknown kind " + str(p.kind));
      }
      if (desc::is_grid_kind(p.kind) && (p.formula < 0 || p.formula >= h.num_grid_formulas)) {
        fail(name + ": grid formula index " + str(p.formula) + " is out of range");
      }
      if (p.kind == desc::kPatternGridSparse && p.count != 0) {
        fail(name + ": a sparse grid pattern must have no bands");
      }
      if (p.kind == desc::kPatternBands && p.formula != -1) {
        fail(name + ": a bands pattern must have formula -1");
      }
      require_array(p.data_offset, p.count, sizeof(desc::RowBand), 4, name + " bands");
      const desc::RowBand* bands = desc::at<desc::RowBand>(blob_, p.data_offset);
      for (int b = 0; b < p.count; ++b) {
        if (bands[b].row_first > bands[b].row_last || bands[b].row_last >= h.tile_m) {
          fail(name + " band " + str(b) + ": rows must satisfy row_first <= row_last < tile_m");
        }
      }
      check_empty_halves(p, name);
    }
  }

  // A tile-start table: count + 1 entries from 0 to length, each tile 1 to `size` tokens.
  void check_tile_starts(uint32_t offset, int32_t count, int32_t length, int32_t size,
                         const std::string& axis) const {
    require_array(offset, uint64_t(count) + 1, 4, 16, axis + " tile starts");
    const int32_t* starts = desc::at<int32_t>(blob_, offset);
    if (starts[0] != 0 || starts[count] != length) {
      fail(axis + " tile starts must run from 0 to " + str(length));
    }
    for (int32_t t = 0; t < count; ++t) {
      if (starts[t + 1] <= starts[t] || starts[t + 1] - starts[t] > size) {
        fail(axis + " tile " + str(t) + " must hold 1 to " + str(size) + " tokens, but spans [" +
             str(starts[t]) + ", " + str(starts[t + 1]) + ")");
      }
    }
  }

  // Every non-empty range must lie inside the tile: kernels index column tables by it.
  void check_row_ranges(const desc::Pattern& p, const std::string& name) const {
    const desc::Header& h = hd();
    if (p.formula != -1) fail(name + ": a row-ranges pattern must have formula -1");
    if (p.count == 0) fail(name + ": a row-ranges pattern must have at least one range per row");
    require_array(p.data_offset, uint64_t(h.tile_m) * p.count, sizeof(desc::RowRange), 2,
                  name + " row ranges");
    const desc::RowRange* ranges = desc::at<desc::RowRange>(blob_, p.data_offset);
    for (int32_t r = 0; r < h.tile_m; ++r) {
      for (int k = 0; k < p.count; ++k) {
        int lo, hi;
        if (desc::row_range(ranges, p.count, r, k, lo, hi) && hi > h.tile_n) {
          fail(name + " row " + str(r) + " range " + str(k) + ": columns [" + str(lo) + ", " +
               str(hi) + ") reach past tile_n " + str(h.tile_n));
        }
      }
    }
  }

  // Kernels read a row's `count` intervals with 8-byte loads and subtract the tile's first
  // key, which bounds in [0, nk] keep from overflowing.
  void check_row_table(const desc::Pattern& p, const std::string& name) const {
    if (p.formula != -1) fail(name + ": a row-table pattern must have formula -1");
    if (p.count == 0) fail(name + ": a row-table pattern must have at least one interval per row");
    if (p.empty_halves > 3) fail(name + ": empty_halves has bits other than 0 and 1");
    const uint64_t entries = uint64_t(hd().tile_m) * p.count;
    require_array(p.data_offset, entries, sizeof(desc::KeyInterval), alignof(desc::KeyInterval),
                  name + " row table");
    const desc::KeyInterval* table = desc::at<desc::KeyInterval>(blob_, p.data_offset);
    for (uint64_t i = 0; i < entries; ++i) {
      const desc::KeyInterval& e = table[i];
      if (e.lo < 0 || e.hi < 0 || e.lo > hd().nk || e.hi > hd().nk) {
        fail(name + " row " + str(int64_t(i / p.count)) + " interval " + str(int64_t(i % p.count)) +
             ": [" + str(e.lo) + ", " + str(e.hi) + ") must lie in [0, nk = " + str(hd().nk) + "]");
      }
    }
  }

  // A kernel skips the halves that empty_halves marks, so a marked half must see nothing: in
  // every tile for the kinds whose rows do not depend on the tile (k0 0, width tile_n), in the
  // tile at key k0 of `width` keys for a row table.
  void check_empty_halves(const desc::Pattern& p, const std::string& name, int32_t k0 = 0,
                          int32_t width = desc::kMaxTileN) const {
    if (p.empty_halves > 3) fail(name + ": empty_halves has bits other than 0 and 1");
    if (desc::is_grid_kind(p.kind) && p.empty_halves != 0) {
      fail(name + ": a grid pattern must have empty_halves 0 (its rows depend on the tile)");
    }
    const int32_t tile_m = hd().tile_m;
    for (int half = 0; half < 2; ++half) {
      if (!desc::half_is_empty(p, half)) continue;
      const int32_t end = half == 0 ? tile_m / 2 : tile_m;
      for (int32_t r = half * (tile_m / 2); r < end; ++r) {
        desc::for_each_pattern_interval(blob_, p, 0, k0, r, [&](int lo, int) {
          if (lo < width) {
            fail(name + ": empty_halves marks half " + str(half) + " empty, but row " + str(r) +
                 " sees keys");
          }
        });
      }
    }
  }

  // Checks one form's TileRows and runs, and returns its tiles as (m, n, pattern) in (m, n)
  // order, without a sort: a forward row's full and partial tiles are two sorted sequences to
  // merge, and the transposed form's tiles, taken key tile by key tile, are bucketed by m.
  std::vector<Tile> check_form(uint32_t rows_offset, uint32_t order_offset, int32_t num_major,
                               int32_t num_other, bool forward, const std::string& name) const {
    require_array(rows_offset, uint64_t(num_major), sizeof(desc::TileRow), 4, name + " tile rows");
    require_array(order_offset, uint64_t(num_major), 2, 2, name + " order");
    const desc::TileRow* rows = desc::at<desc::TileRow>(blob_, rows_offset);
    const uint16_t* order = desc::at<uint16_t>(blob_, order_offset);
    std::vector<uint8_t> seen(static_cast<size_t>(num_major), 0);
    for (int32_t i = 0; i < num_major; ++i) {
      if (order[i] >= num_major || seen[order[i]])
        fail(name + " order is not a permutation of the tiles");
      seen[order[i]] = 1;
      if (i > 0 && rows[order[i - 1]].cost < rows[order[i]].cost) {
        fail(name + " order is not by descending cost");
      }
    }
    std::vector<Tile> tiles;
    std::vector<std::pair<int32_t, int32_t>> spans;
    for (int32_t t = 0; t < num_major; ++t) {
      const size_t row_begin = tiles.size();
      const desc::TileRow& row = rows[t];
      const std::string where = name + " tile " + str(t);
      if (!std::isfinite(row.cost) || row.cost < 0) fail(where + ": cost must be finite and >= 0");
      require_array(row.full_offset, row.full_count, sizeof(desc::FullRun), 4,
                    where + " full runs");
      require_array(row.partial_offset, row.partial_count, sizeof(desc::PartialRun), 4,
                    where + " partial runs");
      spans.clear();
      auto add_run = [&](int32_t first, int32_t count, uint32_t pattern, const char* kind) {
        if (count < 1 || first + count > num_other) {
          fail(where + ": " + kind + " run [" + str(first) + ", +" + str(count) +
               ") is empty or out of range");
        }
        spans.emplace_back(first, count);
        const bool sparse =
            pattern != kFull && desc::pattern(blob_, pattern).kind == desc::kPatternGridSparse;
        int32_t gap = 0;  // consecutive empty members so far
        for (int32_t o = first; o < first + count; ++o) {
          const int32_t m = forward ? t : o, n = forward ? o : t;
          if (sparse && !desc::partial_tile_nonempty(blob_, desc::pattern(blob_, pattern), m, n)) {
            if (o == first || o == first + count - 1 || ++gap > desc::kMaxSparseGap) {
              fail(where + ": sparse grid run [" + str(first) + ", +" + str(count) +
                   ") must start and end with non-empty tiles and skip at most " +
                   str(desc::kMaxSparseGap) + " in a row");
            }
            continue;
          }
          gap = 0;
          tiles.emplace_back(m, n, pattern);
        }
      };
      const desc::FullRun* full = desc::full_runs(blob_, row);
      for (int i = 0; i < row.full_count; ++i) {
        if (i > 0 && full[i].first < full[i - 1].first) fail(where + ": full runs are not sorted");
        add_run(full[i].first, full[i].count, kFull, "full");
      }
      const size_t partial_begin = tiles.size();
      const desc::PartialRun* partial = desc::partial_runs(blob_, row);
      for (int i = 0; i < row.partial_count; ++i) {
        if (i > 0 && partial[i].first < partial[i - 1].first)
          fail(where + ": partial runs are not sorted");
        if (partial[i].pattern >= uint32_t(hd().num_patterns)) {
          fail(where + ": partial run pattern " + str(partial[i].pattern) + " is out of range");
        }
        add_run(partial[i].first, partial[i].count, partial[i].pattern, "partial");
      }
      std::sort(spans.begin(), spans.end());
      for (size_t i = 1; i < spans.size(); ++i) {
        if (spans[i - 1].first + spans[i - 1].second > spans[i].first)
          fail(where + ": runs overlap");
      }
      if (forward) {
        std::inplace_merge(tiles.begin() + static_cast<std::ptrdiff_t>(row_begin),
                           tiles.begin() + static_cast<std::ptrdiff_t>(partial_begin), tiles.end());
      }
    }
    return forward ? tiles : by_query_tile(tiles, num_other);
  }

  // The transposed form's tiles, listed by key tile, in (m, n) order: a stable bucketing by m.
  static std::vector<Tile> by_query_tile(const std::vector<Tile>& tiles, int32_t num_q_tiles) {
    std::vector<size_t> start(static_cast<size_t>(num_q_tiles) + 1, 0);
    for (const Tile& tile : tiles) ++start[static_cast<size_t>(std::get<0>(tile)) + 1];
    for (size_t m = 1; m < start.size(); ++m) start[m] += start[m - 1];
    std::vector<Tile> sorted(tiles.size());
    for (const Tile& tile : tiles) sorted[start[static_cast<size_t>(std::get<0>(tile))]++] = tile;
    return sorted;
  }

  void check_instance(int32_t index) const {
    const desc::Header& h = hd();
    const desc::Instance& inst = desc::instance(blob_, index);
    const std::string name = "instance " + str(index);
    const auto fwd = check_form(inst.q_tiles_offset, inst.fwd_order_offset, h.num_q_tiles,
                                h.num_k_tiles, true, name + " forward");
    const auto bwd = check_form(inst.k_tiles_offset, inst.bwd_order_offset, h.num_k_tiles,
                                h.num_q_tiles, false, name + " transposed");
    if (fwd != bwd) fail(name + ": the forward and transposed forms list different tiles");
    uint64_t area = 0;
    for (const auto& [m, n, pattern] : fwd) {
      const desc::TileSpan keys = desc::k_tile_span(blob_, n);
      area += uint64_t(desc::q_tile_span(blob_, m).size()) * uint64_t(keys.size());
      if (pattern != kFull && desc::pattern(blob_, pattern).kind == desc::kPatternRowTable) {
        check_empty_halves(desc::pattern(blob_, pattern),
                           name + " tile (" + str(m) + ", " + str(n) + ") pattern " + str(pattern),
                           keys.begin, keys.size());
      }
    }
    if (inst.visible_pairs > area)
      fail(name + ": visible_pairs exceeds the area of its visible tiles");
  }

  const void* blob_;
  size_t size_;
};

}  // namespace

void verify_descriptor(const void* blob, size_t size) {
  Verifier(blob, size).run();
}

}  // namespace cm
