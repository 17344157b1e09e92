// Fast evaluation of a normalized program's terms. Each region's expressions are flattened
// once, per specialize call, into straight-line blocks sorted by how often they must run:
//   outer: once per loop binding (no q, no iterator),
//   row:   once per query row (reads q, no iterator),
//   level: once per value of a term's i-th iterator.
// Evaluation is eager, so errors (division by zero, isqrt of a negative, array index out of
// range) poison a register instead of stopping; an error is raised only when a poisoned value
// reaches a term's bounds, naming the source position of the failing operation.
#pragma once

#include "ir/ir.h"
#include "specialize/bind.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cm {

struct Instr {
  ir::Op op;
  int32_t dst;  // register = IR node id
  int32_t a, b, c;
  int32_t index;
  int64_t value;
};

using Block = std::vector<Instr>;

struct TermCode {
  std::vector<int32_t> iterator_slots;
  std::vector<int32_t> iterator_lo, iterator_hi;  // registers of each iterator's bounds
  std::vector<Block> levels;                      // levels[i] runs per value of iterator i
  int32_t lo = -1, hi = -1;                       // registers of the term's bounds
  int32_t grid = ir::kNone;                       // formula-capable neighbourhood, if any
};

struct RegionCode {
  std::vector<ir::Loop> loops;
  Block outer;
  Block row;
  std::vector<TermCode> queries;
  std::vector<TermCode> keys;
  // Registers of the formula-capable neighbourhoods' parameters, by grid index: start,
  // center_start, frames, rows, cols, strip, rt, ry, rx (evaluated in the outer block).
  std::vector<std::vector<int32_t>> grid_params;
};

// A `require` statement: its loops, and the block (run once per loop binding) that computes its
// condition into register `cond`.
struct RequirementCode {
  std::vector<ir::Loop> loops;
  Block block;
  int32_t cond = -1;
  ir::SourceLoc loc, end;  // as in ir::Requirement
};

struct ProgramCode {
  std::vector<RegionCode> regions;
  std::vector<RequirementCode> requirements;
};

// Preconditions: program.normalized and classified.
ProgramCode compile_program(const ir::Program& program);

// Registers, variable slots and the parameter values blocks read.
class Machine {
 public:
  Machine(const ir::Program& program, const Bindings& bindings);

  void set_slot(int32_t slot, int64_t v) { slots_[static_cast<size_t>(slot)] = v; }
  int64_t slot(int32_t slot) const { return slots_[static_cast<size_t>(slot)]; }
  void run(const Block& block);
  // " name=value" of a variable, for error messages.
  std::string slot_text(int32_t slot) const;
  // The value of a register that feeds a result; throws cm::Error if it is poisoned.
  int64_t result(int32_t reg) const {
    if (poison_[static_cast<size_t>(reg)] != 0) raise(reg);
    return regs_[static_cast<size_t>(reg)];
  }
  // Raw register access for analyses that handle poison themselves.
  int64_t value(int32_t reg) const { return regs_[static_cast<size_t>(reg)]; }
  bool poisoned(int32_t reg) const { return poison_[static_cast<size_t>(reg)] != 0; }
  size_t registers() const { return regs_.size(); }

 private:
  [[noreturn]] void raise(int32_t reg) const;

  const ir::Program& program_;
  const Bindings& bindings_;
  std::vector<int64_t> slots_;
  std::vector<int64_t> regs_;
  // 0, or 1 + the id of the operation whose error this register carries.
  std::vector<int32_t> poison_;
};

}  // namespace cm
