// Test fixtures for the descriptor tests (see mask_fixtures.h).
#include "mask_fixtures.h"

#include "grid_layout.h"

#include <compilemask/descriptor.h>

#include <algorithm>

namespace cm {

void PrintTo(const TileCounts& c, std::ostream* os) {
  *os << "{instances " << c.instances << ", full " << c.full_tiles << ", partial "
      << c.partial_tiles << ", empty " << c.empty_tiles << ", visible " << c.visible_pairs
      << ", computed " << c.computed_pairs << "}";
}

}  // namespace cm

namespace cm::testing {
namespace {

int32_t uniform(std::mt19937& rng, int32_t lo, int32_t hi) {  // inclusive
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

void add_shapes(std::mt19937& rng, Dense& d) {
  const int shapes = uniform(rng, 0, 5);
  for (int s = 0; s < shapes; ++s) {
    switch (uniform(rng, 0, 4)) {
      case 0: {  // diagonal band: offset - width < k - q <= offset
        const int32_t offset = uniform(rng, -d.nq, d.nk);
        const int32_t width = uniform(rng, 1, std::max(1, d.nk));
        for (int32_t q = 0; q < d.nq; ++q) {
          for (int32_t k = std::max(0, q + offset - width + 1); k <= q + offset && k < d.nk; ++k) {
            d.at(q, k) = 1;
          }
        }
        break;
      }
      case 1: {  // rectangle
        const int32_t q0 = uniform(rng, 0, d.nq - 1), q1 = uniform(rng, q0, d.nq - 1);
        const int32_t k0 = uniform(rng, 0, d.nk - 1), k1 = uniform(rng, k0, d.nk - 1);
        for (int32_t q = q0; q <= q1; ++q) std::fill(&d.at(q, k0), &d.at(q, k1) + 1, uint8_t{1});
        break;
      }
      case 2: {  // a few random intervals in random rows
        for (int i = uniform(rng, 1, 3 * d.nq); i > 0; --i) {
          const int32_t q = uniform(rng, 0, d.nq - 1);
          const int32_t lo = uniform(rng, 0, d.nk - 1),
                        hi = uniform(rng, lo, std::min(d.nk - 1, lo + 40));
          std::fill(&d.at(q, lo), &d.at(q, hi) + 1, uint8_t{1});
        }
        break;
      }
      case 3: {  // noise in a block: many intervals per row, forces bitmaps
        const int32_t q0 = uniform(rng, 0, d.nq - 1), q1 = std::min(d.nq, q0 + uniform(rng, 1, 64));
        const int32_t k0 = uniform(rng, 0, d.nk - 1),
                      k1 = std::min(d.nk, k0 + uniform(rng, 1, 128));
        for (int32_t q = q0; q < q1; ++q) {
          for (int32_t k = k0; k < k1; ++k) d.at(q, k) |= static_cast<uint8_t>(uniform(rng, 0, 1));
        }
        break;
      }
      default: {  // clear random rows to get empty rows
        for (int i = uniform(rng, 1, 8); i > 0; --i) {
          const int32_t q = uniform(rng, 0, d.nq - 1);
          std::fill(&d.at(q, 0), &d.at(q, 0) + d.nk, uint8_t{0});
        }
        break;
      }
    }
  }
}

desc::GridFormula random_formula(std::mt19937& rng, int32_t nk, int32_t q_lo, int32_t q_hi) {
  desc::GridFormula f{};
  f.frames = nk >= 2 && uniform(rng, 0, 2) == 0 ? 2 : 1;
  f.cols = uniform(rng, 1, std::max(1, std::min(40, nk / f.frames)));
  f.rows = uniform(rng, 1, std::max(1, nk / (f.frames * f.cols)));
  f.strip = uniform(rng, 0, 1) ? f.cols : uniform(rng, 1, f.cols);  // row-major or strips
  const int32_t extent = f.frames * f.rows * f.cols;
  f.start = uniform(rng, 0, nk - extent);
  f.center_start = uniform(rng, std::max(0, q_lo - extent / 2), q_hi);
  f.q_lo = q_lo;
  f.q_hi = q_hi;
  f.shape = uniform(rng, 0, 1);
  const int32_t min_r = f.shape == desc::kShapeEllipse ? 1 : 0;
  f.rt = f.frames == 1 ? 1 : uniform(rng, min_r, 2);
  f.ry = uniform(rng, min_r, 4);
  f.rx = uniform(rng, min_r, 6);
  return f;
}

}  // namespace

TileCounts dense_tile_counts(const Dense& d, const void* blob) {
  TileCounts c;
  c.instances = 1;
  const desc::Header& hd = desc::header(blob);
  for (int32_t m = 0; m < hd.num_q_tiles; ++m) {
    for (int32_t n = 0; n < hd.num_k_tiles; ++n) {
      const auto [q0, q1] = desc::q_tile_span(blob, m);
      const auto [k0, k1] = desc::k_tile_span(blob, n);
      int64_t seen = 0;
      for (int32_t q = q0; q < q1; ++q) {
        for (int32_t k = k0; k < k1; ++k) seen += d.at(q, k);
      }
      const int64_t area = int64_t{q1 - q0} * (k1 - k0);
      c.visible_pairs += seen;
      if (seen == 0) {
        ++c.empty_tiles;
        continue;
      }
      ++(seen == area ? c.full_tiles : c.partial_tiles);
      c.computed_pairs += area;
    }
  }
  return c;
}

RowIntervals rows_from_dense(const Dense& dense) {
  RowIntervals rows;
  rows.nq = dense.nq;
  rows.nk = dense.nk;
  rows.offsets.push_back(0);
  for (int32_t q = 0; q < dense.nq; ++q) {
    int32_t k = 0;
    while (k < dense.nk) {
      if (!dense.at(q, k)) {
        ++k;
        continue;
      }
      const int32_t lo = k;
      while (k < dense.nk && dense.at(q, k)) ++k;
      rows.intervals.push_back({lo, k});
    }
    rows.offsets.push_back(static_cast<int64_t>(rows.intervals.size()));
  }
  return rows;
}

bool formula_sees(const desc::GridFormula& f, int32_t q, int32_t k) {
  if (q < f.q_lo || q >= f.q_hi) return false;
  const int64_t extent = int64_t{f.rows} * f.cols * f.frames;
  const int64_t qr = int64_t{q} - f.center_start, kr = int64_t{k} - f.start;
  if (qr < 0 || qr >= extent || kr < 0 || kr >= extent) return false;
  const testing::GridPosition a = testing::walk_grid_cell(f.rows, f.cols, f.strip, qr);
  const testing::GridPosition b = testing::walk_grid_cell(f.rows, f.cols, f.strip, kr);
  const int64_t dt = a.t - b.t, dy = a.y - b.y, dx = a.x - b.x;
  if (f.shape == desc::kShapeBox) {
    return std::abs(dt) <= f.rt && std::abs(dy) <= f.ry && std::abs(dx) <= f.rx;
  }
  // dt²/rt² + dy²/ry² + dx²/rx² < 1, multiplied through by rt²·ry²·rx².
  const int64_t t2 = int64_t{f.rt} * f.rt, y2 = int64_t{f.ry} * f.ry, x2 = int64_t{f.rx} * f.rx;
  return dt * dt * y2 * x2 + dy * dy * t2 * x2 + dx * dx * t2 * y2 < t2 * y2 * x2;
}

RandomInstance random_instance(std::mt19937& rng, int32_t nq, int32_t nk, bool with_formulas) {
  Dense extra(nq, nk);
  add_shapes(rng, extra);
  RandomInstance out{InstanceRows{}, extra};
  if (!with_formulas) {
    out.rows.all = rows_from_dense(extra);
    return out;
  }
  // One or two formulas over consecutive query ranges.
  const int32_t split = uniform(rng, 0, nq);
  std::vector<std::pair<int32_t, int32_t>> ranges = {{uniform(rng, 0, split), split}};
  if (uniform(rng, 0, 1)) ranges.push_back({split, uniform(rng, split, nq)});
  for (const auto& [q_lo, q_hi] : ranges)
    out.rows.formulas.push_back(random_formula(rng, nk, q_lo, q_hi));

  const bool drop_some = uniform(rng, 0, 3) == 0;
  Dense residual = extra;
  out.rows.row_formula.assign(static_cast<size_t>(nq), -1);
  for (int32_t q = 0; q < nq; ++q) {
    for (size_t f = 0; f < out.rows.formulas.size(); ++f) {
      const desc::GridFormula& formula = out.rows.formulas[f];
      if (q < formula.q_lo || q >= formula.q_hi) continue;
      if (drop_some && uniform(rng, 0, 9) == 0) continue;  // row keeps -1: all == residual
      out.rows.row_formula[q] = static_cast<int32_t>(f);
      for (int32_t k = 0; k < nk; ++k) {
        if (!formula_sees(formula, q, k)) continue;
        out.expected.at(q, k) = 1;
        residual.at(q, k) = 0;
      }
    }
  }
  out.rows.all = rows_from_dense(out.expected);
  out.rows.residual = rows_from_dense(residual);
  return out;
}

}  // namespace cm::testing
