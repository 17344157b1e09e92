// Dense decoding of a descriptor, from the forward or the transposed form (see decode.h).
#include "descriptor/decode.h"

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include <algorithm>

namespace cm {
namespace {

constexpr int64_t kMaxDenseElements = int64_t{1} << 26;

// Writes the visible pairs of tile (m, n) into the dense nq x nk mask.
class TilePainter {
 public:
  TilePainter(const void* blob, std::vector<uint8_t>& dense)
      : blob_(blob), hd_(desc::header(blob)), dense_(dense) {}

  void full(int32_t m, int32_t n) {
    const auto [q0, q1] = desc::q_tile_span(blob_, m);
    const auto [k0, k1] = desc::k_tile_span(blob_, n);
    for (int32_t q = q0; q < q1; ++q) {
      std::fill(cell(q, k0), cell(q, k1), uint8_t{1});
    }
  }

  void partial(int32_t m, int32_t n, uint32_t pattern_index) {
    const auto [q0, q1] = desc::q_tile_span(blob_, m);
    const desc::TileSpan keys = desc::k_tile_span(blob_, n);  // the lambda reads it
    const int32_t k0 = keys.begin, k1 = keys.end;
    const desc::Pattern& p = desc::pattern(blob_, pattern_index);
    for (int32_t q = q0; q < q1; ++q) {
      desc::for_each_pattern_interval(blob_, p, q0, k0, q - q0, [&](int lo, int hi) {
        const int32_t a = std::min(k1, k0 + lo), z = std::min(k1, k0 + hi);
        if (a < z) std::fill(cell(q, a), cell(q, z), uint8_t{1});
      });
    }
  }

 private:
  uint8_t* cell(int32_t q, int32_t k) {
    return dense_.data() + static_cast<size_t>(q) * static_cast<size_t>(hd_.nk) +
           static_cast<size_t>(k);
  }

  const void* blob_;
  const desc::Header& hd_;
  std::vector<uint8_t>& dense_;
};

}  // namespace

std::vector<uint8_t> decode_dense(const void* blob, int32_t b, int32_t h, DescriptorForm form) {
  const desc::Header& hd = desc::header(blob);
  if (b < 0 || b >= hd.batch || h < 0 || h >= hd.heads) {
    throw Error("descriptor: (b, h) = (" + std::to_string(b) + ", " + std::to_string(h) +
                ") is outside the " + std::to_string(hd.batch) + " x " + std::to_string(hd.heads) +
                " instance map");
  }
  const int64_t elements = int64_t{hd.nq} * hd.nk;
  if (elements > kMaxDenseElements) {
    throw Error("descriptor: dense decoding of " + std::to_string(hd.nq) + " x " +
                std::to_string(hd.nk) + " exceeds the 2^26-element limit");
  }
  std::vector<uint8_t> dense(static_cast<size_t>(elements), 0);
  TilePainter painter(blob, dense);
  const desc::Instance& inst = desc::instance(blob, desc::instance_of(blob, b, h));
  const bool forward = form == DescriptorForm::kForward;
  const int32_t num_major = forward ? hd.num_q_tiles : hd.num_k_tiles;
  for (int32_t t = 0; t < num_major; ++t) {
    const desc::TileRow& row = forward ? desc::q_tile(blob, inst, t) : desc::k_tile(blob, inst, t);
    // Runs list tiles along the other axis; (m, n) orientation depends on the form.
    auto tile = [&](int32_t other) { return forward ? std::pair{t, other} : std::pair{other, t}; };
    const desc::FullRun* full = desc::full_runs(blob, row);
    for (int i = 0; i < row.full_count; ++i) {
      for (int32_t o = full[i].first; o < full[i].first + full[i].count; ++o) {
        const auto [m, n] = tile(o);
        painter.full(m, n);
      }
    }
    const desc::PartialRun* partial = desc::partial_runs(blob, row);
    for (int i = 0; i < row.partial_count; ++i) {
      const desc::Pattern& p = desc::pattern(blob, partial[i].pattern);
      for (int32_t o = partial[i].first; o < partial[i].first + partial[i].count; ++o) {
        const auto [m, n] = tile(o);
        if (desc::partial_tile_nonempty(blob, p, m, n)) painter.partial(m, n, partial[i].pattern);
      }
    }
  }
  return dense;
}

}  // namespace cm
