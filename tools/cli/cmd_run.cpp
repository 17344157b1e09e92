// `compilemask run FILE -p ...`: runs attention through the mask on random inputs and reports
// each backend's time and its largest error against the float64 reference.
#include "attention_backend.h"
#include "cli_error.h"
#include "commands.h"
#include "gpu_backend.h"
#include "mask_setup.h"
#include "progress_bar.h"

#include <compilemask/cuda_limits.h>
#include <compilemask/descriptor.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>

namespace cm::cli {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
constexpr double kProgressDelaySeconds = 0.5;

// Largest |a - b|; equal values (including two -inf LSEs of fully masked rows) differ by 0.
double max_abs_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
  }
  return worst;
}

AttentionShape parse_shape(const ParsedArgs& args, const Dims& lengths) {
  if (lengths.nq < 1 || lengths.nk < 1) {
    throw UsageError("run needs at least one query and one key: the lengths must be >= 1");
  }
  AttentionShape s;
  s.nq = static_cast<int32_t>(lengths.nq);
  s.nk = static_cast<int32_t>(lengths.nk);
  s.batch = static_cast<int32_t>(integer_flag(args, "batch", 1, 1, kMaxInt));
  s.heads_q = static_cast<int32_t>(integer_flag(args, "heads", 1, 1, kMaxInt));
  s.heads_kv = static_cast<int32_t>(integer_flag(args, "heads-kv", s.heads_q, 1, kMaxInt));
  s.head_dim = static_cast<int32_t>(integer_flag(args, "dim", 64, 1, 1024));
  s.head_dim_v = static_cast<int32_t>(integer_flag(args, "dim-v", 0, 1, 1024));
  if (s.heads_q % s.heads_kv != 0) {
    throw UsageError("--heads " + std::to_string(s.heads_q) + " must be a multiple of --heads-kv " +
                     std::to_string(s.heads_kv));
  }
  return s;
}

// --gpu and --dtype. Throws UsageError for what the sm90 kernels do not support.
std::optional<GpuDType> parse_gpu(const ParsedArgs& args, const AttentionShape& shape,
                                  const Tiling& tiling) {
  const std::optional<std::string> dtype = args.value("dtype");
  if (!args.has("gpu")) {
    for (const char* flag : {"dtype", "splits", "head-splits", "pages"}) {
      if (args.value(flag)) throw UsageError(args.spelling(flag) + " applies only with --gpu");
    }
    return std::nullopt;
  }
  if (args.value("head-splits") && !args.has("backward")) {
    throw UsageError(args.spelling("head-splits") + " applies only with " +
                     args.spelling("backward"));
  }
  if (args.value("pages") && args.has("backward")) {
    throw UsageError(args.spelling("pages") +
                     " runs the forward only (paged K/V has no backward): leave out " +
                     args.spelling("backward"));
  }
  for (const auto& [flag, dim] : {std::pair{"dim", shape.head_dim}, {"dim-v", shape.head_dim_v}}) {
    if (dim != 0 && !cuda::head_dim_supported(dim)) {
      throw UsageError("--gpu supports " + args.spelling(flag) + " " + cuda::kHeadDimRule +
                       ", got " + std::to_string(dim));
    }
  }
  if (tiling.m != 128 || tiling.n != 128) {
    throw UsageError("--gpu needs --tile 128x128 (the sm90 kernel's tile), got " +
                     std::to_string(tiling.m) + "x" + std::to_string(tiling.n));
  }
  if (!dtype || *dtype == "bf16") return GpuDType::kBFloat16;
  if (*dtype == "fp16") return GpuDType::kFloat16;
  throw UsageError(args.spelling("dtype") + ": expected bf16 or fp16, got '" + *dtype + "'");
}

