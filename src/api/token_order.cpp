// cm::strip_order: the strip layout of docs/language.md as a permutation (token_order.h).
#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>
#include <compilemask/token_order.h>

#include <algorithm>
#include <numeric>
#include <string>

namespace cm {
namespace {

constexpr int64_t kMaxTokens = int64_t{1} << 31;

void require_at_least(const char* name, int64_t value, int64_t least) {
  if (value < least) {
    throw Error(std::string("strip_order: ") + name + " must be >= " + std::to_string(least) +
                ", got " + std::to_string(value));
  }
}

}  // namespace

std::vector<int64_t> strip_order(const StripGrid& grid, int64_t total) {
  require_at_least("start", grid.start, 0);
  require_at_least("frames", grid.frames, 1);
  require_at_least("rows", grid.rows, 1);
  require_at_least("cols", grid.cols, 1);
  require_at_least("strip", grid.strip, 1);
  if (total >= kMaxTokens) {
    throw Error("strip_order: total must be below 2^31 tokens, got " + std::to_string(total));
  }
  // Each factor is at least 1 and total below 2^31, so checking the product factor by factor
  // keeps it from overflowing.
  const int64_t room = total - grid.start;
  if (grid.frames > room || grid.rows > room || grid.cols > room ||
      grid.frames * grid.rows > room || grid.frames * grid.rows * grid.cols > room) {
    throw Error("strip_order: the grid of " + std::to_string(grid.frames) + " x " +
                std::to_string(grid.rows) + " x " + std::to_string(grid.cols) +
                " tokens from token " + std::to_string(grid.start) + " does not fit in " +
                std::to_string(total) + " tokens");
  }
  desc::GridFormula layout{};  // only the extent and the strip width place tokens
  layout.frames = static_cast<int32_t>(grid.frames);
  layout.rows = static_cast<int32_t>(grid.rows);
  layout.cols = static_cast<int32_t>(grid.cols);
  layout.strip = static_cast<int32_t>(std::min(grid.strip, grid.cols));
  std::vector<int64_t> order(static_cast<size_t>(total));
  std::iota(order.begin(), order.end(), int64_t{0});
  int64_t row_major = grid.start;
  for (int t = 0; t < layout.frames; ++t) {
    for (int y = 0; y < layout.rows; ++y) {
      for (int x = 0; x < layout.cols; ++x) {
        order[static_cast<size_t>(grid.start + desc::grid_offset(layout, {t, y, x}))] = row_major++;
      }
    }
  }
  return order;
}

}  // namespace cm
