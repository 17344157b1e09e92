// Dense decoding of a descriptor, from the forward or the transposed form (see decode.h).
#include "descriptor/decode.h"

#include "descriptor/input_checks.h"

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include <algorithm>

namespace cm {
namespace {

// Writes the visible pairs of tile (m, n) that lie in the row window [q_begin, q_end) into
// the dense (q_end - q_begin) x nk mask.
class TilePainter {
 public:
  TilePainter(const void* blob, int32_t q_begin, int32_t q_end, std::vector<uint8_t>& dense)
      : blob_(blob), nk_(desc::header(blob).nk), q_begin_(q_begin), q_end_(q_end), dense_(dense) {}

  void full(int32_t m, int32_t n) {
    const auto [q0, q1] = window(m);
    const auto [k0, k1] = desc::k_tile_span(blob_, n);
    for (int32_t q = q0; q < q1; ++q) {
      std::fill(cell(q, k0), cell(q, k1), uint8_t{1});
    }
  }

  void partial(int32_t m, int32_t n, uint32_t pattern_index) {
    const int32_t tile_q0 = desc::q_tile_span(blob_, m).begin;
    const auto [q0, q1] = window(m);
    const desc::TileSpan keys = desc::k_tile_span(blob_, n);  // the lambda reads it
    const int32_t k0 = keys.begin, k1 = keys.end;
    const desc::Pattern& p = desc::pattern(blob_, pattern_index);
    for (int32_t q = q0; q < q1; ++q) {
      desc::for_each_pattern_interval(blob_, p, tile_q0, k0, q - tile_q0, [&](int lo, int hi) {
        const int32_t a = std::min(k1, k0 + lo), z = std::min(k1, k0 + hi);
        if (a < z) std::fill(cell(q, a), cell(q, z), uint8_t{1});
      });
    }
  }

  // Whether query tile m has rows in the window.
  bool overlaps(int32_t m) const {
    const auto [q0, q1] = window(m);
    return q0 < q1;
  }

 private:
  // Query tile m's rows, clipped to the window.
  desc::TileSpan window(int32_t m) const {
    const desc::TileSpan rows = desc::q_tile_span(blob_, m);
    return {std::max(rows.begin, q_begin_), std::min(rows.end, q_end_)};
  }

  uint8_t* cell(int32_t q, int32_t k) {
    return dense_.data() + static_cast<size_t>(q - q_begin_) * static_cast<size_t>(nk_) +
           static_cast<size_t>(k);
  }

  const void* blob_;
  int32_t nk_, q_begin_, q_end_;
  std::vector<uint8_t>& dense_;
};

}  // namespace

std::vector<uint8_t> decode_dense(const void* blob, int32_t b, int32_t h, DescriptorForm form,
                                  RowWindow rows) {
  const desc::Header& hd = desc::header(blob);
  descriptor::check_mask_index("descriptor", b, h, hd.batch, hd.heads);
  if (rows.end < 0) rows.end = hd.nq;
  if (rows.begin < 0 || rows.begin > rows.end || rows.end > hd.nq) {
    throw Error("descriptor: rows [" + std::to_string(rows.begin) + ", " +
                std::to_string(rows.end) + ") are not a range inside [0, " + std::to_string(hd.nq) +
                ")");
  }
  const int64_t elements = int64_t{rows.end - rows.begin} * hd.nk;
  if (elements > Plan::kMaxDenseElements) {
    throw Error("descriptor: dense decoding of " + std::to_string(rows.end - rows.begin) + " x " +
                std::to_string(hd.nk) +
                " exceeds the 2^26-element limit (decode fewer rows at a time)");
  }
  std::vector<uint8_t> dense(static_cast<size_t>(elements), 0);
  TilePainter painter(blob, rows.begin, rows.end, dense);
  const desc::Instance& inst = desc::mask_of(blob, b, h);
  const bool forward = form == DescriptorForm::kForward;
  const int32_t num_major = forward ? hd.num_q_tiles : hd.num_k_tiles;
  for (int32_t t = 0; t < num_major; ++t) {
    if (forward && !painter.overlaps(t)) continue;
    const desc::TileRow& row = forward ? desc::q_tile(blob, inst, t) : desc::k_tile(blob, inst, t);
    for_each_listed_tile(blob, row, t, form, [&](int32_t m, int32_t n, int64_t pattern) {
      if (pattern == kFullTile) {
        painter.full(m, n);
      } else if (painter.overlaps(m)) {
        painter.partial(m, n, static_cast<uint32_t>(pattern));
      }
    });
  }
  return dense;
}

}  // namespace cm
