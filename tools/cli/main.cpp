// compilemask: check, compile, show and run CompileMask mask programs, and inspect descriptor
// files, from the command line.
// Exit codes: 0 ok, 1 diagnostics or bad parameters/input, 2 usage errors (cli_error.h).
#include "cli_error.h"
#include "commands.h"

#include <algorithm>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace {

using cm::cli::Command;

std::vector<Command> all_commands() {
  return {cm::cli::check_command(),      cm::cli::compile_command(), cm::cli::inspect_command(),
          cm::cli::show_command(),       cm::cli::slices_command(),  cm::cli::run_command(),
          cm::cli::strip_order_command()};
}

void print_overview(std::ostream& out) {
  out << "usage: compilemask COMMAND [FILE] [options]\n\n"
         "Compiles attention-mask programs into tile descriptors.\n\ncommands:\n";
  const std::vector<Command> commands = all_commands();
  size_t width = 0;
  for (const Command& c : commands) width = std::max(width, c.spec.name.size());
  for (const Command& c : commands) {
    std::string name = "  " + c.spec.name;
    name.resize(width + 4, ' ');
    out << name << c.spec.summary << "\n";
  }
  out << "\nRun 'compilemask COMMAND --help' for the options of a command.\n"
         "Exit codes: 0 ok, 1 diagnostics or bad parameters, 2 usage error.\n";
}

int usage_error(const std::string& message) {
  std::cerr << "compilemask: usage error: " << message << "\n";
  return cm::cli::kExitUsage;
}

int dispatch(int argc, const char* const* argv) {
  if (argc < 2) {
    print_overview(std::cerr);
    return cm::cli::kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_overview(std::cout);
    return cm::cli::kExitOk;
  }
  for (const Command& command : all_commands()) {
    if (command.spec.name != name) continue;
    const std::optional<cm::cli::ParsedArgs> args =
        cm::cli::parse_args(command.spec, argc, argv, 2);
    if (!args) {
      std::cout << cm::cli::help_text(command.spec);
      return cm::cli::kExitOk;
    }
    return command.run(*args);
  }
  std::string names;
  for (const Command& command : all_commands())
    names += (names.empty() ? "" : ", ") + command.spec.name;
  return usage_error("unknown command '" + name + "' (commands: " + names +
                     "; see 'compilemask --help')");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const cm::cli::UsageError& e) {
    return usage_error(e.what());
  } catch (const std::bad_alloc&) {
    std::cerr << "compilemask: error: out of memory (try a smaller problem)\n";
  } catch (const std::exception& e) {
    // InputError, cm::Error (bad parameters) and I/O failures: the message names the cause.
    std::cerr << "compilemask: error: " << e.what() << "\n";
  }
  return cm::cli::kExitDiagnostics;
}
