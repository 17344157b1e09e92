// Building diagnostics for positions in a lowered program (after the front end has finished).
#pragma once

#include <compilemask/compilemask.h>

#include "ir/ir.h"

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

// "file:line:col: message" for errors raised at specialize time.
inline std::string located(const ir::Program& program, ir::SourceLoc loc,
                           const std::string& message) {
  return program.file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " +
         message;
}

}  // namespace cm::passes
