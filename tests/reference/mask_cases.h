// Random mask instances for the reference attention tests: per-row visible intervals of several
// shapes (causal, window, random, mixed, grid neighbourhoods), their dense form, and the
// descriptor built from them.
#pragma once

#include <compilemask/compilemask.h>

#include "specialize/row_intervals.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cm::test {

enum class MaskKind { kCausal, kWindow, kRandom, kMixed, kGrid };

std::string to_string(MaskKind kind);

// A random instance of `kind` with nq query rows and nk keys. Every kind leaves some rows fully
// masked when it can (causal with nq > nk, random and mixed always may).
InstanceRows make_instance(MaskKind kind, int32_t nq, int32_t nk, std::mt19937& rng);

// Row-major nq x nk visibility (1 = visible) of `rows`.
std::vector<uint8_t> dense_mask(const RowIntervals& rows);

// Several distinct instances of one kind spread over a (batch, heads) grid, and the descriptor.
struct MaskSet {
  std::vector<InstanceRows> instances;
  std::vector<int32_t> instance_map;        // batch * heads entries
  std::vector<std::vector<uint8_t>> dense;  // dense mask of each instance
  std::vector<uint64_t> blob;

  const std::vector<uint8_t>& dense_of(int32_t b, int32_t h, int32_t heads) const {
    return dense[static_cast<size_t>(instance_map[static_cast<size_t>(b * heads + h)])];
  }
};

MaskSet make_mask_set(MaskKind kind, int32_t nq, int32_t nk, int32_t batch, int32_t heads,
                      const Tiling& tiling, std::mt19937& rng);

}  // namespace cm::test
