// `compilemask compile FILE -p ...`: specializes a mask and emits its stats or descriptor, or
// dumps the program after a compiler pass.
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"
#include "plan_output.h"

#include <compilemask/estimate.h>

#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <span>

namespace cm::cli {
namespace {

std::string pass_list() {
  std::string out;
  for (const std::string& p : pass_names()) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// --dump-after: prints the program after that pass; needs no parameters or shape.
int dump_after(const std::string& file, const std::string& pass) {
  bool known = false;
  for (const std::string& p : pass_names()) known = known || p == pass;
  if (!known) {
    throw UsageError("--dump-after: unknown pass '" + pass + "' (passes: " + pass_list() + ")");
  }
  std::string dump;
  load_mask(file, CompileOptions{pass}, &dump);
  std::cout << dump << (dump.empty() || dump.back() != '\n' ? "\n" : "");
  return kExitOk;
}

// The sm90 kernels' expected times for a plan (include/compilemask/estimate.h). The backward's
// needs the mask counted at its 64-row halves.
struct Estimate {
  double forward_seconds;
  double backward_seconds;
};

Estimate estimate(const Mask& mask, const Params& params, const Dims& dims, const Plan& plan,
                  std::span<const int32_t> query_positions) {
  const int64_t masks = int64_t{dims.batch} * dims.heads;
  const Tiling halves = backward_halves(plan.tiling());
  return {estimated_forward_seconds(plan.stats(), plan.tiling(), masks),
          estimated_backward_seconds(mask.count_tiles(params, dims, halves, query_positions),
                                     halves, masks)};
}

std::string milliseconds(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f ms", seconds * 1e3);
  return buffer;
}

std::string estimate_text(const Estimate& e) {
  return "estimate (sm90 kernels on an H200, head dim 128; the tiles' work only, to rank plans):\n"
         "  forward:            " +
         milliseconds(e.forward_seconds) +
         "\n"
         "  forward + backward: " +
         milliseconds(e.forward_seconds + e.backward_seconds) + "\n";
}

std::string estimate_json(const Estimate& e) {
  char buffer[96];
  std::snprintf(buffer, sizeof(buffer), "{\"forward_seconds\": %.9f, \"backward_seconds\": %.9f}",
                e.forward_seconds, e.backward_seconds);
  return buffer;
}

int run_compile(const ParsedArgs& args) {
  const std::string& file = args.positional[0];
  if (const std::optional<std::string> pass = args.value("dump-after")) {
    return dump_after(file, *pass);
  }
  const std::string emit = args.value("emit").value_or("stats");
  if (emit != "stats" && emit != "descriptor" && emit != "json") {
    throw UsageError("--emit: expected stats, descriptor or json, got '" + emit + "'");
  }
  const std::optional<std::string> out_path = args.value("output");
  if (emit == "descriptor" && !out_path) {
    throw UsageError("--emit descriptor writes binary data: pass -o FILE");
  }
  Dims dims = parse_lengths(args);
  dims.batch =
      static_cast<int32_t>(integer_flag(args, "batch", 1, 1, std::numeric_limits<int32_t>::max()));
  dims.heads =
      static_cast<int32_t>(integer_flag(args, "heads", 1, 1, std::numeric_limits<int32_t>::max()));
  const Tiling tiling = parse_tiling(args);

  if (args.has("estimate") && emit == "descriptor") {
    throw UsageError("--estimate adds to the stats or the JSON, not to --emit descriptor");
  }

  const Mask mask = load_mask(file);
  const Params params = mask_params(mask, args);
  const std::vector<int32_t> positions = rank_positions(args, dims.nq);
  const Plan plan = mask.specialize(params, dims, tiling, positions);
  if (emit == "descriptor") {
    write_output_file(*out_path, plan.blob(), plan.size_bytes());
    std::cout << "wrote " << plan.size_bytes() << " bytes to " << *out_path << "\n";
    return kExitOk;
  }
  std::optional<Estimate> times;
  if (args.has("estimate")) times = estimate(mask, params, dims, plan, positions);
  const std::string text =
      emit == "json"
          ? plan_json(plan, times ? ",\n\"estimate\": " + estimate_json(*times) : std::string())
          : plan.stats().format() + (times ? estimate_text(*times) : std::string());
  write_text_output(out_path, text);
  return kExitOk;
}

}  // namespace

Command compile_command() {
  std::vector<FlagSpec> flags = plan_flags();
  for (FlagSpec& f : context_parallel_flags()) flags.push_back(std::move(f));
  flags.insert(
      flags.end(),
      {
          {"batch", 0, "B", false, "batch size: b ranges over [0, B) (default 1)"},
          {"heads", 0, "H", false, "query heads: h ranges over [0, H) (default 1)"},
          {"emit", 0, "WHAT", false,
           "stats (default: human-readable), json (stats and the decoded descriptor) or "
           "descriptor (the binary blob, needs -o)"},
          {"output", 'o', "FILE", false, "write the output to FILE instead of stdout"},
          {"estimate", 0, "", false,
           "add the sm90 kernels' expected forward and forward + backward times on an H200 at "
           "head dim 128, from the tile counts (include/compilemask/estimate.h)"},
          {"dump-after", 0, "PASS", false, "print the program after compiler pass PASS and stop"},
      });
  return {{"compile", "FILE -p NAME=VALUE... (-n N | --nq N --nk N) [options]",
           "specialize a mask and emit its descriptor or stats",
           "Compiles FILE, binds its parameters for the given shape and tiling, and builds the\n"
           "descriptor. Prints the plan stats, or writes the descriptor blob with\n"
           "--emit descriptor -o FILE. --dump-after PASS prints the compiler's view of the\n"
           "program after that pass instead (no parameters needed)." +
               param_syntax_help(),
           flags},
          run_compile};
}

}  // namespace cm::cli
