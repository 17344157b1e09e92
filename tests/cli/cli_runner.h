// Runs the built compilemask binary in a child process and captures its exit code and output,
// for the CLI tests.
#pragma once

#include <string>
#include <vector>

namespace cm::cli_test {

struct CliResult {
  int exit_code = -1;  // 128 + signal number if the tool was killed by a signal
  std::string out;
  std::string err;
};

// Runs `compilemask args...` (no shell involved).
CliResult run_cli(const std::vector<std::string>& args);

// A fresh per-process scratch directory, and a file written into it.
std::string scratch_dir();
std::string write_scratch_file(const std::string& name, const std::string& content);
std::string read_file(const std::string& path);

// Path of a bundled example, e.g. example("causal").
std::string example(const std::string& name);

bool contains(const std::string& text, const std::string& part);

}  // namespace cm::cli_test
