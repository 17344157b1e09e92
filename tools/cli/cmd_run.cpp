// `compilemask run FILE -p ...`: runs attention through the mask on random inputs and reports
// each backend's time and its largest error against the float64 reference.
#include "attention_backend.h"
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"
#include "progress_bar.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

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
  if (s.heads_q % s.heads_kv != 0) {
    throw UsageError("--heads " + std::to_string(s.heads_q) + " must be a multiple of --heads-kv " +
                     std::to_string(s.heads_kv));
  }
  return s;
}

void print_timing(const AttentionBackend& backend, const AttentionResult& r, bool backward) {
  std::printf("%-18s forward %.3f s", backend.name.c_str(), r.forward_seconds);
  if (backward) std::printf(", backward %.3f s", r.backward_seconds);
  std::printf("\n");
}

void print_errors(const AttentionResult& r, const AttentionResult& oracle, bool backward) {
  std::printf("  max abs error vs float64: O %.3g  LSE %.3g", max_abs_error(r.out, oracle.out),
              max_abs_error(r.lse, oracle.lse));
  if (backward) {
    std::printf("  dQ %.3g  dK %.3g  dV %.3g", max_abs_error(r.dq, oracle.dq),
                max_abs_error(r.dk, oracle.dk), max_abs_error(r.dv, oracle.dv));
  }
  std::printf("\n");
}

int run_attention(const ParsedArgs& args) {
  const Dims lengths = parse_lengths(args);
  const AttentionShape shape = parse_shape(args, lengths);
  const Tiling tiling = parse_tiling(args);
  const uint64_t seed = static_cast<uint64_t>(integer_flag(args, "seed", 0, 0, kMaxInt));
  BackendOptions options;
  options.backward = args.has("backward");
  options.threads = static_cast<int>(integer_flag(args, "threads", 0, 0, 4096));

  const Mask mask = load_mask(args.positional[0]);
  Dims dims = lengths;
  dims.batch = shape.batch;
  dims.heads = shape.heads_q;
  const Plan plan = make_plan(mask, args, dims, tiling);
  const AttentionProblem problem = random_problem(shape, seed, options.backward);

  std::printf("run %s: batch %d, heads %d (kv %d), nq %d, nk %d, dim %d, tiles %dx%d, seed %llu\n",
              mask.name().c_str(), shape.batch, shape.heads_q, shape.heads_kv, shape.nq, shape.nk,
              shape.head_dim, tiling.m, tiling.n, static_cast<unsigned long long>(seed));
  std::fflush(stdout);

  ProgressBar bar(std::cerr, args.has("progress") || isatty(STDERR_FILENO) != 0,
                  args.has("progress") ? 0.0 : kProgressDelaySeconds);
  const AttentionBackend oracle_backend = reference_backend(Accumulate::kFloat64);
  // Backends checked against the oracle. A `--gpu` flag appends its backend here.
  const std::vector<AttentionBackend> candidates = {reference_backend(Accumulate::kFloat32)};

  auto run = [&](const AttentionBackend& backend) {
    BackendOptions with_bar = options;
    with_bar.on_phase = [&](const std::string& phase) { bar.start(backend.name + " " + phase); };
    with_bar.on_progress = [&](double f) { bar.update(f); };
    AttentionResult r = backend.run(plan.blob(), problem, with_bar);
    bar.finish();
    print_timing(backend, r, options.backward);
    return r;
  };
  const AttentionResult oracle = run(oracle_backend);
  for (const AttentionBackend& backend : candidates) {
    print_errors(run(backend), oracle, options.backward);
  }
  return kExitOk;
}

}  // namespace

Command run_command() {
  std::vector<FlagSpec> flags = plan_flags();
  flags.insert(
      flags.end(),
      {
          {"batch", 0, "B", false, "batch size (default 1)"},
          {"heads", 0, "H", false, "query heads (default 1)"},
          {"heads-kv", 0, "HKV", false, "key/value heads; H must be a multiple (default H)"},
          {"dim", 0, "D", false, "head dimension (default 64)"},
          {"backward", 0, "", false, "also run the backward pass (dQ, dK, dV)"},
          {"seed", 0, "S", false, "random seed for the inputs (default 0)"},
          {"threads", 0, "T", false, "worker threads (default 0: all cores)"},
          {"progress", 0, "", false, "always draw the progress bar (default: only on a terminal)"},
      });
  return {{"run", "FILE -p NAME=VALUE... (-n N | --nq N --nk N) [options]",
           "run reference attention through a mask on random data",
           "Specializes FILE, fills Q, K, V (and dO) with uniform random values, and runs the\n"
           "CPU reference attention from the descriptor with float64 accumulation (the oracle)\n"
           "and with float32 accumulation. Prints the wall time of each and the largest\n"
           "absolute error of float32 against float64 for O and LSE (and dQ, dK, dV with\n"
           "--backward). A progress bar is drawn on stderr for long runs on a terminal." +
               param_syntax_help(),
           flags},
          run_attention};
}

}  // namespace cm::cli
