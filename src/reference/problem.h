// The checked description of one reference attention call: shape, descriptor geometry and
// tensor strides, shared by the forward and backward passes.
#pragma once

#include <compilemask/reference.h>

#include <cstdint>

namespace cm::reference {

struct Problem {
  const void* blob = nullptr;
  AttentionShape shape;
  double scale = 0;   // resolved softmax scale, never 0
  int32_t group = 1;  // query heads per kv head
  int32_t tile_n = 0;  // the widest key tile (key tiles restart at block boundaries)
  int32_t num_q_tiles = 0, num_k_tiles = 0;

  // Offsets of row 0 of a (b, h) slice of the query-side and key-side tensors, and of the LSE.
  int64_t q_offset(int b, int h) const {
    return (static_cast<int64_t>(b) * shape.heads_q + h) * shape.nq * shape.head_dim;
  }
  int64_t kv_offset(int b, int hkv) const {
    return (static_cast<int64_t>(b) * shape.heads_kv + hkv) * shape.nk * shape.head_dim;
  }
  int64_t lse_offset(int b, int h) const {
    return (static_cast<int64_t>(b) * shape.heads_q + h) * shape.nq;
  }
};

// Checks the descriptor header and the shape against it and resolves the options.
// Throws cm::Error naming the argument and the rule it breaks.
Problem make_problem(const void* descriptor, const AttentionShape& shape,
                     const ReferenceOptions& options);

// Throws cm::Error if `pointer` is null, naming the argument.
void require_tensor(const void* pointer, const char* name);

}  // namespace cm::reference