// --pages: the GPU forward's page size, 0 without (parse_gpu checked that it goes with --gpu).
int parse_pages(const ParsedArgs& args) {
  const auto size = static_cast<int32_t>(integer_flag(args, "pages", 0, 1, kMaxInt));
  if (size != 0 && !cuda::page_size_supported(size)) {
    throw UsageError(args.spelling("pages") + " must be " + cuda::kPageSizeRule + ", got " +
                     std::to_string(size));
  }
  return size;
}

// The backend `run --gpu` compares. Checks the device now, before the slow CPU reference.
AttentionBackend checked_gpu_backend([[maybe_unused]] GpuDType dtype) {
#ifdef CM_CLI_GPU
  return gpu_backend(dtype);
#else
  throw std::runtime_error("this build has no GPU support (nvcc not found at configure time)");
#endif
}

// Visible (q, k) pairs over every (b, h): the work that effective TFLOP/s counts.
double visible_pairs(const void* blob, const AttentionShape& s) {
  double pairs = 0;
  for (int32_t b = 0; b < s.batch; ++b) {
    for (int32_t head = 0; head < s.heads_q; ++head) {
      pairs += static_cast<double>(desc::mask_of(blob, b, head).visible_pairs);
    }
  }
  return pairs;
}

void print_phase(const char* phase, double seconds, double flops) {
  if (seconds >= 1) {
    std::printf("%s %.3f s", phase, seconds);
  } else {
    std::printf("%s %.3f ms", phase, seconds * 1e3);
  }
  std::printf(" (%.3g TFLOP/s)", seconds > 0 ? flops / seconds * 1e-12 : 0.0);
}

// Effective TFLOP/s count 2 (D + Dv) flops per visible pair forward and 2.5 times that backward.
void print_timing(const AttentionBackend& backend, const AttentionResult& r, bool backward,
                  double forward_flops) {
  std::printf("%-18s ", backend.name.c_str());
  print_phase("forward", r.forward_seconds, forward_flops);
  if (backward) {
    std::printf(", ");
    print_phase("backward", r.backward_seconds, 2.5 * forward_flops);
  }
  if (!r.schedule.empty()) std::printf(" [%s]", r.schedule.c_str());
  std::printf("\n");
}

void print_errors(const AttentionResult& r, const AttentionResult& oracle, bool backward) {
  std::printf("  max abs error vs float64: O %.3g  LSE %.3g", max_abs_error(r.out, oracle.out),
              max_abs_error(r.lse, oracle.lse));
  if (backward) {
    std::printf("  dQ %.3g  dK %.3g  dV %.3g", max_abs_error(r.dq, oracle.dq),
                max_abs_error(r.dk, oracle.dk), max_abs_error(r.dv, oracle.dv));
    if (!oracle.dsinks.empty())
      std::printf("  dsinks %.3g", max_abs_error(r.dsinks, oracle.dsinks));
  }
  std::printf("\n");
}

// Largest |round(x) - x|: what storing the exact result in the backend's type alone costs.
double rounding_floor(const std::vector<float>& exact, const std::function<float(float)>& round) {
  double worst = 0;
  for (float x : exact) {
    if (std::isfinite(x)) worst = std::max(worst, std::fabs(static_cast<double>(round(x)) - x));
  }
  return worst;
}

void print_rounding_floors(const AttentionBackend& backend, const AttentionResult& oracle,
                           bool backward) {
  const auto& round = backend.round_to_storage;
  std::printf("  rounding the float64 results to storage alone: O %.3g",
              rounding_floor(oracle.out, round));
  if (backward) {
    std::printf("  dQ %.3g  dK %.3g  dV %.3g", rounding_floor(oracle.dq, round),
                rounding_floor(oracle.dk, round), rounding_floor(oracle.dv, round));
  }
  std::printf("\n");
}

void round_inputs(AttentionProblem& p, const std::function<float(float)>& round) {
  for (std::vector<float>* tensor : {&p.q, &p.k, &p.v, &p.dout}) {
    for (float& x : *tensor) x = round(x);
  }
}

