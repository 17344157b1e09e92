// Times Mask::specialize (parameter binding, row evaluation and descriptor building) and
// Mask::count_tiles (the same without the descriptor) through the public API for the bundled
// examples, at N = 32768 and 262144 with 128 x 128 tiles. Parameters follow
// ../shared/reference/workloads.py (see workload_params.h).
#include <compilemask/compilemask.h>

#include "workload_params.h"

#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cm::bench {
namespace {

Mask compile_example(const std::string& name) {
  const std::string path = CM_SOURCE_DIR "/examples/" + name + ".mask";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream source;
  source << in.rdbuf();
  CompileResult result = compile(source.str(), path);
  if (!result) {
    std::string message;
    for (const Diagnostic& d : result.diagnostics) message += d.format();
    throw std::runtime_error(message);
  }
  return *result.mask;
}

// The parameters of `example` at size n, and the sequence length (clear rounds N down to
// text + s*s).
std::pair<Params, int64_t> example_params(const std::string& example, int64_t n) {
  if (example == "causal") return {{}, n};
  if (example == "sliding_window") return {{{"W", int64_t{4096}}}, n};
  if (example == "doc_causal")
    return {{{"docs", Segments::from_lengths(doc_causal_lengths(n))}}, n};
  if (example == "shared_prefix") {
    const SharedPrefixParams p = shared_prefix_params(n);
    return {{{"prompt", Segments::from_lengths({p.prompt})},
             {"responses", Segments::from_lengths(p.responses, p.prompt)}},
            n};
  }
  if (example == "hstu") {
    const HstuParams p = hstu_params(n);
    return {{{"seqs", Segments::from_lengths(p.lens)}, {"ctx", p.ctx}, {"targets", p.targets}}, n};
  }
  if (example == "clear" || example == "clear_strips") {
    const int64_t text = 512, s = clear_side(n, text);
    // strip = s: the row-major layout, issue 2's bar; clear_strips: 16-column strips, whose
    // partial tiles the builder stores as bitmaps (the GPU benchmarks' clear_strips).
    const int64_t strip = example == "clear" ? s : 16;
    return {{{"text", text}, {"s", s}, {"r", int64_t{16}}, {"strip", strip}}, text + s * s};
  }
  throw std::invalid_argument("no benchmark parameters for example " + example);
}

// The compiled example and its arguments at size n.
struct Workload {
  Mask mask;
  Params params;
  Dims dims;
};

Workload workload(const std::string& example, int64_t n) {
  auto [params, length] = example_params(example, n);
  return {compile_example(example == "clear_strips" ? "clear" : example), std::move(params),
          Dims{.nq = length, .nk = length}};
}

void specialize(benchmark::State& state, const std::string& example, int64_t n) {
  const Workload w = workload(example, n);
  PlanStats stats;
  for (auto _ : state) {
    Plan plan = w.mask.specialize(w.params, w.dims, Tiling{128, 128});
    benchmark::DoNotOptimize(plan.blob());
    stats = plan.stats();
  }
  state.counters["bytes"] = static_cast<double>(stats.bytes);
  state.counters["patterns"] = stats.patterns;
  state.counters["partial_tiles"] = static_cast<double>(stats.partial_tiles);
}

// Mask::count_tiles: what a plan choice pays per candidate it does not build.
void count_tiles(benchmark::State& state, const std::string& example, int64_t n) {
  const Workload w = workload(example, n);
  TileCounts counts;
  for (auto _ : state) {
    counts = w.mask.count_tiles(w.params, w.dims, Tiling{128, 128});
    benchmark::DoNotOptimize(counts);
  }
  state.counters["partial_tiles"] = static_cast<double>(counts.partial_tiles);
}

const bool registered = [] {
  for (const char* example : {"causal", "sliding_window", "doc_causal", "shared_prefix", "hstu",
                              "clear", "clear_strips"}) {
    for (int64_t n : {int64_t{32768}, int64_t{262144}}) {
      using Run = void (*)(benchmark::State&, const std::string&, int64_t);
      for (const auto& [name, run] : {std::pair<std::string, Run>{"specialize/", specialize},
                                      std::pair<std::string, Run>{"count_tiles/", count_tiles}}) {
        benchmark::RegisterBenchmark((name + example + "/" + std::to_string(n)).c_str(), run,
                                     std::string(example), n)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace cm::bench
