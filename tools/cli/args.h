// Command-line parsing for the compilemask subcommands: a declarative flag table per command,
// `--flag value` / `--flag=value` / `-p value` / `-pvalue` forms, generated --help text, and
// strict number parsing whose errors name the flag and the rule.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cm::cli {

struct FlagSpec {
  std::string name;        // long form without dashes, e.g. "nq"
  char short_name = 0;     // e.g. 'p' for -p, or 0
  std::string value_name;  // empty for a boolean switch, else shown in help, e.g. "N"
  bool repeatable = false;
  std::string help;
};

struct CommandSpec {
  std::string name;         // e.g. "compile"
  std::string synopsis;     // e.g. "FILE -p NAME=VALUE... [options]"
  std::string summary;      // one line for the top-level help
  std::string description;  // paragraphs shown by --help after the synopsis
  std::vector<FlagSpec> flags;
  int positionals = 1;  // exactly this many positional arguments (FILE)
};

class ParsedArgs {
 public:
  std::vector<std::string> positional;

  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  // The value of a non-repeatable flag, if given.
  std::optional<std::string> value(const std::string& flag) const;
  // Every value of a repeatable flag, in command-line order.
  std::vector<std::string> values(const std::string& flag) const;

  // How the user spelled the flag ("-n", "--nq"), for error messages; "--flag" if absent.
  std::string spelling(const std::string& flag) const;

  void add(const std::string& flag, const std::string& spelling, std::string v);

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::map<std::string, std::string> spellings_;
};

// Parses argv[first..argc) for `spec`. Returns std::nullopt if --help/-h was given (the caller
// prints help_text). Throws UsageError naming the offending argument otherwise.
std::optional<ParsedArgs> parse_args(const CommandSpec& spec, int argc, const char* const* argv,
                                     int first);

std::string help_text(const CommandSpec& spec);

// The value of `text` if it is a whole decimal integer (optional leading '-') that fits int64.
std::optional<int64_t> to_integer(const std::string& text);

// Parses a whole decimal integer in [min, max]. Throws UsageError
// "<what>: expected an integer in [min, max], got '<text>'".
int64_t parse_integer(const std::string& what, const std::string& text, int64_t min, int64_t max);

// Parses an optional integer flag, or returns `fallback` when it is absent.
int64_t integer_flag(const ParsedArgs& args, const std::string& flag, int64_t fallback, int64_t min,
                     int64_t max);

// Parses an optional flag holding a finite decimal number > 0 (such as 30 or 2.5e1), or returns
// `fallback` when it is absent. Throws UsageError "<flag>: expected a finite number > 0, got
// '<text>'".
double positive_number_flag(const ParsedArgs& args, const std::string& flag, double fallback);

}  // namespace cm::cli
