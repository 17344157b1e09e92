// libFuzzer target for the descriptor reader, the gate for blobs that come from outside (files
// written by `compilemask compile --emit descriptor`, pickled Python plans, bytes handed to
// cm::cuda::DeviceDescriptor): verify_descriptor, then the stats read back (read_plan_stats: what
// cm::Plan::from_descriptor runs), must reject any bytes with cm::Error or accept them, never
// crash or read out of bounds. What it accepts, the readers trust: its stats must add up, and a
// small accepted blob must decode (both forms, every (b, h), to the same mask; a window of rows to
// those rows), dump to JSON, and drive the CPU reference forward and backward, without and with
// attention sinks and ALiBi, to finite outputs (fully masked rows give 0), all without a
// sanitizer report.
#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>
#include <compilemask/reference.h>

#include "descriptor/decode.h"
#include "descriptor/plan_stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

// The CPU reference over the blob's whole instance map, on small inputs that are not zeros.
void run_reference(const void* blob, const cm::desc::Header& h) {
  // V and O narrower than Q and K (MLA's layout), so that a mix-up of the head dims reads or
  // writes out of bounds, which the sanitizers report.
  const cm::AttentionShape shape{h.batch, h.heads, h.heads, h.nq, h.nk, 4, 3};
  const auto q_rows = static_cast<size_t>(shape.batch) * shape.heads_q * shape.nq;
  const auto k_rows = static_cast<size_t>(shape.batch) * shape.heads_kv * shape.nk;
  const auto qk_cols = static_cast<size_t>(shape.head_dim);
  const auto vo_cols = static_cast<size_t>(cm::value_head_dim(shape));
  const size_t q_size = q_rows * qk_cols, k_size = k_rows * qk_cols, out_size = q_rows * vo_cols,
               v_size = k_rows * vo_cols;
  auto filled = [](size_t n, float step) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = std::sin(step * static_cast<float>(i + 1));
    return x;
  };
  const std::vector<float> q = filled(q_size, 0.37f), k = filled(k_size, 0.53f),
                           v = filled(v_size, 0.71f), dout = filled(out_size, 0.29f);
  // Without sinks and ALiBi, then with a sink per head (head 0's -inf, none, when there are
  // several) and an ALiBi slope per head.
  std::vector<float> sinks = filled(static_cast<size_t>(shape.heads_q), 0.61f);
  if (sinks.size() > 1) sinks[0] = -std::numeric_limits<float>::infinity();
  const std::vector<float> slopes = filled(static_cast<size_t>(shape.heads_q), 0.43f);
  for (const bool with_extras : {false, true}) {
    std::vector<float> out(out_size), lse(q_rows), dq(q_size), dk(k_size), dv(v_size),
        dsinks(with_extras ? sinks.size() : 0);
    cm::ReferenceOptions options;
    options.threads = 1;
    options.sinks = with_extras ? sinks.data() : nullptr;
    options.alibi_slopes = with_extras ? slopes.data() : nullptr;
    cm::reference_forward(blob, shape, q.data(), k.data(), v.data(), out.data(), lse.data(),
                          options);
    cm::reference_backward(blob, shape, q.data(), k.data(), v.data(), out.data(), dout.data(),
                           lse.data(), nullptr, dq.data(), dk.data(), dv.data(),
                           with_extras ? dsinks.data() : nullptr, options);
    for (const std::vector<float>* t : {&out, &dq, &dk, &dv, &dsinks}) {
      for (const float x : *t) {
        if (!std::isfinite(x)) __builtin_trap();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> storage((size + 7) / 8);  // the 8-byte aligned storage verify expects
  if (size > 0) std::memcpy(storage.data(), data, size);
  const void* blob = storage.data();
  try {
    cm::verify_descriptor(blob, size);
  } catch (const cm::Error&) {
    return 0;
  }
  const cm::desc::Header& h = cm::desc::header(blob);
  const cm::PlanStats stats = cm::descriptor::read_plan_stats(blob);
  if (stats.full_tiles + stats.partial_tiles + stats.empty_tiles !=
          int64_t{h.num_instances} * h.num_q_tiles * h.num_k_tiles ||
      stats.empty_tiles < 0 || stats.visible_pairs > stats.computed_pairs) {
    __builtin_trap();
  }
  if (int64_t{h.nq} * h.nk * h.batch * h.heads <= (int64_t{1} << 20)) {
    const cm::RowWindow middle{h.nq / 3, std::min(2 * h.nq / 3 + 1, h.nq)};
    for (int32_t b = 0; b < h.batch; ++b) {
      for (int32_t head = 0; head < h.heads; ++head) {
        const auto forward = cm::decode_dense(blob, b, head, cm::DescriptorForm::kForward);
        const auto transposed = cm::decode_dense(blob, b, head, cm::DescriptorForm::kTransposed);
        if (forward != transposed) __builtin_trap();  // verify checks both forms list one mask
        const auto rows = cm::decode_dense(blob, b, head, cm::DescriptorForm::kForward, middle);
        if (!std::equal(rows.begin(), rows.end(),
                        forward.begin() + static_cast<std::ptrdiff_t>(middle.begin) * h.nk)) {
          __builtin_trap();
        }
      }
    }
    run_reference(blob, h);
  }
  if (cm::descriptor_to_json(blob).empty()) __builtin_trap();
  return 0;
}