int run_attention(const ParsedArgs& args) {
  const Dims lengths = parse_lengths(args);
  AttentionShape shape = parse_shape(args, lengths);
  const Tiling tiling = parse_tiling(args);
  const uint64_t seed = static_cast<uint64_t>(integer_flag(args, "seed", 0, 0, kMaxInt));
  const float softcap = static_cast<float>(positive_number_flag(args, "softcap", 0));
  BackendOptions options;
  options.backward = args.has("backward");
  options.threads = static_cast<int>(integer_flag(args, "threads", 0, 0, 4096));
  options.num_splits = static_cast<int>(integer_flag(args, "splits", 0, 0, cuda::kMaxSplits));
  options.head_splits =
      static_cast<int>(integer_flag(args, "head-splits", 0, 0, shape.heads_q / shape.heads_kv));
  const std::optional<GpuDType> gpu = parse_gpu(args, shape, tiling);
  options.page_size = parse_pages(args);
  // Backends checked against the float64 oracle.
  const std::vector<AttentionBackend> candidates = {gpu ? checked_gpu_backend(*gpu)
                                                        : reference_backend(Accumulate::kFloat32)};

  const Mask mask = load_mask(args.positional[0]);
  Dims dims = lengths;
  dims.batch = shape.batch;
  dims.heads = shape.heads_q;
  if (args.has("alibi") && args.value("cp")) {
    throw UsageError(
        "--alibi needs a plan of every query row (its bias measures distances "
        "from the plan's own rows): leave out --cp");
  }
  const Plan plan = make_plan(mask, args, dims, tiling);
  shape.nq = static_cast<int32_t>(plan.dims().nq);  // the rank's rows under --cp
  AttentionProblem problem = random_problem(shape, seed, options.backward, args.has("sinks"));
  problem.softcap = softcap;
  if (args.has("alibi")) problem.alibi_slopes = alibi_slopes_for(shape.heads_q);
  for (const AttentionBackend& backend : candidates) {
    if (backend.round_to_storage) round_inputs(problem, backend.round_to_storage);
  }
  // 2 D flops per visible pair for Q Kᵀ and 2 Dv for P V.
  const double forward_flops =
      2.0 * (shape.head_dim + value_head_dim(shape)) * visible_pairs(plan.blob(), shape);

  std::printf("run %s: batch %d, heads %d (kv %d), nq %d, nk %d, dim %d", mask.name().c_str(),
              shape.batch, shape.heads_q, shape.heads_kv, shape.nq, shape.nk, shape.head_dim);
  if (shape.head_dim_v != 0) std::printf(" (v %d)", shape.head_dim_v);
  std::printf(", tiles %dx%d, seed %llu", tiling.m, tiling.n,
              static_cast<unsigned long long>(seed));
  if (problem.softcap > 0) std::printf(", softcap %g", problem.softcap);
  if (!problem.sinks.empty()) std::printf(", attention sinks");
  if (!problem.alibi_slopes.empty()) std::printf(", ALiBi");
  if (const std::optional<std::string> cp = args.value("cp")) {
    std::printf(", context-parallel rank %s%s", cp->c_str(),
                args.has("cp-contiguous") ? " (contiguous)" : "");
  }
  if (options.page_size > 0) std::printf(", K/V in pages of %d rows", options.page_size);
  std::printf("\n");
  std::fflush(stdout);

  ProgressBar bar(std::cerr, args.has("progress") || isatty(STDERR_FILENO) != 0,
                  args.has("progress") ? 0.0 : kProgressDelaySeconds);
  const AttentionBackend oracle_backend = reference_backend(Accumulate::kFloat64);

  auto run = [&](const AttentionBackend& backend) {
    BackendOptions with_bar = options;
    with_bar.on_phase = [&](const std::string& phase) { bar.start(backend.name + " " + phase); };
    with_bar.on_progress = [&](double f) { bar.update(f); };
    AttentionResult r = backend.run(plan.blob(), problem, with_bar);
    bar.finish();
    print_timing(backend, r, options.backward, forward_flops);
    return r;
  };
  const AttentionResult oracle = run(oracle_backend);
  for (const AttentionBackend& backend : candidates) {
    print_errors(run(backend), oracle, options.backward);
    if (backend.round_to_storage) print_rounding_floors(backend, oracle, options.backward);
  }
  return kExitOk;
}

}  // namespace

