// CompileMask public C++ API.
//
//   auto result = cm::compile(source, "causal.mask");
//   if (!result) { for (auto& d : result.diagnostics) std::cerr << d.format(); }
//   cm::Plan plan = result.mask->specialize({{"W", int64_t{4096}}}, {.nq = n, .nk = n});
//   plan.blob();  // the descriptor (include/compilemask/descriptor.h, docs/descriptor.md)
#pragma once

#include <compilemask/descriptor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace cm {

namespace ir {
struct Program;
}
struct MaskCode;  // the program's row expressions, flattened once for evaluation

// A problem found in a mask program, with its position (1-based line and column).
struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string message;
  std::string source_line;  // the text of the offending line, for the caret display

  // "file:line:col: error: message\n  <source line>\n  <caret>\n"
  std::string format() const;
};

// Bad parameters, shapes or tilings given to specialize (or bad tensors given to an attention
// entry point). The message names the offending parameter and the rule it breaks.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A list of disjoint, sorted half-open token ranges [start, end).
struct Segments {
  std::vector<int64_t> starts;
  std::vector<int64_t> ends;

  // Consecutive segments [b0, b1), [b1, b2), ...; boundaries must not decrease.
  static Segments from_boundaries(const std::vector<int64_t>& boundaries);
  // Consecutive segments of these lengths, starting at `origin`.
  static Segments from_lengths(const std::vector<int64_t>& lengths, int64_t origin = 0);
  size_t size() const { return starts.size(); }
};

// A parameter value: an integer, an integer array, or a segment list. A `segment` parameter
// takes a Segments value holding exactly one segment.
using ParamValue = std::variant<int64_t, std::vector<int64_t>, Segments>;
using Params = std::map<std::string, ParamValue>;

// The attention problem a plan is made for.
struct Dims {
  int64_t nq = 0;     // query length
  int64_t nk = 0;     // key length
  int32_t batch = 1;  // b ranges over [0, batch)
  int32_t heads = 1;  // h ranges over [0, heads) (query heads)
};

// The most (b, h) pairs a plan covers: its descriptor maps each pair to its mask in an int32
// array, and specialize evaluates each pair's rows when the mask reads b or h.
inline constexpr int64_t kMaxBatchHeads = int64_t{1} << 24;

struct Tiling {
  int32_t m = 128;  // query rows per tile
  int32_t n = 128;  // key columns per tile
};

// A plan's tiles and pairs, summed over its distinct masks: what Mask::count_tiles finds
// without building a descriptor, and part of PlanStats.
struct TileCounts {
  int32_t instances = 0;  // distinct masks across (b, h)
  int64_t full_tiles = 0;
  int64_t partial_tiles = 0;
  int64_t empty_tiles = 0;
  int64_t visible_pairs = 0;
  int64_t computed_pairs = 0;  // pairs inside full and partial tiles

  bool operator==(const TileCounts&) const = default;
};

struct PlanStats : TileCounts {
  int64_t bytes = 0;  // descriptor size, forward and transposed forms together
  int32_t patterns = 0;
  int32_t grid_formulas = 0;
  double density = 0;        // visible / (nq * nk * instances)
  double build_seconds = 0;  // wall time of specialize; 0 for Plan::from_descriptor's plans

  std::string format() const;  // human-readable, multi-line (build time only when not 0)
  std::string to_json() const;
};

// A compiled mask bound to concrete parameters, shape and tiling: the descriptor plus stats.
class Plan {
 public:
  Plan(std::vector<uint64_t> storage, PlanStats stats, Dims dims, Tiling tiling);

  // The plan of a descriptor given as bytes (blob() and size_bytes() of a plan, or a file of
  // `compilemask compile --emit descriptor`): the bytes are checked against every rule of
  // docs/descriptor.md first, and the stats are read back from them (build_seconds 0). Throws
  // cm::Error naming the broken rule.
  static Plan from_descriptor(const void* data, size_t size);

  const void* blob() const { return storage_.data(); }
  size_t size_bytes() const;
  const PlanStats& stats() const { return stats_; }
  const Dims& dims() const { return dims_; }
  const Tiling& tiling() const { return tiling_; }

  // The most elements one dense() call returns (64 MiB).
  static constexpr int64_t kMaxDenseElements = int64_t{1} << 26;

  // Row-major visibility (1 = visible) of mask (b, h), decoded from the descriptor: its query
  // rows [q_begin, q_end) (q_end < 0: to nq) against all nk keys. For debugging and for
  // checking a mask against another statement of it, a window of rows at a time; throws
  // cm::Error for a window outside [0, nq) or above kMaxDenseElements.
  std::vector<uint8_t> dense(int32_t b = 0, int32_t h = 0, int32_t q_begin = 0,
                             int32_t q_end = -1) const;

 private:
  std::vector<uint64_t> storage_;  // 8-byte aligned blob
  PlanStats stats_;
  Dims dims_;
  Tiling tiling_;
};

// The shape of an attention slice over query rows [q_begin, q_end) and keys [k_begin, k_end),
// with MagiAttention's codes (its attn_type_map). Row i of the slice (from 0), where
// Lq = q_end - q_begin, sees the keys k of the range with
//   kFull:          any k;
//   kCausal:        k < k_end - Lq + 1 + i (aligned at the bottom right);
//   kInverseCausal: k >= k_begin + i (aligned at the top left);
//   kBiCausal:      both.
enum class SliceShape : int32_t { kFull = 0, kCausal = 1, kInverseCausal = 2, kBiCausal = 3 };

