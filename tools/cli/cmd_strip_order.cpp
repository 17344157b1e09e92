// `compilemask strip-order`: prints the permutation between a row-major grid of tokens and the
// strip order a mask written on strip_grid expects (cm::strip_order, token_order.h), so that
// scripts and programs without the C++ or Python API can reorder their tensors.
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"

#include <compilemask/token_order.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace cm::cli {
namespace {

// The value of --flag, at least `min`; `fallback` when absent, or a UsageError when the flag is
// required (no fallback).
int64_t grid_flag(const ParsedArgs& args, const std::string& flag, int64_t min,
                  std::optional<int64_t> fallback = std::nullopt) {
  if (!fallback && !args.has(flag)) throw UsageError("strip-order needs --" + flag);
  return integer_flag(args, flag, fallback.value_or(0), min, std::numeric_limits<int64_t>::max());
}

int run_strip_order(const ParsedArgs& args) {
  StripGrid grid;
  grid.start = grid_flag(args, "start", 0, 0);
  grid.frames = grid_flag(args, "frames", 1, 1);
  grid.rows = grid_flag(args, "rows", 1);
  grid.cols = grid_flag(args, "cols", 1);
  grid.strip = grid_flag(args, "strip", 1);
  // cm::strip_order checks that the grid fits and names the rule a bad one breaks.
  const std::vector<int64_t> order = strip_order(grid, grid_flag(args, "total", 1));
  std::string text;
  text.reserve(order.size() * 7);
  for (const int64_t token : order) text += std::to_string(token) + "\n";
  write_text_output(args.value("output"), text);
  return kExitOk;
}

}  // namespace

Command strip_order_command() {
  return {{"strip-order",
           "--rows R --cols C --strip W --total N [--start S] [--frames F] [-o FILE]",
           "print the row-major token of each position of a strip order",
           "Prints, one per line, the permutation `order` of the N tokens of a sequence whose\n"
           "F frames of R x C grid tokens, from token S, are laid out in strips of W columns\n"
           "(docs/language.md, \"Strip order\"): position i of the strip-ordered sequence holds\n"
           "row-major token order[i]. Gather q, k and v along the sequence with it before\n"
           "attending with a strip_grid mask, and restore the output with its inverse. Tokens\n"
           "outside the grid keep their places. A grid that does not fit is an error naming\n"
           "the rule; exit code 1.",
           {{"rows", 0, "R", false, "grid rows per frame"},
            {"cols", 0, "C", false, "grid columns"},
            {"strip", 0, "W", false, "columns per strip (W >= C is row-major)"},
            {"total", 0, "N", false, "tokens in the whole sequence"},
            {"start", 0, "S", false, "the grid's first token (default 0)"},
            {"frames", 0, "F", false, "frames of the grid (default 1)"},
            {"output", 'o', "FILE", false, "write the permutation to FILE instead of stdout"}},
           0},
          run_strip_order};
}

}  // namespace cm::cli
