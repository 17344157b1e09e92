// Row intervals of the benchmark workloads built directly in C++, so the descriptor builder
// can be timed on its own, without the front end and specialize.
#pragma once

#include "specialize/row_intervals.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cm::bench {

// The names accepted by synthetic_rows: causal, sliding_window, doc_causal, shared_prefix,
// hstu, clear.
const std::vector<std::string>& synthetic_workloads();

// The workload of ../shared/reference/workloads.py at size n (clear: text + s*s tokens),
// with a grid formula and residual rows for clear.
InstanceRows synthetic_rows(const std::string& workload, int64_t n);

}  // namespace cm::bench
