// The front end's pipeline: lex, parse, check, lower.
#include "lang/frontend.h"

#include "lang/checker.h"
#include "lang/diagnostics.h"
#include "lang/lexer.h"
#include "lang/lower.h"
#include "lang/parser.h"

namespace cm::lang {

bool run_frontend(const std::string& source, const std::string& file, const std::string& dump_after,
                  std::string* dump, ir::Program& program, std::vector<Diagnostic>& diagnostics) {
  std::vector<std::string> lines = split_lines(source);
  DiagnosticSink sink(file, lines, diagnostics);
  std::vector<Token> tokens;
  if (!lex(source, sink, tokens)) return false;
  std::unique_ptr<MaskDecl> mask = parse(tokens, sink);
  if (mask == nullptr) return false;
  if (dump != nullptr && dump_after == "parse") *dump = print_ast(*mask);
  if (!check(*mask, sink)) return false;
  if (dump != nullptr && dump_after == "check") *dump = print_ast(*mask);
  lower(*mask, program);
  program.file = file;
  program.source_lines = std::move(lines);
  return true;
}

}  // namespace cm::lang
