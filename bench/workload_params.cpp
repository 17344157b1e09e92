// Benchmark workload parameters (see workload_params.h).
#include "workload_params.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cm::bench {

std::vector<int64_t> workload_array(const std::string& key) {
  static const std::string text = [] {
    std::ifstream in(CM_SOURCE_DIR "/bench/workload_segments.json");
    if (!in) throw std::runtime_error("cannot open bench/workload_segments.json");
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }();
  const size_t at = text.find("\"" + key + "\": [");
  if (at == std::string::npos) {
    throw std::runtime_error("bench/workload_segments.json has no \"" + key +
                             "\"; rerun scripts/gen_workload_segments.py");
  }
  std::vector<int64_t> values;
  std::istringstream in(text.substr(text.find('[', at) + 1));
  int64_t v;
  char separator = ',';
  while (separator == ',' && in >> v >> separator) values.push_back(v);
  return values;
}

std::vector<int64_t> doc_causal_lengths(int64_t n) {
  return workload_array("doc_causal/" + std::to_string(n) + "/lens");
}

HstuParams hstu_params(int64_t n) {
  const std::string prefix = "hstu/" + std::to_string(n) + "/";
  return {workload_array(prefix + "lens"), workload_array(prefix + "ctx"),
          workload_array(prefix + "targets")};
}

SharedPrefixParams shared_prefix_params(int64_t n, int64_t g) {
  SharedPrefixParams p;
  p.prompt = n / 4;  // int(N * 0.25)
  const int64_t r = (n - p.prompt) / g;
  p.responses.assign(static_cast<size_t>(g - 1), r);
  p.responses.push_back(n - p.prompt - r * (g - 1));
  return p;
}

int64_t clear_side(int64_t n, int64_t text) {
  const int64_t area = std::max<int64_t>(n - text, 1);
  auto s = static_cast<int64_t>(std::sqrt(static_cast<double>(area)));
  while (s * s > area) --s;
  while ((s + 1) * (s + 1) <= area) ++s;
  return s;
}

}  // namespace cm::bench
