// Diagnostic formatting (declared in the public API) and the front end's error collector.
#include "lang/diagnostics.h"

namespace cm {

std::string Diagnostic::format() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": error: " + message + "\n";
  if (line <= 0) return out;
  out += "  " + source_line + "\n  ";
  // Copy tabs from the source line so that the caret lines up in a terminal.
  for (int i = 0; i + 1 < column; ++i) {
    const size_t at = static_cast<size_t>(i);
    out += at < source_line.size() && source_line[at] == '\t' ? '\t' : ' ';
  }
  out += "^\n";
  return out;
}

}  // namespace cm

namespace cm::lang {

std::vector<std::string> split_lines(const std::string& source) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin <= source.size()) {
    size_t end = source.find('\n', begin);
    if (end == std::string::npos) end = source.size();
    std::string line = source.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    begin = end + 1;
  }
  return lines;
}

void DiagnosticSink::error(SourceLoc loc, std::string message) {
  if (full()) return;
  ++count_;
  Diagnostic d;
  d.file = file_;
  d.line = loc.line;
  d.column = loc.column;
  d.message = std::move(message);
  if (loc.line >= 1 && static_cast<size_t>(loc.line) <= lines_.size()) {
    d.source_line = lines_[static_cast<size_t>(loc.line - 1)];
  }
  out_.push_back(std::move(d));
}

}  // namespace cm::lang
