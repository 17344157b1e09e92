// cm::compile: the compiler driver, a straight list of passes (Halide's Lower.cpp style).
// Each pass can be dumped with CompileOptions::dump_after.
#include <compilemask/compilemask.h>

#include "ir/ir.h"
#include "lang/frontend.h"
#include "passes/classify.h"
#include "passes/normalize.h"
#include "passes/simplify.h"

namespace cm {

std::vector<std::string> pass_names() {
  return {"parse", "check", "lower", "simplify", "normalize", "classify"};
}

CompileResult compile(const std::string& source, const std::string& file,
                      const CompileOptions& options, std::string* dump) {
  CompileResult result;
  auto program = std::make_shared<ir::Program>();
  const std::string& after = options.dump_after;
  auto dump_ir = [&](const char* pass) {
    if (after == pass && dump != nullptr) *dump = ir::print(*program);
  };
  if (!lang::run_frontend(source, file, after, dump, *program, result.diagnostics)) return result;
  dump_ir("lower");
  passes::simplify(*program);
  dump_ir("simplify");
  if (!passes::normalize(*program, result.diagnostics)) return result;
  dump_ir("normalize");
  if (!passes::classify(*program, result.diagnostics)) return result;
  dump_ir("classify");
  result.mask.emplace(std::move(program));
  return result;
}

}  // namespace cm
