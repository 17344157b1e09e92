// The front end's entry point: source text to an ir::Program, or diagnostics.
#pragma once

#include <compilemask/compilemask.h>

#include <string>
#include <vector>

#include "ir/ir.h"

namespace cm::lang {

// Runs parse -> check -> lower. On failure returns false and appends diagnostics (each with
// file, line, column, message, source_line). If dump_after is "parse" or "check", stores the
// AST text after that pass in *dump (when dump != nullptr).
bool run_frontend(const std::string& source, const std::string& file, const std::string& dump_after,
                  std::string* dump, ir::Program& program, std::vector<Diagnostic>& diagnostics);

}  // namespace cm::lang
