// A naive float64 dense attention, forward and backward, written from the textbook formulas
// over a dense boolean mask. The independent oracle that the descriptor-driven reference is
// checked against; it shares no code with src/reference.
#pragma once

#include <compilemask/reference.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace cm::test {

struct DenseResult {
  std::vector<double> out, lse, dq, dk, dv;  // layouts as in reference.h
  std::vector<double> dsinks;                // [heads_q], with sinks
};

// mask_of(b, h) returns the row-major nq x nk mask (1 = visible) of query head h of batch b.
// softcap > 0 caps the logits at softcap * tanh(scale * q·k / softcap). sinks, if not empty,
// holds one logit per query head: a key that every row sees, of value 0 (-inf: none).
// alibi_slopes, if not empty, holds one slope per query head: logit (i, j) gains
// -slope * |i + nk - nq - j|. Fully masked rows give out 0, lse -inf (the sink) and no gradient
// to q, k and v.
DenseResult dense_attention(
    const AttentionShape& shape, double scale, double softcap, const std::vector<float>& sinks,
    const std::vector<float>& alibi_slopes,
    const std::function<const std::vector<uint8_t>&(int32_t b, int32_t h)>& mask_of,
    const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
    const std::vector<float>& dout);

}  // namespace cm::test
