// The recursive-descent parser. Each parse function carries its grammar rule above it. The
// first syntax error is reported and parsing stops (later errors would mostly be echoes).
#include "lang/parser.h"

#include <algorithm>
#include <utility>

#include "lang/token_cursor.h"

namespace cm::lang {
namespace {

class Parser : TokenCursor {
 public:
  using TokenCursor::TokenCursor;

  // file := NEWLINE* 'mask' NAME '(' [param {',' param}] ')' block NEWLINE* END
  std::unique_ptr<MaskDecl> parse_file() {
    auto mask = std::make_unique<MaskDecl>();
    skip_newlines();
    mask->loc = peek().loc;
    expect(TokenKind::kMask, "'mask' to start the program");
    mask->name = expect(TokenKind::kIdent, "the mask's name").text;
    expect(TokenKind::kLParen, "'(' to start the parameter list");
    ++nesting_;
    if (peek().kind != TokenKind::kRParen) {
      mask->params.push_back(parse_param());
      while (accept(TokenKind::kComma)) mask->params.push_back(parse_param());
    }
    --nesting_;
    expect(TokenKind::kRParen, "',' or ')' in the parameter list");
    mask->body = parse_block();
    skip_newlines();
    expect(TokenKind::kEnd, "end of input after the mask's closing '}'");
    return mask;
  }

 private:
  // param := NAME ':' ('int' ['[' ']'] ['>=' ['-'] INT] | 'segment' | 'segments')
  Param parse_param() {
    Param param;
    const Token& name = expect(TokenKind::kIdent, "a parameter name");
    param.name = name.text;
    param.loc = name.loc;
    expect(TokenKind::kColon, "':' and a type after the parameter name");
    const Token& type = peek();
    if (type.kind == TokenKind::kIdent && type.text == "int") {
      next();
      if (accept(TokenKind::kLBracket)) {
        expect(TokenKind::kRBracket, "']' in 'int[]'");
        param.type = ir::ParamType::kIntArray;
      }
      if (accept(TokenKind::kGe)) param.min = parse_bound();
    } else if (type.kind == TokenKind::kIdent && type.text == "segment") {
      next();
      param.type = ir::ParamType::kSegment;
    } else if (type.kind == TokenKind::kIdent && type.text == "segments") {
      next();
      param.type = ir::ParamType::kSegments;
    } else {
      fail(type, "a parameter type (int, int[], segment or segments)");
    }
    if (peek().kind == TokenKind::kGe) {
      fail_at(peek().loc, "a lower bound ('>= N') applies to int and int[] parameters only");
    }
    return param;
  }

  // The N of a parameter's '>= N': an integer literal, maybe negative.
  int64_t parse_bound() {
    const bool negative = accept(TokenKind::kMinus);
    const int64_t value = expect(TokenKind::kInt, "an integer after '>='").value;
    return negative ? -value : value;
  }

  // block := '{' {NEWLINE | ';' | statement (NEWLINE | ';' | before '}')} '}'
  std::vector<StmtPtr> parse_block() {
    const Token& open = expect(TokenKind::kLBrace, "'{'");
    DepthGuard guard(*this, open);
    std::vector<StmtPtr> body;
    for (;;) {
      while (accept(TokenKind::kNewline) || accept(TokenKind::kSemicolon)) {
      }
      if (accept(TokenKind::kRBrace)) return body;
      if (peek().kind == TokenKind::kEnd) {
        fail(peek(), "'}' to close the block opened at " + std::to_string(open.loc.line) + ":" +
                         std::to_string(open.loc.column));
      }
      body.push_back(parse_statement());
      const TokenKind after = peek().kind;
      if (after != TokenKind::kNewline && after != TokenKind::kSemicolon &&
          after != TokenKind::kRBrace) {
        fail(peek(), "a new line or ';' after the statement");
      }
    }
  }

