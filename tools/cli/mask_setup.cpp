// Implementation of the shared mask loading and plan flags (see mask_setup.h).
#include "mask_setup.h"

#include "cli_error.h"
#include "params.h"

#include <compilemask/context_parallel.h>

#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

namespace cm::cli {

std::vector<FlagSpec> plan_flags() {
  return {
      {"param", 'p', "NAME=VALUE", true, "bind a parameter (VALUE forms below)"},
      {"n", 'n', "N", false, "query and key length"},
      {"nq", 0, "N", false, "query length (overrides -n)"},
      {"nk", 0, "N", false, "key length (overrides -n)"},
      {"tile", 0, "MxN", false, "tile size, query rows x key columns (default 128x128)"},
  };
}

std::string param_syntax_help() {
  return "\n\nparameter values (-p NAME=VALUE):\n"
         "  int        W=4096\n"
         "  int[]      ctx=32,32,16\n"
         "  segments   docs=0,100,250,512 (boundaries), docs=len:100,150,262 (lengths from 0)\n"
         "             or docs=0:100,120:250 (start:end pairs; sorted, non-overlapping)\n"
         "  segment    prompt=0:128\n"
         "  any        NAME=@FILE reads the value from FILE (items split by whitespace or commas)";
}

std::string read_input_file(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InputError("cannot read " + what + " '" + path + "'");
  std::ostringstream content;
  content << file.rdbuf();
  return content.str();
}

void write_output_file(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) throw InputError("cannot write '" + path + "'");
}

void write_text_output(const std::optional<std::string>& path, const std::string& text) {
  if (path) {
    write_output_file(*path, text.data(), text.size());
  } else {
    std::cout << text;
  }
}

Mask load_mask(const std::string& path, const CompileOptions& options, std::string* dump) {
  CompileResult result = compile(read_input_file(path, "mask file"), path, options, dump);
  if (!result) {
    for (const Diagnostic& d : result.diagnostics) std::cerr << d.format();
    const size_t n = result.diagnostics.size();
    throw InputError(path + ": " + std::to_string(n) + (n == 1 ? " error" : " errors"));
  }
  return *result.mask;
}

std::string signature(const Mask& mask) {
  return mask.name() + "(" + declared_list(mask.params()) + ")";
}

Tiling parse_tiling(const ParsedArgs& args) {
  const std::optional<std::string> text = args.value("tile");
  if (!text) return Tiling{};
  // Only the syntax is checked here; the size rules belong to specialize, which names them.
  const size_t x = text->find('x');
  const std::optional<int64_t> m = to_integer(text->substr(0, x));
  const std::optional<int64_t> n =
      x == std::string::npos ? std::nullopt : to_integer(text->substr(x + 1));
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (!m || !n || *m < 1 || *m > kMax || *n < 1 || *n > kMax) {
    throw UsageError("--tile: expected MxN with positive integers M and N (e.g. 128x64), got '" +
                     *text + "'");
  }
  return Tiling{static_cast<int32_t>(*m), static_cast<int32_t>(*n)};
}

Dims parse_lengths(const ParsedArgs& args) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t n = integer_flag(args, "n", -1, 0, kMax);
  Dims dims;
  dims.nq = integer_flag(args, "nq", n, 0, kMax);
  dims.nk = integer_flag(args, "nk", n, 0, kMax);
  if (dims.nq < 0) throw UsageError("the query length is not set: pass -n N or --nq N");
  if (dims.nk < 0) throw UsageError("the key length is not set: pass -n N or --nk N");
  return dims;
}

namespace {

// b (or h) and the batch (or heads) extent of the plan: the extent defaults to just enough to
// contain the index.
std::pair<int32_t, int32_t> index_and_extent(const ParsedArgs& args, const std::string& index_flag,
                                             const std::string& extent_flag) {
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  const int64_t index = integer_flag(args, index_flag, 0, 0, kMaxInt - 1);
  const int64_t extent = integer_flag(args, extent_flag, index + 1, 1, kMaxInt);
  if (index >= extent) {
    throw UsageError("--" + index_flag + " " + std::to_string(index) + " must be less than --" +
                     extent_flag + " " + std::to_string(extent));
  }
  return {static_cast<int32_t>(index), static_cast<int32_t>(extent)};
}

}  // namespace

OneMask parse_one_mask(const ParsedArgs& args) {
  OneMask out{parse_lengths(args)};
  std::tie(out.b, out.dims.batch) = index_and_extent(args, "b", "batch");
  std::tie(out.h, out.dims.heads) = index_and_extent(args, "h", "heads");
  return out;
}

std::vector<FlagSpec> one_mask_flags(const std::string& what) {
  return {
      {"b", 0, "B", false, "batch index of the mask " + what + " (default 0)"},
      {"h", 0, "H", false, "head index of the mask " + what + " (default 0)"},
      {"batch", 0, "B", false, "batch size of the plan (default: b + 1)"},
      {"heads", 0, "H", false, "query heads of the plan (default: h + 1)"},
  };
}

Params mask_params(const Mask& mask, const ParsedArgs& args) {
  return parse_params(args.values("param"), mask.params(), mask.name());
}

std::vector<FlagSpec> context_parallel_flags() {
  return {
      {"cp", 0, "RANK/WORLD", false,
       "plan only the query rows of context-parallel rank RANK of WORLD (chunks RANK and "
       "2 WORLD - 1 - RANK of 2 WORLD; the query length a multiple of 2 WORLD)"},
      {"cp-contiguous", 0, "", false, "with --cp, the RANK-th of WORLD contiguous chunks instead"},
  };
}

std::vector<int32_t> rank_positions(const ParsedArgs& args, int64_t nq) {
  const std::optional<std::string> text = args.value("cp");
  if (!text) {
    if (args.has("cp-contiguous")) throw UsageError("--cp-contiguous applies only with --cp");
    return {};
  }
  const size_t slash = text->find('/');
  const std::optional<int64_t> rank = to_integer(text->substr(0, slash));
  const std::optional<int64_t> world =
      slash == std::string::npos ? std::nullopt : to_integer(text->substr(slash + 1));
  if (!rank || !world) {
    throw UsageError("--cp: expected RANK/WORLD with integers RANK and WORLD (e.g. 3/8), got '" +
                     *text + "'");
  }
  return context_parallel_positions({nq, *world, *rank, !args.has("cp-contiguous")});
}

Plan make_plan(const Mask& mask, const ParsedArgs& args, const Dims& dims, const Tiling& tiling) {
  return mask.specialize(mask_params(mask, args), dims, tiling, rank_positions(args, dims.nq));
}

}  // namespace cm::cli
