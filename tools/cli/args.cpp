// Implementation of the flag-table parser and help generator declared in args.h.
#include "args.h"

#include "cli_error.h"

#include <charconv>
#include <cmath>

namespace cm::cli {
namespace {

const FlagSpec* find_long(const CommandSpec& spec, const std::string& name) {
  for (const FlagSpec& f : spec.flags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const FlagSpec* find_short(const CommandSpec& spec, char name) {
  for (const FlagSpec& f : spec.flags) {
    if (f.short_name != 0 && f.short_name == name) return &f;
  }
  return nullptr;
}

std::string see_help(const CommandSpec& spec) {
  return " (see 'compilemask " + spec.name + " --help')";
}

}  // namespace

std::optional<std::string> ParsedArgs::value(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::values(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string ParsedArgs::spelling(const std::string& flag) const {
  auto it = spellings_.find(flag);
  return it == spellings_.end() ? "--" + flag : it->second;
}

void ParsedArgs::add(const std::string& flag, const std::string& spelling, std::string v) {
  values_[flag].push_back(std::move(v));
  spellings_[flag] = spelling;
}

std::optional<ParsedArgs> parse_args(const CommandSpec& spec, int argc, const char* const* argv,
                                     int first) {
  ParsedArgs args;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return std::nullopt;
    if (arg.size() < 2 || arg[0] != '-') {
      args.positional.push_back(arg);
      continue;
    }
    const FlagSpec* flag = nullptr;
    std::optional<std::string> inline_value;
    std::string spelled;
    if (arg[1] == '-') {
      const size_t eq = arg.find('=');
      spelled = arg.substr(0, eq);
      flag = find_long(spec, spelled.substr(2));
      if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
    } else {
      spelled = arg.substr(0, 2);
      flag = find_short(spec, arg[1]);
      if (arg.size() > 2) inline_value = arg.substr(2);
    }
    if (flag == nullptr) {
      throw UsageError("unknown option '" + arg + "' for 'compilemask " + spec.name + "'" +
                       see_help(spec));
    }
    if (!flag->repeatable && args.has(flag->name)) {
      throw UsageError("option " + spelled + " is given more than once");
    }
    if (flag->value_name.empty()) {
      if (inline_value) throw UsageError("option " + spelled + " takes no value");
      args.add(flag->name, spelled, "");
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        throw UsageError("option " + spelled + " needs a value (" + flag->value_name + ")");
      }
      inline_value = argv[++i];
    }
    args.add(flag->name, spelled, *inline_value);
  }
  if (static_cast<int>(args.positional.size()) < spec.positionals) {
    throw UsageError("'compilemask " + spec.name + "' needs a FILE argument" + see_help(spec));
  }
  if (static_cast<int>(args.positional.size()) > spec.positionals) {
    throw UsageError("unexpected argument '" + args.positional[spec.positionals] + "'" +
                     see_help(spec));
  }
  return args;
}

std::string help_text(const CommandSpec& spec) {
  std::string out = "usage: compilemask " + spec.name + " " + spec.synopsis + "\n\n" +
                    spec.description + "\n\noptions:\n";
  for (const FlagSpec& f : spec.flags) {
    std::string left = "  ";
    left += f.short_name != 0 ? std::string("-") + f.short_name + ", " : "    ";
    left += "--" + f.name;
    if (!f.value_name.empty()) left += " " + f.value_name;
    if (left.size() < 30) left.resize(30, ' ');
    out += left + " " + f.help + "\n";
  }
  out += "  -h, --help                   show this help\n";
  return out;
}

std::optional<int64_t> to_integer(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

int64_t parse_integer(const std::string& what, const std::string& text, int64_t min, int64_t max) {
  const std::optional<int64_t> value = to_integer(text);
  if (!value || *value < min || *value > max) {
    throw UsageError(what + ": expected an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + text + "'");
  }
  return *value;
}

int64_t integer_flag(const ParsedArgs& args, const std::string& flag, int64_t fallback, int64_t min,
                     int64_t max) {
  const std::optional<std::string> text = args.value(flag);
  return text ? parse_integer(args.spelling(flag), *text, min, max) : fallback;
}

double positive_number_flag(const ParsedArgs& args, const std::string& flag, double fallback) {
  const std::optional<std::string> text = args.value(flag);
  if (!text) return fallback;
  double value = 0;
  const char* end = text->data() + text->size();
  const auto [stop, error] = std::from_chars(text->data(), end, value);
  if (error != std::errc() || stop != end || !std::isfinite(value) || value <= 0) {
    throw UsageError(args.spelling(flag) + ": expected a finite number > 0, got '" + *text + "'");
  }
  return value;
}

}  // namespace cm::cli