  // statement := 'let' NAME '=' expr
  //            | 'q' 'in' expr ':' 'k' 'in' expr
  //            | 'for' NAME 'in' expr block
  //            | 'if' expr block ['else' (block | if-statement)]
  StmtPtr parse_statement() {
    auto stmt = std::make_unique<Stmt>();
    const Token& first = peek();
    stmt->loc = first.loc;
    if (accept(TokenKind::kLet)) {
      stmt->kind = StmtKind::kLet;
      stmt->name_loc = peek().loc;
      stmt->name = expect(TokenKind::kIdent, "a name after 'let'").text;
      expect(TokenKind::kAssign, "'=' after the name in 'let'");
      skip_newlines();
      stmt->value = parse_expr();
    } else if (first.kind == TokenKind::kIdent && first.text == "q") {
      next();
      stmt->kind = StmtKind::kRegion;
      expect(TokenKind::kIn, "'in' after 'q' in a region 'q in ...: k in ...'");
      stmt->value = parse_expr();
      expect(TokenKind::kColon, "':' between the query set and 'k in'");
      skip_newlines();
      const Token& k = peek();
      if (k.kind != TokenKind::kIdent || k.text != "k") fail(k, "'k' after ':' in a region");
      next();
      expect(TokenKind::kIn, "'in' after 'k'");
      stmt->key_set = parse_expr();
    } else if (accept(TokenKind::kFor)) {
      stmt->kind = StmtKind::kFor;
      stmt->name_loc = peek().loc;
      stmt->name = expect(TokenKind::kIdent, "a loop variable name after 'for'").text;
      expect(TokenKind::kIn, "'in' after the loop variable");
      stmt->value = parse_expr();
      stmt->body = parse_block();
    } else if (accept(TokenKind::kIf)) {
      parse_if_rest(*stmt);
    } else if (accept(TokenKind::kRequire)) {
      stmt->kind = StmtKind::kRequire;
      stmt->value = parse_expr();
      stmt->end = end_of_previous();
    } else {
      fail(first, "a statement ('let', 'for', 'if', 'require' or a region 'q in ...: k in ...')");
    }
    return stmt;
  }

  // The part of an if statement after 'if'. An 'else' may follow the '}' on a later line.
  void parse_if_rest(Stmt& stmt) {
    stmt.kind = StmtKind::kIf;
    stmt.value = parse_expr();
    stmt.body = parse_block();
    if (!accept_after_newlines(TokenKind::kElse)) return;
    stmt.has_else = true;
    if (peek().kind == TokenKind::kIf) {
      auto nested = std::make_unique<Stmt>();
      const Token& nested_if = next();
      nested->loc = nested_if.loc;
      DepthGuard guard(*this, nested_if);
      parse_if_rest(*nested);
      stmt.else_body.push_back(std::move(nested));
    } else {
      stmt.else_body = parse_block();
    }
  }

  // expr := 'if' expr 'then' expr 'else' expr
  //       | 'let' NAME '=' expr 'in' expr
  //       | or
  ExprPtr parse_expr() {
    const Token& first = peek();
    DepthGuard guard(*this, first);
    if (accept(TokenKind::kIf)) {
      auto e = make(ExprKind::kIf, first.loc);
      add(*e, parse_expr());
      expect(TokenKind::kThen, "'then' after the condition of an 'if' expression");
      skip_newlines();
      add(*e, parse_expr());
      skip_newlines();
      expect(TokenKind::kElse, "'else' in an 'if' expression");
      skip_newlines();
      add(*e, parse_expr());
      return e;
    }
    if (accept(TokenKind::kLet)) {
      auto e = make(ExprKind::kLet, first.loc);
      e->name = expect(TokenKind::kIdent, "a name after 'let'").text;
      expect(TokenKind::kAssign, "'=' after the name in 'let'");
      skip_newlines();
      add(*e, parse_expr());
      skip_newlines();
      expect(TokenKind::kIn, "'in' after the value of a 'let' expression");
      skip_newlines();
      add(*e, parse_expr());
      return e;
    }
    return parse_or();
  }

