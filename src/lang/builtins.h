// The language's built-in names, functions, fields and grid methods, in one table each, shared
// by the checker and lowering.
#pragma once

#include <string>
#include <string_view>

#include "lang/ast.h"

namespace cm::lang {

// The keyword-like names (q, b, h, Nq, Nk, diag, all, none); kUnresolved if `name` is not one.
NameKind builtin_name(std::string_view name);
// The built-in functions (min, max, abs, clamp, isqrt, grid).
bool is_builtin_function(std::string_view name);
// True if a user declaration may not take `name`.
bool is_reserved(std::string_view name);

// The type of `object.field`, or kError if `object` has no such field.
Type field_type(Type object, std::string_view field);
// The fields of a type, for "it has ..." hints; empty if it has none.
std::string field_list(Type object);

// Grid methods. `arity` is how many arguments the method takes on a grid of this dimension;
// 0 when the method does not exist there.
struct GridMethod {
  std::string_view name;
  Type result;
  int arity_2d;
  int arity_3d;
  std::string_view signature_2d;
  std::string_view signature_3d;
};
const GridMethod* find_grid_method(std::string_view name);
std::string grid_method_list();

}  // namespace cm::lang
