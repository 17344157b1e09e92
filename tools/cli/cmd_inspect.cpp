// `compilemask inspect FILE`: checks a descriptor file (what `compile --emit descriptor`
// writes) against every rule of docs/descriptor.md and prints its shape and stats, or all of
// it as JSON.
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"
#include "plan_output.h"

#include <compilemask/descriptor.h>

#include <iostream>

namespace cm::cli {
namespace {

int run_inspect(const ParsedArgs& args) {
  const std::string& file = args.positional[0];
  const std::string emit = args.value("emit").value_or("stats");
  if (emit != "stats" && emit != "json") {
    throw UsageError("--emit: expected stats or json, got '" + emit + "'");
  }
  const std::string bytes = read_input_file(file, "descriptor file");
  const Plan plan = [&] {
    try {
      return Plan::from_descriptor(bytes.data(), bytes.size());
    } catch (const Error& e) {
      throw InputError(file + ": " + e.what());
    }
  }();
  if (emit == "json") {
    std::cout << plan_json(plan);
    return kExitOk;
  }
  const Dims& d = plan.dims();
  std::cout << file << ": a valid descriptor (version " << desc::kVersion << ") for nq=" << d.nq
            << " nk=" << d.nk << ", batch " << d.batch << ", heads " << d.heads << ", tiles "
            << plan.tiling().m << "x" << plan.tiling().n << "\n"
            << plan.stats().format();
  return kExitOk;
}

}  // namespace

Command inspect_command() {
  return {{"inspect",
           "FILE [--emit stats|json]",
           "check a descriptor file and print its stats",
           "Reads FILE, a descriptor written by 'compile --emit descriptor -o FILE' (or by\n"
           "any other writer of docs/descriptor.md), checks it against every rule of the\n"
           "format, and prints its shape and stats, or with --emit json the stats and the\n"
           "whole decoded descriptor. A broken rule is reported with its name; exit code 1.",
           {{"emit", 0, "WHAT", false,
             "stats (default: human-readable) or json (stats and the decoded descriptor)"}}},
          run_inspect};
}

}  // namespace cm::cli
