// The compilemask subcommands. Each lives in its own cmd_*.cpp and returns its flag table and
// its entry point; main.cpp dispatches on the command name.
#pragma once

#include "args.h"

namespace cm::cli {

struct Command {
  CommandSpec spec;
  // Runs the command on parsed arguments and returns the exit code. May throw UsageError,
  // InputError, cm::Error or std::exception; main() turns them into messages and exit codes.
  int (*run)(const ParsedArgs& args);
};

Command check_command();
Command compile_command();
Command inspect_command();
Command show_command();
Command slices_command();
Command run_command();
Command strip_order_command();

}  // namespace cm::cli
