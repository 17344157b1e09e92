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

// The source from loc to the end of its statement (";" or "}") or line, without a comment or
// trailing blanks: the text of a statement that fits its line, quoted in errors raised at
// specialize time.
inline std::string source_from(const ir::Program& program, ir::SourceLoc loc) {
  if (loc.line < 1 || static_cast<size_t>(loc.line) > program.source_lines.size()) return "";
  std::string text = program.source_lines[static_cast<size_t>(loc.line) - 1];
  text.erase(0, std::min(text.size(), static_cast<size_t>(std::max(loc.column - 1, 0))));
  text.erase(std::min(text.find_first_of("#;}"), text.size()));
  text.erase(text.find_last_not_of(" \t") + 1);
  return text;
}

// "file:line:col: message" for errors raised at specialize time.
inline std::string located(const ir::Program& program, ir::SourceLoc loc,
                           const std::string& message) {
  return program.file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " +
         message;
}

}  // namespace cm::passes
