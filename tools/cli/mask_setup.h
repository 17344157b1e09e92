// What several commands share: reading input and writing output files, compiling the mask
// file, and turning the shape, tiling and -p flags into a cm::Plan.
#pragma once

#include "args.h"

#include <compilemask/compilemask.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cm::cli {

// The flags accepted by every command that specializes a mask (-p, -n, --nq, --nk, --tile).
std::vector<FlagSpec> plan_flags();

// The help paragraph describing -p value forms, appended to the plan commands' descriptions.
std::string param_syntax_help();

// The whole content of `path`. Throws InputError("cannot read <what> '<path>'") if it cannot be
// read.
std::string read_input_file(const std::string& path, const std::string& what);

// Writes `size` bytes to `path`, replacing it. Throws InputError("cannot write '<path>'").
void write_output_file(const std::string& path, const void* data, size_t size);

// Writes `text` to `path` (write_output_file), or to stdout when there is no path (no -o).
void write_text_output(const std::optional<std::string>& path, const std::string& text);

// Reads `path` and compiles it. Throws InputError if the file cannot be read; prints the
// diagnostics to stderr and throws InputError("N error(s)") if it does not compile.
Mask load_mask(const std::string& path, const CompileOptions& options = {},
               std::string* dump = nullptr);

// "NAME(p: type, ...)"
std::string signature(const Mask& mask);

// Tile sizes from --tile MxN (default 128x128). Throws UsageError naming --tile and the rule.
Tiling parse_tiling(const ParsedArgs& args);

// nq and nk from -n / --nq / --nk; batch and heads are left at 1. Throws UsageError if a length
// is missing or malformed.
Dims parse_lengths(const ParsedArgs& args);

// The shape and the one mask (b, h) that `show` and `slices` look at: the lengths as
// parse_lengths reads them, --b and --h (default 0), and --batch and --heads, which default to
// just enough to hold b and h. Throws UsageError when b or h is outside them.
struct OneMask {
  Dims dims;
  int32_t b = 0;
  int32_t h = 0;
};
OneMask parse_one_mask(const ParsedArgs& args);

// The flags parse_one_mask reads besides the lengths (--b, --h, --batch, --heads); `what`
// says what the mask is picked for ("to show").
std::vector<FlagSpec> one_mask_flags(const std::string& what);

// The -p flags parsed against `mask`'s parameters (parse_params, whose errors propagate).
Params mask_params(const Mask& mask, const ParsedArgs& args);

// The flags of the commands whose plan may hold a context-parallel rank's query rows (compile,
// run, show): --cp RANK/WORLD and --cp-contiguous.
std::vector<FlagSpec> context_parallel_flags();

// The query positions of --cp's rank among nq query rows (cm::context_parallel_positions,
// balanced unless --cp-contiguous), or none without --cp. Throws UsageError for a --cp that is
// not RANK/WORLD or --cp-contiguous without --cp; cm::Error names the shard's rules.
std::vector<int32_t> rank_positions(const ParsedArgs& args, int64_t nq);

// Parses the -p flags against `mask` and specializes it, for the rank's rows under --cp.
// cm::Error from specialize propagates.
Plan make_plan(const Mask& mask, const ParsedArgs& args, const Dims& dims, const Tiling& tiling);

}  // namespace cm::cli