struct AttnSlice {
  int32_t q_begin = 0;
  int32_t q_end = 0;
  int32_t k_begin = 0;
  int32_t k_end = 0;
  SliceShape shape = SliceShape::kFull;

  friend bool operator==(const AttnSlice&, const AttnSlice&) = default;
};

// A mask on a uniform grid of blocks: the form of FlexAttention's BlockMask (Mask::block_grid).
// Block (i, j) holds query rows [i block_q, +block_q) and keys [j block_k, +block_k). Pairs
// past (nq, nk) count as hidden, so a block the edge cuts is never full, as in the
// BlockMasks that create_block_mask pads.
struct BlockGrid {
  static constexpr int32_t kEmpty = 0;  // the code of a block that sees no pair
  static constexpr int32_t kFull = 1;   // the code of a block that sees every pair

  int32_t block_q = 0;
  int32_t block_k = 0;
  int32_t q_blocks = 0;       // ceil(nq / block_q)
  int32_t k_blocks = 0;       // ceil(nk / block_k)
  int32_t words_per_row = 0;  // ceil(block_k / 32)
  // Per (b, h), b-major: its mask among the distinct masks.
  std::vector<int32_t> instance_of;
  // Per distinct mask, q_blocks x k_blocks codes, row-major: kEmpty, kFull, or (>= 2) the
  // index of the partial block's bitmap.
  std::vector<int32_t> codes;
  // Bitmap c, at c * block_q * words_per_row, is block_q rows of words_per_row words: bit x % 32
  // of word x / 32 of row y is pair (y, x) of the block, 1 = visible. Bitmap kEmpty is all 0
  // and bitmap kFull has all block_k bits of each row set, so the bits answer for every block.
  std::vector<uint32_t> bits;
};

struct ParamInfo {
  std::string name;
  std::string type;         // "int", "int[]", "segment", "segments"
  std::string declaration;  // as the program declares it, with its bound: "W: int >= 1"
};

// A compiled mask program. Cheap to copy; specialize never re-parses or recompiles.
class Mask {
 public:
  explicit Mask(std::shared_ptr<const ir::Program> program);

  const std::string& name() const;
  std::vector<ParamInfo> params() const;

  // Binds parameters and builds the descriptor. Throws cm::Error on bad input.
  // With `query_positions` (strictly increasing, in [0, dims.nq); empty: every row), the plan
  // holds only those query rows, against all dims.nk keys: its row i is the mask's query
  // position query_positions[i], and its nq is their count. That is a context-parallel rank's
  // plan (its shard of the queries against the gathered keys); Nq in the program stays
  // dims.nq. count_tiles and block_grid take the same selection.
  Plan specialize(const Params& params, const Dims& dims, const Tiling& tiling = {},
                  std::span<const int32_t> query_positions = {}) const;

  // The tile counts specialize's plan would report (PlanStats' TileCounts part), found without
  // building the descriptor: what a cost estimate needs, at a fraction of specialize's cost
  // for masks with many distinct partial tiles (grid neighbourhoods in strips). Throws as
  // specialize does, but for the descriptor's own 4 GiB limit, which it does not build.
  TileCounts count_tiles(const Params& params, const Dims& dims, const Tiling& tiling = {},
                         std::span<const int32_t> query_positions = {}) const;

  // The visible pairs of mask (b, h) as attention slices that cover each pair once, sorted by
  // (q_begin, k_begin): what MagiAttention's flexible attention and its context-parallel
  // dispatch take (q_ranges, k_ranges, attn_type_map). Costs O(rows + intervals), like
  // specialize's row evaluation, and builds no descriptor. Throws as specialize does, and for
  // (b, h) outside (dims.batch, dims.heads).
  std::vector<AttnSlice> slices(const Params& params, const Dims& dims, int32_t b = 0,
                                int32_t h = 0) const;

  // The masks on a uniform grid of tiling.m x tiling.n blocks, for FlexAttention's BlockMask:
  // each block empty, full or partial, and each partial block's visibility bits. Costs
  // O(rows + intervals + blocks + partial blocks' words), and builds no descriptor. Throws as
  // specialize does.
  BlockGrid block_grid(const Params& params, const Dims& dims, const Tiling& tiling = {},
                       std::span<const int32_t> query_positions = {}) const;

  const ir::Program& program() const { return *program_; }

 private:
  // The distinct row sets of the (b, h) masks, of the query_positions rows (all when empty),
  // and per (b, h) (b-major) its index among them.
  struct Instances;
  Instances evaluate_instances(const Params& params, const Dims& dims, const Tiling& tiling,
                               std::span<const int32_t> query_positions) const;

  std::shared_ptr<const ir::Program> program_;
  std::shared_ptr<const MaskCode> code_;
};

struct CompileResult {
  std::optional<Mask> mask;
  std::vector<Diagnostic> diagnostics;
  explicit operator bool() const { return mask.has_value(); }
};

struct CompileOptions {
  // If non-empty, the textual dump of the program after this pass is stored in `dump`.
  std::string dump_after;
};

// Parses, checks and compiles a mask program. `file` names the source in diagnostics.
CompileResult compile(const std::string& source, const std::string& file = "<input>",
                      const CompileOptions& options = {}, std::string* dump = nullptr);

// The pass names accepted by CompileOptions::dump_after, in pipeline order.
std::vector<std::string> pass_names();

}  // namespace cm
