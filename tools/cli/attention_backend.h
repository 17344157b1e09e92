// The attention computations `compilemask run` compares. Every backend takes the same random
// problem and returns the same outputs, so `run` can hold each against the float64 reference.
//
// Backends: the CPU reference (float32 or float64 accumulation, this file) and, in builds with
// the CUDA kernels, the sm90 GPU kernels (gpu_backend.h), which `run --gpu` selects.
#pragma once

#include <compilemask/reference.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cm::cli {

// Dense row-major tensors with the layouts of include/compilemask/reference.h.
struct AttentionProblem {
  AttentionShape shape;
  float softcap = 0;         // logit cap (ReferenceOptions::softcap); 0 means none
  std::vector<float> sinks;  // a sink logit per query head (ReferenceOptions::sinks); or none
  std::vector<float> alibi_slopes;  // per query head (ReferenceOptions::alibi_slopes); or none
  std::vector<float> q, k, v;
  std::vector<float> dout;  // empty unless the backward pass is run
};

struct AttentionResult {
  std::vector<float> out, lse;
  std::vector<float> dq, dk, dv;  // empty unless the backward pass is run
  std::vector<float> dsinks;      // with sinks and the backward pass
  double forward_seconds = 0;
  double backward_seconds = 0;
  // How the backend cut its work, for the timing line: the GPU's key splits and head splits
  // (automatic or asked for); empty for the CPU reference.
  std::string schedule;
};

struct BackendOptions {
  bool backward = false;
  int threads = 0;      // 0: all hardware threads
  int num_splits = 0;   // the GPU forward's key parts (cm::cuda::ForwardArgs::num_splits)
  int head_splits = 0;  // the GPU backward's head splits (cm::cuda::BackwardArgs::head_splits)
  int page_size = 0;    // the GPU forward's K and V in pages of this many rows; 0: contiguous
  // Called with the phase ("forward", "backward") when it starts.
  std::function<void(const std::string&)> on_phase;
  // Called with the completed fraction of the current phase.
  std::function<void(double)> on_progress;
};

struct AttentionBackend {
  std::string name;  // e.g. "float32 reference"
  std::function<AttentionResult(const void* descriptor, const AttentionProblem&,
                                const BackendOptions&)>
      run;
  // Rounds a value to the type the backend stores tensors in; empty when that is float32.
  // `compilemask run` rounds the inputs with it first, so that every backend sees the same values.
  std::function<float(float)> round_to_storage;
};

// Inputs uniform in [-1, 1), reproducible from `seed`; with `sinks`, a sink logit per query head
// uniform in [-1, 3) (about the largest logits of such rows, so a sink weighs from little to
// much). Throws cm::Error if a tensor would exceed 2^28 elements.
AttentionProblem random_problem(const AttentionShape& shape, uint64_t seed, bool backward,
                                bool sinks);

// The ALiBi slopes of Press et al. for `heads` query heads: 2^(-8 (h + 1) / heads) for head h.
std::vector<float> alibi_slopes_for(int heads);

// The CPU reference with the given accumulation precision.
AttentionBackend reference_backend(Accumulate accumulate);

}  // namespace cm::cli