  // or := and {'||' and}
  ExprPtr parse_or() {
    return parse_left_assoc(&Parser::parse_and, {{TokenKind::kOrOr, Operator::kOr}});
  }
  // and := comparison {'&&' comparison}
  ExprPtr parse_and() {
    return parse_left_assoc(&Parser::parse_comparison, {{TokenKind::kAndAnd, Operator::kAnd}});
  }

  // comparison := union [('==' | '!=' | '<' | '<=' | '>' | '>=') union]   (non-associative)
  ExprPtr parse_comparison() {
    static const std::vector<std::pair<TokenKind, Operator>> kOps = {
        {TokenKind::kEqEq, Operator::kEq}, {TokenKind::kNotEq, Operator::kNe},
        {TokenKind::kLt, Operator::kLt},   {TokenKind::kLe, Operator::kLe},
        {TokenKind::kGt, Operator::kGt},   {TokenKind::kGe, Operator::kGe}};
    ExprPtr left = parse_union();
    const Operator* op = match_operator(kOps);
    if (op == nullptr) return left;
    const Token& token = next();
    skip_newlines();
    ExprPtr e = binary(*op, token.loc, std::move(left), parse_union());
    if (match_operator(kOps) != nullptr) {
      fail_at(peek().loc, "comparisons do not chain; write 'a < b && b < c' instead");
    }
    return e;
  }

  // union := intersection {'|' intersection}
  ExprPtr parse_union() {
    return parse_left_assoc(&Parser::parse_intersection, {{TokenKind::kPipe, Operator::kUnion}});
  }
  // intersection := additive {'&' additive}
  ExprPtr parse_intersection() {
    return parse_left_assoc(&Parser::parse_additive, {{TokenKind::kAmp, Operator::kIntersect}});
  }
  // additive := multiplicative {('+' | '-') multiplicative}
  ExprPtr parse_additive() {
    return parse_left_assoc(&Parser::parse_multiplicative, {{TokenKind::kPlus, Operator::kAdd},
                                                            {TokenKind::kMinus, Operator::kSub}});
  }
  // multiplicative := unary {('*' | '/' | '%') unary}
  ExprPtr parse_multiplicative() {
    return parse_left_assoc(&Parser::parse_unary, {{TokenKind::kStar, Operator::kMul},
                                                   {TokenKind::kSlash, Operator::kDiv},
                                                   {TokenKind::kPercent, Operator::kMod}});
  }

  // unary := ('-' | '!') unary | postfix
  ExprPtr parse_unary() {
    const Token& first = peek();
    if (first.kind != TokenKind::kMinus && first.kind != TokenKind::kBang) return parse_postfix();
    DepthGuard guard(*this, first);
    next();
    auto e = make(ExprKind::kUnary, first.loc);
    e->op = first.kind == TokenKind::kMinus ? Operator::kNeg : Operator::kNot;
    add(*e, parse_unary());
    return e;
  }

  // postfix := primary {'.' NAME ['(' [args] ')'] | '[' expr ']'}
  ExprPtr parse_postfix() {
    ExprPtr e = parse_primary();
    for (;;) {
      const Token& token = peek();
      if (accept(TokenKind::kDot)) {
        const Token& member = expect(TokenKind::kIdent, "a field or method name after '.'");
        const bool is_call = peek().kind == TokenKind::kLParen;
        auto access = make(is_call ? ExprKind::kMethod : ExprKind::kField, member.loc);
        access->name = member.text;
        add(*access, std::move(e));
        if (is_call) parse_args(*access);
        e = std::move(access);
      } else if (accept(TokenKind::kLBracket)) {
        auto index = make(ExprKind::kIndex, token.loc);
        add(*index, std::move(e));
        ++nesting_;
        add(*index, parse_expr());
        --nesting_;
        expect(TokenKind::kRBracket, "']' to close the index");
        e = std::move(index);
      } else {
        return e;
      }
    }
  }

