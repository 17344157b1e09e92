// Helpers shared by the front end's tests: reading files, compiling through run_frontend, and
// building parameter values.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lang/frontend.h"

namespace cm::lang::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Compiles `source`; on failure the test fails with the formatted diagnostics.
inline ir::Program compile_ok(const std::string& source, const std::string& file = "test.mask") {
  ir::Program program;
  std::vector<Diagnostic> diagnostics;
  const bool ok = run_frontend(source, file, "", nullptr, program, diagnostics);
  std::string messages;
  for (const Diagnostic& d : diagnostics) messages += d.format();
  EXPECT_TRUE(ok) << messages;
  EXPECT_TRUE(diagnostics.empty()) << messages;
  return program;
}

// The formatted diagnostics of a program that must fail ("" if it compiled).
inline std::string compile_errors(const std::string& source,
                                  const std::string& file = "test.mask") {
  ir::Program program;
  std::vector<Diagnostic> diagnostics;
  if (run_frontend(source, file, "", nullptr, program, diagnostics)) return "";
  std::string messages;
  for (const Diagnostic& d : diagnostics) messages += d.format();
  return messages;
}

// Consecutive segments of the given lengths from `origin`.
inline Segments segments_of(const std::vector<int64_t>& lengths, int64_t origin = 0) {
  Segments s;
  for (int64_t len : lengths) {
    s.starts.push_back(origin);
    origin += len;
    s.ends.push_back(origin);
  }
  return s;
}

}  // namespace cm::lang::testing
