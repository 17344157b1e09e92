// `compilemask slices FILE -p ...`: the visible pairs of one (b, h) mask as attention slices
// (Mask::slices), as text or as the JSON arrays MagiAttention's flexible attention takes.
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"

#include <sstream>

namespace cm::cli {
namespace {

const char* shape_name(SliceShape shape) {
  switch (shape) {
    case SliceShape::kFull:
      return "full";
    case SliceShape::kCausal:
      return "causal";
    case SliceShape::kInverseCausal:
      return "inv-causal";
    case SliceShape::kBiCausal:
      return "bi-causal";
  }
  return "?";
}

// One slice a line: "q [0, 100) k [0, 100) causal".
std::string slices_text(const std::string& name, const OneMask& m,
                        const std::vector<AttnSlice>& slices) {
  std::ostringstream out;
  out << name << ": mask (b=" << m.b << ", h=" << m.h << "): nq=" << m.dims.nq
      << " nk=" << m.dims.nk << ", " << slices.size()
      << (slices.size() == 1 ? " slice\n" : " slices\n");
  for (const AttnSlice& s : slices) {
    out << "q [" << s.q_begin << ", " << s.q_end << ") k [" << s.k_begin << ", " << s.k_end << ") "
        << shape_name(s.shape) << "\n";
  }
  return out.str();
}

// {"q_ranges": [[q_begin, q_end], ...], "k_ranges": [...], "attn_type_map": [shape codes]}.
std::string slices_json(const std::vector<AttnSlice>& slices) {
  std::ostringstream q, k, types;
  for (size_t i = 0; i < slices.size(); ++i) {
    const char* sep = i == 0 ? "" : ", ";
    q << sep << "[" << slices[i].q_begin << ", " << slices[i].q_end << "]";
    k << sep << "[" << slices[i].k_begin << ", " << slices[i].k_end << "]";
    types << sep << static_cast<int>(slices[i].shape);
  }
  return "{\"q_ranges\": [" + q.str() + "],\n \"k_ranges\": [" + k.str() +
         "],\n \"attn_type_map\": [" + types.str() + "]}\n";
}

int run_slices(const ParsedArgs& args) {
  const OneMask one = parse_one_mask(args);
  const std::string emit = args.value("emit").value_or("text");
  if (emit != "text" && emit != "json") {
    throw UsageError("--emit: expected text or json, got '" + emit + "'");
  }
  const Mask mask = load_mask(args.positional[0]);
  const std::vector<AttnSlice> slices =
      mask.slices(mask_params(mask, args), one.dims, one.b, one.h);
  write_text_output(args.value("output"),
                    emit == "json" ? slices_json(slices) : slices_text(mask.name(), one, slices));
  return kExitOk;
}

}  // namespace

Command slices_command() {
  std::vector<FlagSpec> flags = plan_flags();
  std::erase_if(flags, [](const FlagSpec& f) { return f.name == "tile"; });  // no tiles here
  for (FlagSpec& f : one_mask_flags("to slice")) flags.push_back(std::move(f));
  flags.insert(flags.end(), {
                                {"emit", 0, "FORMAT", false, "text (default) or json"},
                                {"output", 'o', "OUT", false, "write to OUT instead of stdout"},
                            });
  return {{"slices", "FILE -p NAME=VALUE... (-n N | --nq N --nk N) [options]",
           "the visible pairs of a mask as attention slices (MagiAttention's form)",
           "Specializes FILE's mask (b, h) to its rows and prints them as slices that cover\n"
           "each visible pair once: a query range, a key range and a shape, where row i of a\n"
           "slice of Lq rows sees its whole key range (full), the keys below\n"
           "k_end - Lq + 1 + i (causal, aligned at the bottom right), those from k_begin + i\n"
           "(inv-causal), or both (bi-causal). --emit json writes q_ranges, k_ranges and\n"
           "attn_type_map (0 full, 1 causal, 2 inv-causal, 3 bi-causal), the arguments of\n"
           "MagiAttention's flex_flash_attn_func and magi_attn_flex_key." +
               param_syntax_help(),
           flags},
          run_slices};
}

}  // namespace cm::cli