Command run_command() {
  std::vector<FlagSpec> flags = plan_flags();
  for (FlagSpec& f : context_parallel_flags()) flags.push_back(std::move(f));
  flags.insert(
      flags.end(),
      {
          {"batch", 0, "B", false, "batch size (default 1)"},
          {"heads", 0, "H", false, "query heads (default 1)"},
          {"heads-kv", 0, "HKV", false, "key/value heads; H must be a multiple (default H)"},
          {"dim", 0, "D", false, "head dimension (default 64)"},
          {"dim-v", 0, "DV", false,
           "head dimension of V and O, as MLA's 128 against 192 (default D)"},
          {"softcap", 0, "C", false,
           "cap the logits at C tanh(logit / C), as Gemma 2 (default: no cap)"},
          {"sinks", 0, "", false,
           "add an attention sink per query head (gpt-oss), its logit drawn from the seed"},
          {"alibi", 0, "", false,
           "add ALiBi, with the slopes 2^(-8 (h + 1) / H) of Press et al. for query head h"},
          {"backward", 0, "", false, "also run the backward pass (dQ, dK, dV)"},
          {"seed", 0, "S", false, "random seed for the inputs (default 0)"},
          {"threads", 0, "T", false, "worker threads (default 0: all cores)"},
          {"progress", 0, "", false, "always draw the progress bar (default: only on a terminal)"},
          {"gpu", 0, "", false, "run the sm90 GPU kernels, not the float32 reference (Hopper GPU)"},
          {"dtype", 0, "TYPE", false, "GPU input and output type: bf16 (default) or fp16"},
          {"splits", 0, "N", false,
           "GPU forward: split each query tile's keys into N parts (default 0: automatic, "
           "1: none)"},
          {"head-splits", 0, "N", false,
           "GPU backward: spread each kv group's query heads over N CTAs per key tile "
           "(default 0: automatic, 1: none)"},
          {"pages", 0, "N", false,
           "GPU forward: K and V in a shuffled pool of pages of N rows (16, 32, 64 or a "
           "multiple of 128), the slots that hold no key filled with NaN"},
      });
  return {{"run", "FILE -p NAME=VALUE... (-n N | --nq N --nk N) [options]",
           "run attention through a mask on random data (CPU reference, or GPU with --gpu)",
           "Specializes FILE, fills Q, K, V (and dO) with uniform random values, and runs the\n"
           "CPU reference attention from the descriptor with float64 accumulation (the oracle)\n"
           "and with float32 accumulation. Prints the wall time of each and the largest\n"
           "absolute error of float32 against float64 for O and LSE (and dQ, dK, dV with\n"
           "--backward). A progress bar is drawn on stderr for long runs on a terminal.\n\n"
           "With --gpu, the sm90 kernels replace the float32 reference: the inputs are rounded\n"
           "to --dtype first (the float64 reference reads the same values), the outputs are\n"
           "filled with NaN before the kernels run, and each time is the median of five runs\n"
           "after a warm-up, by CUDA events. As the GPU stores O, dQ, dK and dV in --dtype, the\n"
           "error of rounding the float64 results to --dtype is printed for scale; errors of a\n"
           "few times that are expected.\n"
           "--gpu needs --dim and --dim-v multiples of 8 up to 256 (the kernels for 64, 128\n"
           "and 256 run the others with zero-padded columns) and the default --tile 128x128.\n"
           "Effective TFLOP/s count 2*(D + DV) flops per visible (q, k) pair forward and 2.5\n"
           "times that backward." +
               param_syntax_help(),
           flags},
          run_attention};
}

}  // namespace cm::cli
