// fork/exec runner for the CLI tests (see cli_runner.h).
#include "cli_runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cm::cli_test {

std::string scratch_dir() {
  static const std::string dir = [] {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/cm-cli-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    return pattern;
  }();
  // Registered after `dir` is complete, so it runs before `dir` is destroyed.
  static const bool cleanup_registered =
      std::atexit([] { std::filesystem::remove_all(scratch_dir()); }) == 0;
  (void)cleanup_registered;
  return dir;
}

std::string write_scratch_file(const std::string& name, const std::string& content) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string example(const std::string& name) {
  return std::string(CM_SOURCE_DIR) + "/examples/" + name + ".mask";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

CliResult run_cli(const std::vector<std::string>& args) {
  const std::string out_path = scratch_dir() + "/stdout.txt";
  const std::string err_path = scratch_dir() + "/stderr.txt";
  std::vector<const char*> argv = {CM_CLI_PATH};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0) {
      _exit(127);
    }
    execv(CM_CLI_PATH, const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

}  // namespace cm::cli_test
