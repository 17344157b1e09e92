// The problem's shape as the sm90 kernels see it: the part of their parameters that the forward
// (FwdParams) and the backward kernels (BwdShape) share, filled by host::problem_shape.
#pragma once

#include <compilemask/descriptor.h>

#include <stdint.h>

namespace cm::sm90 {

struct ProblemShape {
  int32_t batch, heads_q, heads_kv;
  int32_t nq, nk;
  // D, the columns of Q, K, V and the outputs. The kernel instantiated for kHeadDim >= D reads
  // the columns past D as zeros (TMA fills them) and writes only the first D.
  int32_t head_dim;
  int32_t num_q_tiles, num_k_tiles;
  int32_t desc_batch, desc_heads;  // the descriptor's (b, h) grid: 1 (broadcast) or batch / heads_q
  // Packed layout: sequence b starts at row q_offsets[b] (k_offsets[b]) of the [T, H, D]
  // tensors, and the batch strides are unused. Both are null for the strided layouts.
  const int32_t* q_offsets;
  const int32_t* k_offsets;
};

// The descriptor instance that masks query head h of sequence b.
CM_HD const desc::Instance& instance_for(const void* descriptor, const ProblemShape& s, int b,
                                         int h) {
  return desc::instance(descriptor, desc::instance_of(descriptor, s.desc_batch == 1 ? 0 : b,
                                                      s.desc_heads == 1 ? 0 : h));
}

}  // namespace cm::sm90
