// Exact division of token indices by a tile size through one multiply and shift: tile-index
// divisions by a run-time tile size dominated classification as hardware divides.
#pragma once

#include <cstdint>

namespace cm::descriptor {

class TileDiv {
 public:
  // Pre: 1 <= d <= 65536. Granlund-Montgomery: with 2^(l-1) < d <= 2^l and
  // m = ceil(2^(31+l) / d), floor(k*m / 2^(31+l)) == floor(k / d) for all 0 <= k < 2^31, and
  // k*m < 2^64.
  explicit TileDiv(int32_t d) {
    int32_t l = 0;
    while ((int64_t{1} << l) < d) ++l;
    shift_ = 31 + l;
    multiplier_ =
        ((uint64_t{1} << shift_) + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d);
  }

  // Pre: 0 <= k < 2^31.
  int32_t operator()(int64_t k) const {
    return static_cast<int32_t>((static_cast<uint64_t>(k) * multiplier_) >> shift_);
  }

 private:
  uint64_t multiplier_ = 0;
  int32_t shift_ = 0;
};

}  // namespace cm::descriptor
