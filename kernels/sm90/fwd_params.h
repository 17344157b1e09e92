// The parameters of the sm90 forward kernel: plain data shared by the host launcher
// (launch.cu) and the kernel (fwd_kernel.cuh). Tensors are addressed by element strides; the
// head dimension is contiguous. Q, K and V themselves are read through TMA tensor maps, which
// travel as separate kernel parameters.
#pragma once

#include "problem_shape.h"

#include <stdint.h>

namespace cm::sm90 {

struct FwdParams : ProblemShape {
  const void* descriptor;  // device copy of the descriptor blob
  int32_t total_items;     // num_q_tiles * batch * heads_q work items
  float scale_log2;        // log2(e) * the logits' factor: scale, or softcap with a cap
  float softcap_scale;     // scale / softcap: a capped logit is softcap * tanh(S softcap_scale);
                           // 0 for no cap

  void* out;  // same element type as Q
  int64_t out_stride_b, out_stride_s, out_stride_h;
  float* lse;  // natural log; row stride 1
  int64_t lse_stride_b, lse_stride_h;

  int32_t* work_counter;  // zeroed before each launch
};

}  // namespace cm::sm90
