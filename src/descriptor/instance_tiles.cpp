// Per-instance tile encoding: classification, pattern choice and deduplication (see
// instance_tiles.h).
#include "descriptor/instance_tiles.h"

#include "descriptor/pattern_encode.h"
#include "descriptor/piece_gather.h"
#include "descriptor/tile_classify.h"

#include <algorithm>

namespace cm::descriptor {
namespace {

// True if query row q lies in the formula's row range with its centre on the grid, i.e. the
// formula contributes keys to q.
bool formula_reaches(const desc::GridFormula& f, int32_t q) {
  const int64_t extent = int64_t{f.frames} * f.rows * f.cols;
  const int64_t rel = int64_t{q} - f.center_start;
  return q >= f.q_lo && q < f.q_hi && rel >= 0 && rel < extent;
}

// The instance-local formula a kernel may evaluate for every row of [q0, q1), or -1. Valid
// when some row carries formula f, every row the formula reaches carries f, and every other
// row carries -1 (so residual == all there and the formula adds nothing).
int32_t tile_row_formula(const InstanceRows& instance, int32_t q0, int32_t q1) {
  if (instance.formulas.empty()) return -1;
  const auto first =
      std::find_if(instance.row_formula.begin() + q0, instance.row_formula.begin() + q1,
                   [](int32_t f) { return f >= 0; });
  if (first == instance.row_formula.begin() + q1) return -1;
  const int32_t f = *first;
  const desc::GridFormula& formula = instance.formulas[static_cast<size_t>(f)];
  for (int32_t q = q0; q < q1; ++q) {
    const int32_t carried = instance.row_formula[q];
    if (carried == f) continue;
    if (carried != -1 || formula_reaches(formula, q)) return -1;
  }
  return f;
}

// True if the formula's key grid intersects the key tile [k0, k0 + tile_n).
bool formula_touches(const desc::GridFormula& f, int32_t k0, int32_t tile_n) {
  const int64_t end = f.start + int64_t{f.frames} * f.rows * f.cols;
  return f.start < int64_t{k0} + tile_n && end > k0;
}

template <class T>
std::span<const unsigned char> as_bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(T)};
}

// Encodes one partial tile's pieces and returns its pattern index.
class TileEncoder {
 public:
  TileEncoder(const Tiling& tiling, PatternTable& table) : tiling_(tiling), table_(table) {}

  // Bands, or a bitmap when the bands would take more bytes.
  uint32_t plain(std::span<const RowPiece> pieces) {
    fit_bands(pieces, bands_);
    if (bands_.size() * sizeof(desc::RowBand) > bitmap_bytes(tiling_.m, tiling_.n)) {
      fill_bitmap(pieces, tiling_.m, tiling_.n, bitmap_);
      return table_.add(desc::kPatternBitmap, -1, 0, as_bytes_of(bitmap_));
    }
    return table_.add(desc::kPatternBands, -1, static_cast<uint16_t>(bands_.size()),
                      as_bytes_of(bands_));
  }

  // A grid formula plus the residual pieces as bands.
  uint32_t grid(std::span<const RowPiece> residual, int32_t formula) {
    fit_bands(residual, bands_);
    return table_.add(desc::kPatternGrid, formula, static_cast<uint16_t>(bands_.size()),
                      as_bytes_of(bands_));
  }

 private:
  const Tiling& tiling_;
  PatternTable& table_;
  std::vector<desc::RowBand> bands_;
  std::vector<uint32_t> bitmap_;
};

int64_t count_visible(const RowIntervals& rows) {
  int64_t total = 0;
  for (const Interval& iv : rows.intervals) total += iv.hi - iv.lo;
  return total;
}

}  // namespace

EncodedInstance encode_instance(const InstanceRows& instance, const Tiling& tiling,
                                PatternTable& table) {
  const RowIntervals& all = instance.all;
  const int32_t nq = all.nq, nk = all.nk;
  const int32_t num_q_tiles = (nq + tiling.m - 1) / tiling.m;

  std::vector<int32_t> global_formula(instance.formulas.size(), -1);
  EncodedInstance out;
  out.visible_pairs = count_visible(all);
  out.forward.start.reserve(static_cast<size_t>(num_q_tiles) + 1);
  out.forward.start.push_back(0);

  TileRowClassifier classifier(nk, tiling.n);
  PieceGatherer gatherer(tiling.n);
  TileEncoder encoder(tiling, table);
  std::vector<int32_t> full, partial;
  std::vector<uint32_t> partial_pattern;

  for (int32_t m = 0; m < num_q_tiles; ++m) {
    const int32_t q0 = m * tiling.m;
    const int32_t q1 = std::min(nq, q0 + tiling.m);
    classifier.classify(all, q0, q1, full, partial);

    partial_pattern.resize(partial.size());
    const int32_t f = partial.empty() ? -1 : tile_row_formula(instance, q0, q1);
    gatherer.gather(f >= 0 ? instance.residual : all, q0, q1, partial);
    if (f >= 0 && global_formula[f] < 0)
      global_formula[f] = table.add_formula(instance.formulas[f]);
    for (size_t i = 0; i < partial.size(); ++i) {
      const bool use_grid =
          f >= 0 && formula_touches(instance.formulas[f], partial[i] * tiling.n, tiling.n);
      partial_pattern[i] = use_grid ? encoder.grid(gatherer.pieces(i), global_formula[f])
                                    : encoder.plain(gatherer.pieces(i));
    }

    // Merge the two sorted lists into this tile row's entries.
    size_t a = 0, b = 0;
    while (a < full.size() || b < partial.size()) {
      if (b == partial.size() || (a < full.size() && full[a] < partial[b])) {
        out.forward.entries.push_back({full[a++], kFullTile});
      } else {
        out.forward.entries.push_back({partial[b], partial_pattern[b]});
        ++b;
      }
    }
    out.forward.start.push_back(static_cast<int32_t>(out.forward.entries.size()));

    out.full_tiles += static_cast<int64_t>(full.size());
    out.partial_tiles += static_cast<int64_t>(partial.size());
    for (const auto* list : {&full, &partial}) {
      for (int32_t n : *list) {
        const int32_t width = std::min(nk, (n + 1) * tiling.n) - n * tiling.n;
        out.computed_pairs += int64_t{q1 - q0} * width;
      }
    }
  }
  return out;
}

}  // namespace cm::descriptor
