// libFuzzer target for specialization, the compiler's runtime half: one of the bundled
// examples, with parameter values, lengths, batch, heads and tiling all drawn from the input
// (including values that break the parameters' rules). specialize must either throw cm::Error
// (and count_tiles with it) or return a plan whose descriptor passes verification and agrees
// exactly with the brute-force evaluation of the program, its counts with count_tiles
// (tests/support/agreement.h), for every (b, h); any other exception, a trap or a sanitizer
// report is a finding.
#include <compilemask/compilemask.h>

#include "agreement.h"
#include "descriptor/decode.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

// The bundled examples, compiled once.
const std::vector<cm::Mask>& examples() {
  static const std::vector<cm::Mask> masks = [] {
    std::vector<cm::Mask> out;
    for (const auto& entry : std::filesystem::directory_iterator(CM_SOURCE_DIR "/examples")) {
      if (entry.path().extension() != ".mask") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      cm::CompileResult compiled = cm::compile(text.str(), entry.path().filename().string());
      if (!compiled) __builtin_trap();  // the bundled examples compile
      out.push_back(*compiled.mask);
    }
    return out;
  }();
  return masks;
}

// Mostly small values, with edges: negative, zero, past the lengths, far past int32.
int64_t draw_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return in.ConsumeIntegralInRange<int64_t>(-1000, 1000);
    case 1:
      return in.ConsumeIntegralInRange<int64_t>(-(int64_t{1} << 40), int64_t{1} << 40);
    default:
      return in.ConsumeIntegralInRange<int64_t>(-3, 80);
  }
}

std::vector<int64_t> draw_list(FuzzedDataProvider& in) {
  std::vector<int64_t> values(in.ConsumeIntegralInRange<size_t>(0, 6));
  for (int64_t& v : values) v = draw_value(in);
  return values;
}

cm::ParamValue draw_param(FuzzedDataProvider& in, const std::string& type) {
  if (type == "int") return draw_value(in);
  if (type == "int[]") return draw_list(in);
  cm::Segments segments;
  const size_t count = type == "segment" ? 1 : in.ConsumeIntegralInRange<size_t>(0, 5);
  for (size_t i = 0; i < count; ++i) {
    segments.starts.push_back(draw_value(in));
    segments.ends.push_back(draw_value(in));
  }
  return segments;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::vector<cm::Mask>& masks = examples();
  const cm::Mask& mask = masks[in.ConsumeIntegralInRange<size_t>(0, masks.size() - 1)];
  cm::Params params;
  for (const cm::ParamInfo& p : mask.params()) params[p.name] = draw_param(in, p.type);
  cm::Dims dims;
  dims.nq = in.ConsumeIntegralInRange<int64_t>(-2, 160);
  dims.nk = in.ConsumeBool() ? dims.nq : in.ConsumeIntegralInRange<int64_t>(-2, 160);
  dims.batch = in.ConsumeIntegralInRange<int32_t>(0, 3);
  dims.heads = in.ConsumeIntegralInRange<int32_t>(0, 3);
  const cm::Tiling tiling{in.ConsumeIntegralInRange<int32_t>(0, 70),
                          in.ConsumeIntegralInRange<int32_t>(0, 70)};
  std::optional<cm::Plan> plan;
  try {
    plan.emplace(mask.specialize(params, dims, tiling));
  } catch (const cm::Error&) {
    // Bad input, rejected with a message. count_tiles checks the same rules (the descriptor's
    // 4 GiB limit aside, out of reach at these sizes) and must reject it too.
    try {
      (void)mask.count_tiles(params, dims, tiling);
    } catch (const cm::Error&) {
      return 0;
    }
    std::fprintf(stderr, "%s: count_tiles accepted what specialize rejected\n",
                 mask.name().c_str());
    __builtin_trap();
  }
  // From here on an exception is a finding: libFuzzer reports it as a crash.
  cm::verify_descriptor(plan->blob(), plan->size_bytes());
  const std::string disagreement = cm::testing::disagreement(mask, params, dims, tiling);
  if (!disagreement.empty()) {
    std::fprintf(stderr, "%s: %s\n", mask.name().c_str(), disagreement.c_str());
    __builtin_trap();
  }
  return 0;
}
