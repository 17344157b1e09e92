// Times the descriptor builder alone on the benchmark workloads' row intervals (built in C++
// by synthetic_rows), at N = 32768 and 262144 with 128 x 128 tiles.
#include "descriptor/build.h"
#include "synthetic_rows.h"

#include <benchmark/benchmark.h>

namespace cm::bench {
namespace {

void build(benchmark::State& state, const std::string& workload, int64_t n) {
  const std::vector<InstanceRows> instances = {synthetic_rows(workload, n)};
  const InstanceRows& rows = instances.front();
  PlanStats stats;
  for (auto _ : state) {
    std::vector<uint64_t> blob = build_descriptor(instances, {0}, 1, 1, Tiling{128, 128}, stats);
    benchmark::DoNotOptimize(blob.data());
  }
  state.counters["bytes"] = static_cast<double>(stats.bytes);
  state.counters["patterns"] = stats.patterns;
  state.counters["partial_tiles"] = static_cast<double>(stats.partial_tiles);
  state.counters["listed_intervals"] = static_cast<double>(rows.listed().intervals.size());
}

const bool registered = [] {
  for (const std::string& workload : synthetic_workloads()) {
    for (int64_t n : {int64_t{32768}, int64_t{262144}}) {
      benchmark::RegisterBenchmark(
          ("build_descriptor/" + workload + "/" + std::to_string(n)).c_str(), build, workload, n)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace cm::bench
