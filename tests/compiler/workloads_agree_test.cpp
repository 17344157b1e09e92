// The bundled examples agree exactly with the ground-truth predicates of the benchmark
// workloads (../shared/reference/workloads.py), evaluated by Python itself through
// workload_masks.py, at several small sizes and parameter choices.
#include "example_params.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

namespace cm::testing {
namespace {

struct WorkloadCase {
  std::string workload;
  int64_t n = 0;
  std::map<std::string, std::vector<int64_t>> params;
  std::string mask;
};

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

std::vector<WorkloadCase> run_python() {
  // The vendored copy (tests/data/README.md), so that any clone can run this test.
  const std::string command =
      "python3 " CM_SOURCE_DIR "/tests/compiler/workload_masks.py " CM_SOURCE_DIR
      "/tests/data/workloads.py";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string output;
  char buffer[1 << 16];
  for (size_t got; pipe && (got = fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) {
    output.append(buffer, got);
  }
  std::vector<WorkloadCase> cases;
  std::stringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::stringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "case") {
      cases.emplace_back();
      fields >> cases.back().workload >> cases.back().n;
    } else if (kind == "param") {
      std::string name, values;
      fields >> name >> values;
      cases.back().params[name] = parse_list(values);
    } else if (kind == "mask") {
      fields >> cases.back().mask;
    }
  }
  return cases;
}

// The example and parameters that express a workload in the language.
std::pair<std::string, Params> to_example(const WorkloadCase& c) {
  const auto& p = c.params;
  auto one = [&](const char* name) { return p.at(name).at(0); };
  if (c.workload == "causal") return {"causal", {}};
  if (c.workload == "sliding") return {"sliding_window", {{"W", one("W")}}};
  if (c.workload == "doc_causal") {
    return {"doc_causal", {{"docs", Segments::from_lengths(p.at("lens"))}}};
  }
  if (c.workload == "hstu") {
    return {"hstu",
            {{"seqs", Segments::from_lengths(p.at("lens"))},
             {"ctx", p.at("ctx")},
             {"targets", p.at("targets")}}};
  }
  if (c.workload == "shared_prefix") {
    return {"shared_prefix",
            {{"prompt", Segments::from_lengths({one("prompt")})},
             {"responses", Segments::from_lengths(p.at("responses"), one("prompt"))}}};
  }
  return {"clear",
          {{"text", one("text")},
           {"s", p.at("grid").at(0)},
           {"r", one("r")},
           {"strip", p.at("grid").at(0)}}};  // the workload is row-major
}

TEST(WorkloadsAgree, ExamplesMatchReferencePredicates) {
  const std::vector<WorkloadCase> cases = run_python();
  ASSERT_GE(cases.size(), 40u) << "workload_masks.py produced too few cases (is numpy installed?)";
  std::map<std::string, int> checked;
  for (const WorkloadCase& c : cases) {
    const auto [example, params] = to_example(c);
    CompileResult compiled = compile(example_source(example), example + ".mask");
    ASSERT_TRUE(compiled) << example;
    const Plan plan = compiled.mask->specialize(params, Dims{c.n, c.n, 1, 1}, Tiling{64, 64});
    const std::vector<uint8_t> dense = plan.dense();
    ASSERT_EQ(dense.size(), c.mask.size()) << c.workload << " N=" << c.n;
    for (size_t i = 0; i < dense.size(); ++i) {
      ASSERT_EQ(dense[i], c.mask[i] == '1' ? 1 : 0)
          << c.workload << " N=" << c.n << " q=" << i / static_cast<size_t>(c.n)
          << " k=" << i % static_cast<size_t>(c.n);
    }
    ++checked[c.workload];
  }
  for (const char* w : {"causal", "sliding", "doc_causal", "hstu", "shared_prefix", "clear"}) {
    EXPECT_GT(checked[w], 0) << w << " was never checked";
  }
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SharedReference, CopyMatchesShared) {
  const std::string shared = read(CM_SHARED_DIR "/reference/workloads.py");
  if (shared.empty()) GTEST_SKIP() << CM_SHARED_DIR << "/reference/workloads.py is not present";
  EXPECT_EQ(read(CM_SOURCE_DIR "/tests/data/workloads.py"), shared)
      << "tests/data/workloads.py differs from ../shared/reference/workloads.py: copy it again";
}

}  // namespace
}  // namespace cm::testing
