// `compilemask check FILE`: compiles a mask program and reports diagnostics or its signature.
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"

#include <iostream>

namespace cm::cli {
namespace {

int run_check(const ParsedArgs& args) {
  const Mask mask = load_mask(args.positional[0]);
  std::cout << "ok: mask " << signature(mask) << "\n";
  return kExitOk;
}

}  // namespace

Command check_command() {
  return {{"check",
           "FILE",
           "parse and type-check a mask program",
           "Compiles FILE and prints its diagnostics (file:line:col with a caret), or\n"
           "'ok: mask NAME(PARAMS)' when it is valid. Exit code 1 if there are errors.",
           {}},
          run_check};
}

}  // namespace cm::cli
