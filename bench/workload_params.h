// Parameters of the benchmark workloads (../shared/reference/workloads.py) at a given N: the
// seeded segment lengths come from bench/workload_segments.json, written by
// scripts/gen_workload_segments.py, so they match Python's random.Random exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cm::bench {

struct HstuParams {
  std::vector<int64_t> lens, ctx, targets;
};

// Reads the integer array stored under `key` ("doc_causal/32768/lens", ...) in
// bench/workload_segments.json. Throws std::runtime_error if the file or key is missing.
std::vector<int64_t> workload_array(const std::string& key);

std::vector<int64_t> doc_causal_lengths(int64_t n);
HstuParams hstu_params(int64_t n);

// shared_prefix(N, G=8, prompt_frac=0.25): prompt length P and the G response lengths.
struct SharedPrefixParams {
  int64_t prompt = 0;
  std::vector<int64_t> responses;
};
SharedPrefixParams shared_prefix_params(int64_t n, int64_t g = 8);

// clear(N, r=16, text=512): side s = isqrt(N - text); the sequence has text + s*s tokens.
int64_t clear_side(int64_t n, int64_t text = 512);

}  // namespace cm::bench
