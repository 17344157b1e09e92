// Exit codes of the compilemask tool and the exceptions that carry them to main().
#pragma once

#include <stdexcept>

namespace cm::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitDiagnostics = 1,  // a bad mask program, parameter or input file; or no usable GPU
  kExitUsage = 2,        // the command line itself is malformed
};

// A malformed command line: unknown command or flag, missing or malformed flag value.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input that is not command-line syntax: an unreadable file, a malformed parameter value.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace cm::cli
