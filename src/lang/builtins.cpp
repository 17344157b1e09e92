// Tables of the built-in names, fields and grid methods.
#include "lang/builtins.h"

#include <array>

namespace cm::lang {
namespace {

struct NamedBuiltin {
  std::string_view name;
  NameKind kind;
};

constexpr std::array kNames = {
    NamedBuiltin{"q", NameKind::kQ},     NamedBuiltin{"b", NameKind::kB},
    NamedBuiltin{"h", NameKind::kH},     NamedBuiltin{"Nq", NameKind::kNq},
    NamedBuiltin{"Nk", NameKind::kNk},   NamedBuiltin{"diag", NameKind::kDiag},
    NamedBuiltin{"all", NameKind::kAll}, NamedBuiltin{"none", NameKind::kNone},
};

constexpr std::array<std::string_view, 7> kFunctions = {"min",   "max",  "abs",       "clamp",
                                                        "isqrt", "grid", "strip_grid"};

struct Field {
  Type object;
  std::string_view name;
};

constexpr std::array kFields = {
    Field{Type::kSegment, "start"}, Field{Type::kSegment, "end"},    Field{Type::kSegment, "len"},
    Field{Type::kSegment, "index"}, Field{Type::kSegments, "count"}, Field{Type::kIntArray, "len"},
    Field{Type::kGrid2, "start"},   Field{Type::kGrid2, "end"},      Field{Type::kGrid2, "frames"},
    Field{Type::kGrid2, "rows"},    Field{Type::kGrid2, "cols"},
};

constexpr std::array kGridMethods = {
    GridMethod{"frame", Type::kInt, 1, 1, "(p)", "(p)"},
    GridMethod{"row", Type::kInt, 1, 1, "(p)", "(p)"},
    GridMethod{"col", Type::kInt, 1, 1, "(p)", "(p)"},
    GridMethod{"box", Type::kSet, 3, 4, "(p, ry, rx)", "(p, rt, ry, rx)"},
    GridMethod{"ellipse", Type::kSet, 3, 4, "(p, ry, rx)", "(p, rt, ry, rx)"},
    GridMethod{"disk", Type::kSet, 2, 0, "(p, r)", ""},
    GridMethod{"ball", Type::kSet, 0, 2, "", "(p, r)"},
};

// 2D and 3D grids share their fields.
Type field_owner(Type object) {
  return object == Type::kGrid3 ? Type::kGrid2 : object;
}

}  // namespace

NameKind builtin_name(std::string_view name) {
  for (const NamedBuiltin& b : kNames) {
    if (b.name == name) return b.kind;
  }
  return NameKind::kUnresolved;
}

bool is_builtin_function(std::string_view name) {
  for (std::string_view f : kFunctions) {
    if (f == name) return true;
  }
  return false;
}

bool is_reserved(std::string_view name) {
  return builtin_name(name) != NameKind::kUnresolved || is_builtin_function(name);
}

Type field_type(Type object, std::string_view field) {
  for (const Field& f : kFields) {
    if (f.object == field_owner(object) && f.name == field) return Type::kInt;
  }
  return Type::kError;
}

std::string field_list(Type object) {
  std::string out;
  for (const Field& f : kFields) {
    if (f.object != field_owner(object)) continue;
    out += (out.empty() ? "" : ", ") + std::string(f.name);
  }
  return out;
}

const GridMethod* find_grid_method(std::string_view name) {
  for (const GridMethod& m : kGridMethods) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string grid_method_list() {
  std::string out;
  for (const GridMethod& m : kGridMethods) out += (out.empty() ? "" : ", ") + std::string(m.name);
  return out;
}

}  // namespace cm::lang
