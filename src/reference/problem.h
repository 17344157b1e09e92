// The checked description of one reference attention call: shape, descriptor geometry and
// tensor strides, shared by the forward and backward passes.
#pragma once

#include <compilemask/descriptor.h>
#include <compilemask/reference.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace cm::reference {

struct Problem {
  const void* blob = nullptr;
  AttentionShape shape;
  double scale = 0;                     // resolved softmax scale, never 0
  double softcap = 0;                   // logit cap; 0 means none
  const float* sinks = nullptr;         // per query head, checked: finite or -inf; null means none
  const float* alibi_slopes = nullptr;  // per query head, checked: finite; null means none
  int32_t group = 1;                    // query heads per kv head
  int32_t tile_n = 0;  // the widest key tile (key tiles restart at block boundaries)
  int32_t num_q_tiles = 0, num_k_tiles = 0;

  // The logit of query row i of head h against key j, from their dot product, and its slope:
  // the factor that turns a gradient by the logit into one by scale * q·k. scale * q·k and 1, or
  // with the cap c, c tanh(scale q·k / c) and 1 - tanh²; plus the ALiBi bias, whose slope by
  // q·k is 0.
  template <class Acc>
  struct Logit {
    Acc value, slope;
  };
  template <class Acc>
  Logit<Acc> logit(Acc dot, int h, int i, int j) const {
    const Acc scaled = static_cast<Acc>(scale) * dot;
    Logit<Acc> out{scaled, Acc{1}};
    if (softcap != 0) {
      const Acc t = std::tanh(scaled / static_cast<Acc>(softcap));
      out = {static_cast<Acc>(softcap) * t, Acc{1} - t * t};
    }
    if (alibi_slopes != nullptr) {
      const auto distance = std::abs(int64_t{i} + shape.nk - shape.nq - j);
      out.value -= static_cast<Acc>(alibi_slopes[h]) * static_cast<Acc>(distance);
    }
    return out;
  }

  // The sink logit of query head h; -inf for none.
  double sink(int h) const {
    return sinks != nullptr ? double{sinks[h]} : -std::numeric_limits<double>::infinity();
  }

  // Offsets of row 0 of a (b, h) slice of q and dq, of out and dout, of k and dk (kv head hkv),
  // of v and dv, and of the LSE. shape.head_dim_v is resolved (never 0).
  int64_t q_offset(int b, int h) const {
    return slice(b, shape.heads_q, h, shape.nq, shape.head_dim);
  }
  int64_t out_offset(int b, int h) const {
    return slice(b, shape.heads_q, h, shape.nq, shape.head_dim_v);
  }
  int64_t k_offset(int b, int hkv) const {
    return slice(b, shape.heads_kv, hkv, shape.nk, shape.head_dim);
  }
  int64_t v_offset(int b, int hkv) const {
    return slice(b, shape.heads_kv, hkv, shape.nk, shape.head_dim_v);
  }
  int64_t lse_offset(int b, int h) const { return slice(b, shape.heads_q, h, shape.nq, 1); }

 private:
  static int64_t slice(int b, int heads, int h, int rows, int columns) {
    return (static_cast<int64_t>(b) * heads + h) * rows * columns;
  }
};

// Checks the descriptor header and the shape against it and resolves the options.
// Throws cm::Error naming the argument and the rule it breaks.
Problem make_problem(const void* descriptor, const AttentionShape& shape,
                     const ReferenceOptions& options);

// Throws cm::Error if `pointer` is null, naming the argument.
void require_tensor(const void* pointer, const char* name);

}  // namespace cm::reference
