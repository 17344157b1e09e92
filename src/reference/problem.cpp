// Argument checking for the reference attention entry points.
#include "reference/problem.h"

#include <compilemask/compilemask.h>

#include <cmath>
#include <limits>
#include <string>

namespace cm::reference {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error("reference attention: " + message);
}

std::string value_of(const char* name, int64_t value) {
  return std::string(name) + " = " + std::to_string(value);
}

}  // namespace

void require_tensor(const void* pointer, const char* name) {
  require(pointer != nullptr, std::string(name) + " must not be null");
}

Problem make_problem(const void* descriptor, const AttentionShape& shape,
                     const ReferenceOptions& options) {
  require_tensor(descriptor, "descriptor");
  const desc::Header& hd = desc::header(descriptor);
  require(hd.magic == desc::kMagic, "descriptor does not start with the CMSK magic number");
  require(hd.version == desc::kVersion, "descriptor version " + std::to_string(hd.version) +
                                            " is not the supported version " +
                                            std::to_string(desc::kVersion));
  require(hd.tile_m > 0 && hd.tile_m <= desc::kMaxTileM && hd.tile_n > 0 &&
              hd.tile_n <= desc::kMaxTileN,
          "descriptor tiling " + std::to_string(hd.tile_m) + "x" + std::to_string(hd.tile_n) +
              " is outside 1..256");
  const auto tiles = [](int64_t length, int32_t tile) { return (length + tile - 1) / tile; };
  // Each tile holds 1 to tile_m (tile_n) tokens (descriptor.h).
  require(hd.nq >= 0 && hd.nk >= 0 && hd.num_q_tiles >= tiles(hd.nq, hd.tile_m) &&
              hd.num_q_tiles <= hd.nq && hd.num_k_tiles >= tiles(hd.nk, hd.tile_n) &&
              hd.num_k_tiles <= hd.nk,
          "descriptor tile counts do not match its lengths and tiling");

  require(shape.nq == hd.nq, "shape." + value_of("nq", shape.nq) +
                                 " must equal the descriptor's nq = " + std::to_string(hd.nq));
  require(shape.nk == hd.nk, "shape." + value_of("nk", shape.nk) +
                                 " must equal the descriptor's nk = " + std::to_string(hd.nk));
  require(shape.batch > 0, "shape." + value_of("batch", shape.batch) + " must be > 0");
  require(shape.heads_q > 0, "shape." + value_of("heads_q", shape.heads_q) + " must be > 0");
  require(hd.batch == 1 || shape.batch == hd.batch,
          "shape." + value_of("batch", shape.batch) + " must equal the descriptor's batch = " +
              std::to_string(hd.batch) + " (a descriptor of batch 1 serves any batch)");
  require(hd.heads == 1 || shape.heads_q == hd.heads,
          "shape." + value_of("heads_q", shape.heads_q) + " must equal the descriptor's heads = " +
              std::to_string(hd.heads) + " (a descriptor of heads 1 serves any head count)");
  require(shape.heads_kv > 0, "shape." + value_of("heads_kv", shape.heads_kv) + " must be > 0");
  require(shape.heads_q % shape.heads_kv == 0, "shape." + value_of("heads_q", shape.heads_q) +
                                                   " must be a multiple of shape." +
                                                   value_of("heads_kv", shape.heads_kv));
  require(shape.head_dim > 0, "shape." + value_of("head_dim", shape.head_dim) + " must be > 0");
  require(shape.head_dim_v >= 0,
          "shape." + value_of("head_dim_v", shape.head_dim_v) + " must be >= 0 (0 means head_dim)");
  require(std::isfinite(options.scale) && options.scale >= 0,
          "options.scale must be finite and >= 0 (0 means 1/sqrt(head_dim))");
  require(std::isfinite(options.softcap) && options.softcap >= 0,
          "options.softcap must be finite and >= 0 (0 means no logit cap)");
  if (options.sinks != nullptr) {
    for (int32_t h = 0; h < shape.heads_q; ++h) {
      const float sink = options.sinks[h];
      require(!std::isnan(sink) && sink != std::numeric_limits<float>::infinity(),
              "options.sinks[" + std::to_string(h) + "] = " + std::to_string(sink) +
                  " must be finite or -inf (no sink)");
    }
  }
  if (options.alibi_slopes != nullptr) {
    for (int32_t h = 0; h < shape.heads_q; ++h) {
      const float slope = options.alibi_slopes[h];
      require(std::isfinite(slope), "options.alibi_slopes[" + std::to_string(h) +
                                        "] = " + std::to_string(slope) + " must be finite");
    }
  }
  require(options.threads >= 0,
          "options." + value_of("threads", options.threads) + " must be >= 0 (0 means all cores)");

  Problem p;
  p.blob = descriptor;
  p.shape = shape;
  p.shape.head_dim_v = value_head_dim(shape);
  p.scale = options.scale > 0 ? options.scale : 1.0 / std::sqrt(double{1.0} * shape.head_dim);
  p.softcap = options.softcap;
  p.sinks = options.sinks;
  p.alibi_slopes = options.alibi_slopes;
  p.group = shape.heads_q / shape.heads_kv;
  p.tile_n = hd.tile_n;
  p.num_q_tiles = hd.num_q_tiles;
  p.num_k_tiles = hd.num_k_tiles;
  return p;
}

}  // namespace cm::reference
