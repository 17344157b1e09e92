// Host-side readers of descriptor blobs: structural verification, dense decoding of one (b, h)
// mask from either form, and a readable JSON dump.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cm {

enum class DescriptorForm { kForward, kTransposed };

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