  // primary := INTEGER | NAME ['(' [args] ')'] | '(' expr ')'
  //          | ('[' | '(') expr ',' expr (']' | ')')          interval literal
  //          | 'if' ... | 'let' ...                            (see expr)
  ExprPtr parse_primary() {
    const Token& first = peek();
    switch (first.kind) {
      case TokenKind::kInt: {
        next();
        auto e = make(ExprKind::kIntLiteral, first.loc);
        e->value = first.value;
        return e;
      }
      case TokenKind::kIdent: {
        next();
        const bool is_call = peek().kind == TokenKind::kLParen;
        auto e = make(is_call ? ExprKind::kCall : ExprKind::kName, first.loc);
        e->name = first.text;
        if (is_call) parse_args(*e);
        return e;
      }
      case TokenKind::kIf:
      case TokenKind::kLet:
        return parse_expr();
      case TokenKind::kLParen:
      case TokenKind::kLBracket:
        return parse_parenthesized();
      default:
        fail(first, "an expression");
    }
  }

  // '(' expr ')'  or an interval literal; `(a)` is grouping, `(a, b)` is an interval.
  ExprPtr parse_parenthesized() {
    const Token& open = next();
    ++nesting_;
    ExprPtr first = parse_expr();
    if (open.kind == TokenKind::kLParen && peek().kind == TokenKind::kRParen) {
      --nesting_;
      next();
      return first;
    }
    expect(TokenKind::kComma, open.kind == TokenKind::kLParen
                                  ? "')' or ',' (for an interval '(a, b]')"
                                  : "',' in the interval '[a, b]'");
    ExprPtr second = parse_expr();
    --nesting_;
    const Token& close = peek();
    if (close.kind != TokenKind::kRParen && close.kind != TokenKind::kRBracket) {
      fail(close, "')' or ']' to close the interval");
    }
    next();
    auto e = make(ExprKind::kInterval, open.loc);
    e->lo_open = open.kind == TokenKind::kLParen;
    e->hi_open = close.kind == TokenKind::kRParen;
    add(*e, std::move(first));
    add(*e, std::move(second));
    return e;
  }

  // args := expr {',' expr}
  void parse_args(Expr& call) {
    expect(TokenKind::kLParen, "'('");
    ++nesting_;
    if (peek().kind != TokenKind::kRParen) {
      add(call, parse_expr());
      while (accept(TokenKind::kComma)) add(call, parse_expr());
    }
    --nesting_;
    expect(TokenKind::kRParen, "',' or ')' in the argument list");
  }

  using Level = ExprPtr (Parser::*)();
  ExprPtr parse_left_assoc(Level operand, const std::vector<std::pair<TokenKind, Operator>>& ops) {
    ExprPtr left = (this->*operand)();
    while (const Operator* op = match_operator(ops)) {
      const Token& token = next();
      skip_newlines();
      left = binary(*op, token.loc, std::move(left), (this->*operand)());
    }
    return left;
  }

  const Operator* match_operator(const std::vector<std::pair<TokenKind, Operator>>& ops) {
    const TokenKind kind = peek().kind;
    for (const auto& [token, op] : ops) {
      if (token == kind) return &op;
    }
    return nullptr;
  }

  ExprPtr binary(Operator op, SourceLoc loc, ExprPtr a, ExprPtr b) {
    auto e = make(ExprKind::kBinary, loc);
    e->op = op;
    add(*e, std::move(a));
    add(*e, std::move(b));
    return e;
  }

  static ExprPtr make(ExprKind kind, SourceLoc loc) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->loc = loc;
    return e;
  }

  void add(Expr& parent, ExprPtr child) {
    parent.height = std::max(parent.height, child->height + 1);
    if (parent.height > kMaxNesting) too_deep(parent.loc);
    parent.args.push_back(std::move(child));
  }
};

}  // namespace

std::unique_ptr<MaskDecl> parse(const std::vector<Token>& tokens, DiagnosticSink& sink) {
  Parser parser(tokens, sink);
  try {
    return parser.parse_file();
  } catch (const SyntaxError&) {
    return nullptr;
  }
}

}  // namespace cm::lang
