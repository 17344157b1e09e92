// Random problem generation and the CPU reference backend (see attention_backend.h).
#include "attention_backend.h"

#include <compilemask/compilemask.h>

#include <chrono>
#include <cmath>
#include <random>

namespace cm::cli {
namespace {

constexpr size_t kMaxTensorElements = size_t{1} << 28;

size_t tensor_size(int64_t batch, int64_t heads, int64_t len, int64_t dim, const char* what) {
  const double elements = static_cast<double>(batch) * heads * len * dim;
  if (elements > static_cast<double>(kMaxTensorElements)) {
    throw Error(std::string("the ") + what + " tensor would have " +
                std::to_string(static_cast<long long>(elements)) +
                " elements; the limit is 2^28 (reduce the batch, heads, length or dim)");
  }
  return static_cast<size_t>(elements);
}

std::vector<float> uniform(size_t n, std::mt19937_64& rng) {
  std::vector<float> out(n);
  // 24 random bits give every float in [-1, 1) on a 2^-23 grid, identically on every platform.
  for (float& x : out) x = static_cast<float>(rng() >> 40) * 0x1p-23f - 1.0f;
  return out;
}

// Elements of out (and dout): [batch, heads_q, nq, head_dim_v].
size_t output_size(const AttentionShape& s) {
  return tensor_size(s.batch, s.heads_q, s.nq, value_head_dim(s), "output");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

AttentionResult run_reference(Accumulate accumulate, const void* descriptor,
                              const AttentionProblem& p, const BackendOptions& options) {
  const AttentionShape& s = p.shape;
  ReferenceOptions ref;
  ref.accumulate = accumulate;
  ref.softcap = p.softcap;
  ref.sinks = p.sinks.empty() ? nullptr : p.sinks.data();
  ref.alibi_slopes = p.alibi_slopes.empty() ? nullptr : p.alibi_slopes.data();
  ref.threads = options.threads;
  ref.progress = options.on_progress;
  AttentionResult r;
  r.out.resize(output_size(s));
  r.lse.resize(static_cast<size_t>(s.batch) * s.heads_q * s.nq);
  if (options.on_phase) options.on_phase("forward");
  auto start = std::chrono::steady_clock::now();
  reference_forward(descriptor, s, p.q.data(), p.k.data(), p.v.data(), r.out.data(), r.lse.data(),
                    ref);
  r.forward_seconds = seconds_since(start);
  if (!options.backward) return r;
  r.dq.resize(p.q.size());
  r.dk.resize(p.k.size());
  r.dv.resize(p.v.size());
  r.dsinks.resize(p.sinks.size());
  if (options.on_phase) options.on_phase("backward");
  start = std::chrono::steady_clock::now();
  reference_backward(descriptor, s, p.q.data(), p.k.data(), p.v.data(), r.out.data(), p.dout.data(),
                     r.lse.data(), nullptr, r.dq.data(), r.dk.data(), r.dv.data(),
                     r.dsinks.empty() ? nullptr : r.dsinks.data(), ref);
  r.backward_seconds = seconds_since(start);
  return r;
}

}  // namespace

AttentionProblem random_problem(const AttentionShape& shape, uint64_t seed, bool backward,
                                bool sinks) {
  const size_t q_size = tensor_size(shape.batch, shape.heads_q, shape.nq, shape.head_dim, "query");
  const size_t k_size = tensor_size(shape.batch, shape.heads_kv, shape.nk, shape.head_dim, "key");
  const size_t v_size =
      tensor_size(shape.batch, shape.heads_kv, shape.nk, value_head_dim(shape), "value");
  const size_t out_size = output_size(shape);
  std::mt19937_64 rng(seed);
  AttentionProblem p;
  p.shape = shape;
  p.q = uniform(q_size, rng);
  p.k = uniform(k_size, rng);
  p.v = uniform(v_size, rng);
  if (backward) p.dout = uniform(out_size, rng);
  if (sinks) {
    p.sinks = uniform(static_cast<size_t>(shape.heads_q), rng);
    for (float& x : p.sinks) x = 1.0f + 2.0f * x;
  }
  return p;
}

std::vector<float> alibi_slopes_for(int heads) {
  std::vector<float> slopes;
  for (int h = 0; h < heads; ++h) {
    slopes.push_back(std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(heads)));
  }
  return slopes;
}

AttentionBackend reference_backend(Accumulate accumulate) {
  const bool f64 = accumulate == Accumulate::kFloat64;
  return {f64 ? "float64 reference" : "float32 reference",
          [accumulate](const void* descriptor, const AttentionProblem& p,
                       const BackendOptions& options) {
            return run_reference(accumulate, descriptor, p, options);
          },
          {}};  // round_to_storage: none, the reference stores float32
}

}  // namespace cm::cli
