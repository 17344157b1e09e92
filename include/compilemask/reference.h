// Reference attention on the CPU, driven only by a descriptor. The oracle for the GPU kernels.
#pragma once

#include <cstdint>
#include <functional>

namespace cm {

// Shapes of a reference attention call. Tensors are dense row-major:
//   q, dq:            [batch, heads_q,  nq, head_dim]
//   out, dout:        [batch, heads_q,  nq, head_dim_v]
//   k, dk:            [batch, heads_kv, nk, head_dim]
//   v, dv:            [batch, heads_kv, nk, head_dim_v]
//   lse:              [batch, heads_q,  nq]          (natural log)
// heads_q must be a multiple of heads_kv (GQA/MQA): query head h reads kv head
// h / (heads_q / heads_kv). Mask (b, h) is the descriptor's instance for query head h; a
// descriptor made for batch 1 (heads 1) serves every batch row (head), as in the kernels.
struct AttentionShape {
  int32_t batch = 1;
  int32_t heads_q = 1;
  int32_t heads_kv = 1;
  int32_t nq = 0;
  int32_t nk = 0;
  int32_t head_dim = 0;    // columns of q and k
  int32_t head_dim_v = 0;  // columns of v and out (MLA: 128 against 192); 0 means head_dim
};

// The columns of v and out: shape.head_dim_v, or head_dim for 0.
inline int32_t value_head_dim(const AttentionShape& shape) {
  return shape.head_dim_v != 0 ? shape.head_dim_v : shape.head_dim;
}

enum class Accumulate { kFloat32, kFloat64 };

struct ReferenceOptions {
  float scale = 0;  // softmax scale; 0 means 1/sqrt(head_dim)
  // Logit soft-capping (Gemma 2): with softcap > 0 the logits are softcap * tanh(scale * q·k /
  // softcap) instead of scale * q·k. 0 means none.
  float softcap = 0;
  // Attention sinks (gpt-oss; a learned StreamingLLM sink): when set, sinks[h] for each query
  // head h is a logit (natural log, taken as is: not scaled, not capped) of a virtual key whose
  // value is 0 and which every row of head h sees. It joins the softmax's denominator only:
  // O = sum_j e^{s_j} v_j / (e^{sinks[h]} + sum_j e^{s_j}) and LSE = log(e^{sinks[h]} +
  // sum_j e^{s_j}). A row that sees no key gets O = 0 and LSE = sinks[h]. -inf is no sink for
  // that head; NaN and +inf are errors. Null: no sinks.
  const float* sinks = nullptr;
  // ALiBi (Press et al.; FlashAttention 2's alibi_slopes): when set, each logit of query head h
  // gains the bias -alibi_slopes[h] * |i + nk - nq - j| for query row i and key j (the last
  // query row and the last key at distance 0), after the cap and before the mask. Finite; null:
  // no bias.
  const float* alibi_slopes = nullptr;
  Accumulate accumulate = Accumulate::kFloat32;
  int threads = 0;  // 0 means std::thread::hardware_concurrency()
  // If set, called from the calling thread with the completed fraction in (0, 1], at most 20
  // times per call (the CLI draws a progress bar with it).
  std::function<void(double)> progress;
};

// O = softmax(scale * Q K^T masked) V and LSE (with options.softcap, of the capped logits; with
// options.alibi_slopes, plus the ALiBi bias; with options.sinks, the sinks in the denominator).
// Fully masked rows give O = 0 and LSE = -inf (the head's sink with sinks). Throws cm::Error if the
// shape does not match the descriptor.
void reference_forward(const void* descriptor, const AttentionShape& shape, const float* q,
                       const float* k, const float* v, float* out, float* lse,
                       const ReferenceOptions& options = {});

// dQ, dK, dV for the forward above (out and lse are its results), given the gradients of the
// loss with respect to O (dout) and, optionally, the LSE (dlse, shaped as lse; null means 0).
// dK and dV are summed over the query heads of each kv group. Fully masked rows contribute
// exactly zero to them. With options.sinks, dsinks (if not null; [heads_q]) receives the
// gradient of the loss with respect to each head's sink, summed over the batch and the rows:
// -sum e^{sinks[h] - lse} (dO · O - dLSE), 0 for a head whose sink is -inf. dsinks needs sinks.
void reference_backward(const void* descriptor, const AttentionShape& shape, const float* q,
                        const float* k, const float* v, const float* out, const float* dout,
                        const float* lse, const float* dlse, float* dq, float* dk, float* dv,
                        float* dsinks, const ReferenceOptions& options = {});

}  // namespace cm
