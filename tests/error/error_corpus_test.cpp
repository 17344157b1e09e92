// The golden corpus of programs that must fail: for every cases/NAME.mask, run_frontend must
// fail and its formatted diagnostics must equal cases/NAME.expected exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lang/frontend.h"

namespace cm::lang {
namespace {

const std::filesystem::path kCases = std::filesystem::path(CM_SOURCE_DIR) / "tests/error/cases";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kCases)) {
    if (entry.path().extension() == ".mask") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ErrorCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(ErrorCorpus, FailsWithTheExpectedDiagnostics) {
  const std::string name = GetParam();
  const std::filesystem::path expected_path = kCases / (name + ".expected");
  ASSERT_TRUE(std::filesystem::exists(expected_path)) << "missing " << expected_path;
  ir::Program program;
  std::vector<Diagnostic> diagnostics;
  const bool ok = run_frontend(read_file(kCases / (name + ".mask")), name + ".mask", "", nullptr,
                               program, diagnostics);
  EXPECT_FALSE(ok);
  std::string actual;
  for (const Diagnostic& d : diagnostics) actual += d.format();
  EXPECT_EQ(actual, read_file(expected_path));
}

TEST(ErrorCorpusSize, CoversEnoughCases) {
  EXPECT_GE(case_names().size(), 40u);
}

INSTANTIATE_TEST_SUITE_P(Cases, ErrorCorpus, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

}  // namespace
}  // namespace cm::lang
