// Building diagnostics for positions in a lowered program (after the front end has finished).
#pragma once

#include <compilemask/compilemask.h>

#include "ir/ir.h"

#include <algorithm>
#include <string>

namespace cm::passes {

inline Diagnostic make_diagnostic(const ir::Program& program, ir::SourceLoc loc,
                                  std::string message) {
  Diagnostic d;
  d.file = program.file;
  d.line = loc.line;
  d.column = loc.column;
  d.message = std::move(message);
  if (loc.line >= 1 && static_cast<size_t>(loc.line) <= program.source_lines.size()) {
    d.source_line = program.source_lines[static_cast<size_t>(loc.line) - 1];
  }
  return d;
}

// The source from `begin` up to `end` (exclusive), its lines without comments and joined by one
// space: the text of a statement, quoted in errors raised at specialize time.
inline std::string source_between(const ir::Program& program, ir::SourceLoc begin,
                                  ir::SourceLoc end) {
  std::string text;
  for (int line = std::max(begin.line, 1);
       line <= end.line && static_cast<size_t>(line) <= program.source_lines.size(); ++line) {
    std::string part = program.source_lines[static_cast<size_t>(line) - 1];
    const auto column = [&](ir::SourceLoc loc) {
      return std::min(part.size(), static_cast<size_t>(std::max(loc.column - 1, 0)));
    };
    if (line == end.line) part.erase(column(end));
    if (line == begin.line) part.erase(0, column(begin));
    part.erase(std::min(part.find('#'), part.size()));
    part.erase(part.find_last_not_of(" \t") + 1);
    part.erase(0, std::min(part.find_first_not_of(" \t"), part.size()));
    if (!part.empty()) text += (text.empty() ? "" : " ") + part;
  }
  return text;
}

// "file:line:col: message" for errors raised at specialize time.
inline std::string located(const ir::Program& program, ir::SourceLoc loc,
                           const std::string& message) {
  return program.file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " +
         message;
}

}  // namespace cm::passes
