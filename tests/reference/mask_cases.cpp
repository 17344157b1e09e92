// Random mask instances for the reference attention tests. Rows are generated as dense bit
// rows and converted to normalized intervals, so every kind obeys RowIntervals' invariants.
#include "mask_cases.h"

#include "descriptor/build.h"

#include <algorithm>

namespace cm::test {

namespace {

using BitRow = std::vector<uint8_t>;

int uniform(std::mt19937& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

void mark(BitRow& row, int64_t lo, int64_t hi) {
  const int64_t n = static_cast<int64_t>(row.size());
  for (int64_t c = std::max<int64_t>(lo, 0); c < std::min(hi, n); ++c) {
    row[static_cast<size_t>(c)] = 1;
  }
}

// Up to three random intervals, or nothing one time in five.
void mark_random(BitRow& row, std::mt19937& rng) {
  const int nk = static_cast<int>(row.size());
  if (nk == 0 || uniform(rng, 0, 4) == 0) return;
  for (int i = uniform(rng, 1, 3); i > 0; --i) {
    const int lo = uniform(rng, 0, nk - 1);
    mark(row, lo, lo + uniform(rng, 1, std::max(1, nk / 3)));
  }
}

RowIntervals to_intervals(const std::vector<BitRow>& bits, int32_t nk) {
  RowIntervals rows;
  rows.nq = static_cast<int32_t>(bits.size());
  rows.nk = nk;
  rows.offsets.push_back(0);
  for (const BitRow& row : bits) {
    for (int32_t c = 0; c < nk;) {
      if (!row[static_cast<size_t>(c)]) {
        ++c;
        continue;
      }
      const int32_t lo = c;
      while (c < nk && row[static_cast<size_t>(c)]) ++c;
      rows.intervals.push_back({lo, c});
    }
    rows.offsets.push_back(static_cast<int64_t>(rows.intervals.size()));
  }
  return rows;
}

// A 2D neighbourhood grid laid over the first rows*cols tokens of both axes. Wide grids put
// key tiles between the grid lines a query tile reaches, so sparse grid runs bridge empty
// tiles.
desc::GridFormula random_grid(int32_t nq, int32_t nk, std::mt19937& rng) {
  desc::GridFormula f{};
  f.cols = uniform(rng, 0, 1) == 0 ? uniform(rng, 3, 8) : uniform(rng, 40, 64);
  f.rows = std::max(1, std::min(nq, nk) / f.cols);
  f.strip = uniform(rng, 0, 1) == 0 ? f.cols : uniform(rng, 1, f.cols);  // row-major or strips
  f.frames = 1;
  f.q_lo = 0;
  f.q_hi = nq;
  f.shape = uniform(rng, 0, 1) == 0 ? desc::kShapeBox : desc::kShapeEllipse;
  f.rt = 1;
  f.ry = uniform(rng, 1, 3);
  f.rx = uniform(rng, 1, 3);
  return f;
}

InstanceRows make_grid_instance(int32_t nq, int32_t nk, std::mt19937& rng) {
  InstanceRows inst;
  if (std::min(nq, nk) < 3) {  // too short for a grid: plain random rows
    std::vector<BitRow> bits(static_cast<size_t>(nq), BitRow(static_cast<size_t>(nk)));
    for (BitRow& row : bits) mark_random(row, rng);
    inst.all = to_intervals(bits, nk);
    return inst;
  }
  inst.formulas.push_back(random_grid(nq, nk, rng));
  const desc::GridFormula& f = inst.formulas[0];
  std::vector<BitRow> all(static_cast<size_t>(nq), BitRow(static_cast<size_t>(nk)));
  std::vector<BitRow> residual = all;
  for (int32_t q = 0; q < nq; ++q) {
    BitRow grid(static_cast<size_t>(nk));
    bool on_grid = false;
    desc::for_each_grid_interval(f, q, 0, nk, [&](int lo, int hi) {
      mark(grid, lo, hi);
      on_grid = true;
    });
    BitRow extra(static_cast<size_t>(nk));
    if (uniform(rng, 0, 2) == 0) mark(extra, 0, uniform(rng, 1, 4));  // a few sink tokens
    for (size_t c = 0; c < grid.size(); ++c) {
      all[static_cast<size_t>(q)][c] = grid[c] | extra[c];
      residual[static_cast<size_t>(q)][c] = extra[c] & !grid[c];
    }
    inst.row_formula.push_back(on_grid ? 0 : -1);
  }
  inst.all = to_intervals(all, nk);
  inst.residual = to_intervals(residual, nk);
  return inst;
}

}  // namespace

std::string to_string(MaskKind kind) {
  switch (kind) {
    case MaskKind::kCausal:
      return "causal";
    case MaskKind::kWindow:
      return "window";
    case MaskKind::kRandom:
      return "random";
    case MaskKind::kMixed:
      return "mixed";
    case MaskKind::kGrid:
      return "grid";
  }
  return "unknown";
}

InstanceRows make_instance(MaskKind kind, int32_t nq, int32_t nk, std::mt19937& rng) {
  if (kind == MaskKind::kGrid) return make_grid_instance(nq, nk, rng);
  const int64_t shift = static_cast<int64_t>(nk) - nq;  // causal aligned bottom-right
  const int window = uniform(rng, 1, std::max(1, nk / 2));
  std::vector<BitRow> bits(static_cast<size_t>(nq), BitRow(static_cast<size_t>(nk)));
  for (int32_t q = 0; q < nq; ++q) {
    BitRow& row = bits[static_cast<size_t>(q)];
    switch (kind) {
      case MaskKind::kCausal:
        mark(row, 0, q + shift + 1);
        break;
      case MaskKind::kWindow:
        mark(row, q + shift + 1 - window, q + shift + 1);
        break;
      case MaskKind::kRandom:
        mark_random(row, rng);
        break;
      case MaskKind::kMixed:
        switch (uniform(rng, 0, 3)) {
          case 0:
            mark(row, 0, q + shift + 1);
            break;
          case 1:
            mark(row, 0, nk);
            break;
          case 2:
            mark_random(row, rng);
            break;
          default:
            break;  // fully masked
        }
        break;
      case MaskKind::kGrid:
        break;  // handled above
    }
  }
  InstanceRows inst;
  inst.all = to_intervals(bits, nk);
  return inst;
}

std::vector<uint8_t> dense_mask(const RowIntervals& rows) {
  std::vector<uint8_t> dense(static_cast<size_t>(rows.nq) * static_cast<size_t>(rows.nk));
  for (int32_t q = 0; q < rows.nq; ++q) {
    for (int64_t i = 0; i < rows.row_size(q); ++i) {
      const Interval& iv = rows.row(q)[i];
      for (int32_t c = iv.lo; c < iv.hi; ++c) {
        dense[static_cast<size_t>(q) * static_cast<size_t>(rows.nk) + static_cast<size_t>(c)] = 1;
      }
    }
  }
  return dense;
}

MaskSet make_mask_set(MaskKind kind, int32_t nq, int32_t nk, int32_t batch, int32_t heads,
                      const Tiling& tiling, std::mt19937& rng) {
  MaskSet set;
  const int32_t distinct = std::min(3, batch * heads);
  for (int32_t i = 0; i < distinct; ++i) {
    set.instances.push_back(make_instance(kind, nq, nk, rng));
    set.dense.push_back(dense_mask(set.instances.back().all));
  }
  for (int32_t bh = 0; bh < batch * heads; ++bh) {
    set.instance_map.push_back(uniform(rng, 0, distinct - 1));
  }
  PlanStats stats;
  set.blob = build_descriptor(set.instances, set.instance_map, batch, heads, tiling, stats);
  return set;
}

}  // namespace cm::test
