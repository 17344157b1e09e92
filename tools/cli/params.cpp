// Parameter value syntax of the CLI (see params.h).
#include "params.h"

#include "args.h"
#include "cli_error.h"

#include <algorithm>
#include <fstream>
#include <limits>

namespace cm::cli {
namespace {

constexpr int64_t kMaxPosition = std::numeric_limits<int32_t>::max();

[[noreturn]] void bad_value(const std::string& name, const std::string& rule) {
  throw InputError("parameter '" + name + "': " + rule);
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string current;
  for (char c : text) {
    if (c == sep) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

// "@FILE" becomes the file's items joined by commas; anything else is returned unchanged.
std::string resolve_value(const std::string& name, const std::string& value) {
  if (value.empty() || value[0] != '@') return value;
  const std::string path = value.substr(1);
  std::ifstream file(path);
  if (!file) bad_value(name, "cannot read value file '" + path + "'");
  std::string item, joined;
  while (file >> item) joined += (joined.empty() ? "" : ",") + item;
  // Items may themselves carry trailing commas ("0, 100, 250").
  std::string cleaned;
  for (char c : joined) {
    if (c != ',' || (!cleaned.empty() && cleaned.back() != ',')) cleaned += c;
  }
  if (!cleaned.empty() && cleaned.back() == ',') cleaned.pop_back();
  return cleaned;
}

int64_t integer(const std::string& name, const std::string& text, const std::string& what) {
  const std::optional<int64_t> v = to_integer(text);
  if (!v) bad_value(name, "expected " + what + ", got '" + text + "'");
  return *v;
}

std::vector<int64_t> integer_list(const std::string& name, const std::string& text,
                                  const std::string& what) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (const std::string& item : split(text, ',')) out.push_back(integer(name, item, what));
  return out;
}

void check_sorted(const std::string& name, const Segments& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.ends[i] < s.starts[i]) {
      bad_value(name, "segment " + std::to_string(i) + " (" + std::to_string(s.starts[i]) + ":" +
                          std::to_string(s.ends[i]) + ") ends before it starts");
    }
    if (i > 0 && s.starts[i] < s.ends[i - 1]) {
      bad_value(name, "segments must be sorted and non-overlapping, but segment " +
                          std::to_string(i) + " (" + std::to_string(s.starts[i]) + ":" +
                          std::to_string(s.ends[i]) + ") starts before segment " +
                          std::to_string(i - 1) + " ends at " + std::to_string(s.ends[i - 1]));
    }
  }
}

Segments segment_pairs(const std::string& name, const std::string& text) {
  Segments s;
  for (const std::string& item : split(text, ',')) {
    const std::vector<std::string> ends = split(item, ':');
    if (ends.size() != 2) bad_value(name, "expected a START:END pair, got '" + item + "'");
    s.starts.push_back(integer(name, ends[0], "an integer segment start"));
    s.ends.push_back(integer(name, ends[1], "an integer segment end"));
  }
  return s;
}

Segments segment_list(const std::string& name, const std::string& text) {
  Segments s;
  if (text.rfind("len:", 0) == 0) {
    const std::vector<int64_t> lengths = integer_list(name, text.substr(4), "an integer length");
    int64_t total = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] < 0) {
        bad_value(name, "segment lengths must be >= 0, but length " + std::to_string(i) + " is " +
                            std::to_string(lengths[i]));
      }
      // Token positions are 32-bit; checking the running total also keeps the sum exact.
      total += std::min(lengths[i], kMaxPosition + 1);
      if (total > kMaxPosition) {
        bad_value(name, "segment lengths add up to more than " + std::to_string(kMaxPosition));
      }
    }
    s = Segments::from_lengths(lengths);
  } else if (text.find(':') != std::string::npos) {
    s = segment_pairs(name, text);
  } else {
    const std::vector<int64_t> bounds = integer_list(name, text, "an integer boundary");
    if (bounds.size() == 1) {
      bad_value(name, "boundaries need at least two values (START,END), got '" + text + "'");
    }
    for (size_t i = 1; i < bounds.size(); ++i) {
      if (bounds[i] < bounds[i - 1]) {
        bad_value(name, "boundaries must not decrease, but " + std::to_string(bounds[i]) +
                            " follows " + std::to_string(bounds[i - 1]));
      }
    }
    s = Segments::from_boundaries(bounds);
  }
  check_sorted(name, s);
  return s;
}

ParamValue parse_value(const ParamInfo& param, const std::string& raw) {
  const std::string text = resolve_value(param.name, raw);
  if (param.type == "int") return integer(param.name, text, "an integer");
  if (param.type == "int[]") {
    return integer_list(param.name, text, "a comma-separated list of integers");
  }
  if (param.type == "segment") {
    Segments s = segment_pairs(param.name, text);
    if (s.size() != 1) bad_value(param.name, "expected one START:END pair, got '" + text + "'");
    check_sorted(param.name, s);
    return s;
  }
  return segment_list(param.name, text);
}

}  // namespace

std::string declared_list(const std::vector<ParamInfo>& declared) {
  std::string out;
  for (const ParamInfo& p : declared) out += (out.empty() ? "" : ", ") + p.declaration;
  return out;
}

Params parse_params(const std::vector<std::string>& assignments,
                    const std::vector<ParamInfo>& declared, const std::string& mask_name) {
  Params params;
  for (const std::string& assignment : assignments) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError("-p expects NAME=VALUE, got '" + assignment + "'");
    }
    const std::string name = assignment.substr(0, eq);
    const ParamInfo* info = nullptr;
    for (const ParamInfo& p : declared) {
      if (p.name == name) info = &p;
    }
    if (info == nullptr) {
      throw InputError("parameter '" + name + "' is not declared by mask " + mask_name +
                       " (declared: " + (declared.empty() ? "none" : declared_list(declared)) +
                       ")");
    }
    if (params.count(name) > 0) bad_value(name, "given more than once");
    params.emplace(name, parse_value(*info, assignment.substr(eq + 1)));
  }
  return params;
}

}  // namespace cm::cli
