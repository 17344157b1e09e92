// Parameter binding (see bind.h).
#include "specialize/bind.h"

#include <limits>

namespace cm {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

std::string signature(const ir::Program& p) {
  return p.name + "(" + ir::param_list(p.params) + ")";
}

// `element` is the index of an int[]'s checked element, -1 for an int. The message is built
// only on failure: an int[] parameter may hold millions of elements (per-row bounds).
void check_bound(const ir::ParamDecl& decl, int64_t value, int64_t element) {
  if (decl.min && value < *decl.min) {
    const std::string what = element < 0 ? "" : " element " + std::to_string(element);
    throw Error("parameter '" + decl.name + "'" + what +
                " must be >= " + std::to_string(*decl.min) + ", got " + std::to_string(value) +
                " (declared '" + ir::param_text(decl) + "')");
  }
}

const char* value_kind(const ParamValue& v) {
  if (std::holds_alternative<int64_t>(v)) return "an integer";
  if (std::holds_alternative<std::vector<int64_t>>(v)) return "an integer array";
  return "a segment list";
}

std::string segment_text(const Segments& s, size_t i) {
  return "segment " + std::to_string(i) + " [" + std::to_string(s.starts[i]) + ", " +
         std::to_string(s.ends[i]) + ")";
}

void check_segments(const std::string& name, const Segments& s, bool single) {
  const std::string where = "parameter '" + name + "': ";
  if (s.starts.size() != s.ends.size()) {
    throw Error(where + "segment starts and ends must have the same count");
  }
  if (single && s.size() != 1) {
    throw Error(where + "a segment parameter takes exactly one segment, got " +
                std::to_string(s.size()));
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.starts[i] < 0) {
      throw Error(where + segment_text(s, i) + " starts below 0; segment bounds must be >= 0");
    }
    if (s.ends[i] < s.starts[i]) {
      throw Error(where + segment_text(s, i) + " ends before it starts");
    }
    if (s.ends[i] > kInt32Max) {
      throw Error(where + segment_text(s, i) + " ends past 2^31-1");
    }
    if (i > 0 && s.starts[i] < s.ends[i - 1]) {
      throw Error(where + segment_text(s, i) + " starts before the end of " +
                  segment_text(s, i - 1) + "; segments must be sorted and must not overlap");
    }
  }
}

}  // namespace

Bindings bind(const ir::Program& program, const Params& params, const Dims& dims) {
  if (dims.nq < 0 || dims.nq > kInt32Max) {
    throw Error("nq must be in [0, 2^31-1], got " + std::to_string(dims.nq));
  }
  if (dims.nk < 0 || dims.nk > kInt32Max) {
    throw Error("nk must be in [0, 2^31-1], got " + std::to_string(dims.nk));
  }
  if (dims.batch < 1) throw Error("batch must be >= 1, got " + std::to_string(dims.batch));
  if (dims.heads < 1) throw Error("heads must be >= 1, got " + std::to_string(dims.heads));
  if (int64_t{dims.batch} * dims.heads > kMaxBatchHeads) {
    throw Error("batch * heads must be at most " + std::to_string(kMaxBatchHeads) + ", got " +
                std::to_string(dims.batch) + " * " + std::to_string(dims.heads));
  }
  for (const auto& [name, value] : params) {
    bool known = false;
    for (const ir::ParamDecl& d : program.params) known = known || d.name == name;
    if (!known) {
      throw Error("unknown parameter '" + name + "': mask " + signature(program) +
                  " has no such parameter");
    }
  }
  const size_t n = program.params.size();
  Bindings b{std::vector<int64_t>(n, 0), std::vector<std::vector<int64_t>>(n),
             std::vector<Segments>(n)};
  for (size_t i = 0; i < n; ++i) {
    const ir::ParamDecl& decl = program.params[i];
    const auto it = params.find(decl.name);
    if (it == params.end()) {
      throw Error("missing parameter '" + decl.name + "' (" + ir::param_type_name(decl.type) +
                  "): mask " + signature(program) + " needs every parameter");
    }
    const ParamValue& v = it->second;
    auto wrong_kind = [&](const char* expected) {
      return Error("parameter '" + decl.name + "' must be " + expected + ", got " + value_kind(v));
    };
    switch (decl.type) {
      case ir::ParamType::kInt:
        if (!std::holds_alternative<int64_t>(v)) throw wrong_kind("an integer");
        b.ints[i] = std::get<int64_t>(v);
        check_bound(decl, b.ints[i], -1);
        break;
      case ir::ParamType::kIntArray:
        if (!std::holds_alternative<std::vector<int64_t>>(v)) throw wrong_kind("an integer array");
        b.arrays[i] = std::get<std::vector<int64_t>>(v);
        for (size_t e = 0; e < b.arrays[i].size(); ++e) {
          check_bound(decl, b.arrays[i][e], static_cast<int64_t>(e));
        }
        break;
      case ir::ParamType::kSegment:
      case ir::ParamType::kSegments:
        if (!std::holds_alternative<Segments>(v)) throw wrong_kind("a segment list");
        b.segments[i] = std::get<Segments>(v);
        check_segments(decl.name, b.segments[i], decl.type == ir::ParamType::kSegment);
        break;
    }
  }
  return b;
}

}  // namespace cm
