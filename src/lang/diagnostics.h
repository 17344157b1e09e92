// Collects the front end's error messages, each with its file, position and source line, and
// stops collecting after a bounded number so that hostile input cannot flood the caller.
#pragma once

#include <compilemask/compilemask.h>

#include <string>
#include <vector>

#include "ir/ir.h"

namespace cm::lang {

using ir::SourceLoc;

// Splits source text into lines (without their '\n' or a trailing '\r').
std::vector<std::string> split_lines(const std::string& source);

class DiagnosticSink {
 public:
  static constexpr int kMaxErrors = 20;

  DiagnosticSink(std::string file, const std::vector<std::string>& lines,
                 std::vector<Diagnostic>& out)
      : file_(std::move(file)), lines_(lines), out_(out) {}

  // Records an error at `loc` unless kMaxErrors have already been recorded.
  void error(SourceLoc loc, std::string message);
  int count() const { return count_; }
  bool full() const { return count_ >= kMaxErrors; }

 private:
  std::string file_;
  const std::vector<std::string>& lines_;
  std::vector<Diagnostic>& out_;
  int count_ = 0;
};

}  // namespace cm::lang
