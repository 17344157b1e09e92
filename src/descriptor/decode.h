// Host-side readers of descriptor blobs: structural verification, the walk over the tiles a
// form lists, dense decoding of one (b, h) mask from either form, and a readable JSON dump.
#pragma once

#include <compilemask/descriptor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cm {

enum class DescriptorForm { kForward, kTransposed };

// The pattern for_each_listed_tile gives full tiles.
inline constexpr int64_t kFullTile = -1;

// Calls visit(m, n, pattern) for every tile that row t of the chosen form of an instance lists:
// its full tiles with pattern kFullTile, then its partial tiles with their pattern index,
// skipping the empty tiles a sparse grid run spans (they are not its members). Pre: the blob
// passed verify_descriptor.
template <class Visit>
void for_each_listed_tile(const void* blob, const desc::TileRow& row, int32_t t,
                          DescriptorForm form, Visit&& visit) {
  // Runs list tiles along the other axis; (m, n) orientation depends on the form.
  const auto tile = [&](int32_t other) {
    return form == DescriptorForm::kForward ? std::pair{t, other} : std::pair{other, t};
  };
  const desc::FullRun* full = desc::full_runs(blob, row);
  for (int i = 0; i < row.full_count; ++i) {
    for (int32_t o = full[i].first; o < full[i].first + full[i].count; ++o) {
      const auto [m, n] = tile(o);
      visit(m, n, kFullTile);
    }
  }
  const desc::PartialRun* partial = desc::partial_runs(blob, row);
  for (int i = 0; i < row.partial_count; ++i) {
    const desc::Pattern& p = desc::pattern(blob, partial[i].pattern);
    for (int32_t o = partial[i].first; o < partial[i].first + partial[i].count; ++o) {
      const auto [m, n] = tile(o);
      if (desc::partial_tile_nonempty(blob, p, m, n)) visit(m, n, int64_t{partial[i].pattern});
    }
  }
}

// Checks every structural rule of docs/descriptor.md: magic, version, sizes, aligned in-bounds
// sections, valid instance map, well-formed patterns and formulas, sorted disjoint in-range
// runs with valid pattern indices, LPT orders that are permutations, and forward and
// transposed forms that list the same tiles. Throws cm::Error naming the broken rule.
// Pre: blob is 8-byte aligned storage of `size` readable bytes.
void verify_descriptor(const void* blob, size_t size);

// Query rows [begin, end) of a mask; end < 0 stands for nq.
struct RowWindow {
  int32_t begin = 0;
  int32_t end = -1;
};

// Row-major visibility (1 = visible) of the rows of mask (b, h) in `rows` (all nq by default)
// against all nk keys, from the chosen form. Pre: the blob passed verify_descriptor. Throws
// cm::Error for (b, h) or a window outside the plan, or more than 2^26 elements.
std::vector<uint8_t> decode_dense(const void* blob, int32_t b, int32_t h,
                                  DescriptorForm form = DescriptorForm::kForward,
                                  RowWindow rows = {});

// The whole descriptor as indented JSON (header, instance map, formulas, patterns with their
// bands or bitmap rows, and both forms of every instance). Pre: the blob passed
// verify_descriptor.
std::string descriptor_to_json(const void* blob);

}  // namespace cm
