// libFuzzer target for the front end: arbitrary bytes go through run_frontend, alternating the
// dump passes. Beyond "no crash, no hang, no sanitizer report" it checks the entry point's
// contract: failure comes with diagnostics, success without, and every diagnostic formats.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lang/frontend.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  const char* dump_after = size % 2 == 0 ? "parse" : "check";
  cm::ir::Program program;
  std::vector<cm::Diagnostic> diagnostics;
  std::string dump;
  const bool ok =
      cm::lang::run_frontend(source, "fuzz.mask", dump_after, &dump, program, diagnostics);
  if (ok != diagnostics.empty()) __builtin_trap();
  for (const cm::Diagnostic& d : diagnostics) {
    if (d.line < 1 || d.column < 1 || d.format().empty()) __builtin_trap();
  }
  if (ok && program.regions.size() > 0 && program.slot_names.size() < cm::ir::kFirstFreeSlot) {
    __builtin_trap();
  }
  return 0;
}
