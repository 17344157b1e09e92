// The cases of the host-only kernel tests (tile_mask_test.cu, kernel_walk_test.cu): descriptors
// at the kernels' 128 x 128 tiling, each with the dense mask of every (b, h) of its instance
// map, made without the descriptor: the bundled examples through the brute-force oracle
// (tests/support), and random instances drawn densely (tests/descriptor/mask_fixtures.h).
#pragma once

#include <compilemask/compilemask.h>

#include "brute_force.h"
#include "descriptor/build.h"
#include "example_params.h"
#include "mask_fixtures.h"
#include "problem_shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace cm::kernel_test {

inline constexpr int kTile = 128;
inline const Tiling kKernelTiling{kTile, kTile};

struct KernelCase {
  std::string name;
  std::vector<uint64_t> blob;  // 8-byte aligned descriptor
  int32_t batch, heads, nq, nk;
  std::vector<std::vector<uint8_t>> dense;  // [b * heads + h], row-major nq x nk, 1 = visible

  const void* descriptor() const { return blob.data(); }
  bool visible(int32_t b, int32_t h, int32_t q, int32_t k) const {
    return dense[static_cast<size_t>(b * heads + h)][static_cast<size_t>(q) * nk + k] != 0;
  }
};

// The kernels' problem shape for a descriptor (host memory) and batch x heads_q query heads on
// heads_kv kv heads, with the descriptor's tile-start tables as the kernels read them when the
// tiles restart at block boundaries (host memory here).
inline sm90::ProblemShape problem_shape_of(const void* descriptor, int32_t batch, int32_t heads_q,
                                           int32_t heads_kv) {
  const desc::Header& h = desc::header(descriptor);
  sm90::ProblemShape s{};
  s.batch = batch;
  s.heads_q = heads_q;
  s.heads_kv = heads_kv;
  s.nq = h.nq;
  s.nk = h.nk;
  s.num_q_tiles = h.num_q_tiles;
  s.num_k_tiles = h.num_k_tiles;
  s.q_starts = desc::at<int32_t>(descriptor, h.q_starts_offset);
  s.k_starts = desc::at<int32_t>(descriptor, h.k_starts_offset);
  return s;
}

// Calls visit for every bundled example case (tests/compiler/example_params.h) at query
// lengths 113, 300 and 1000.
inline void for_each_example(const std::function<void(const KernelCase&)>& visit) {
  for (const int64_t n : {113, 300, 1000}) {
    for (const testing::ExampleCase& ex : testing::example_cases(n)) {
      CompileResult compiled = compile(testing::example_source(ex.example), ex.example + ".mask");
      ASSERT_TRUE(compiled) << ex.example;
      const Plan plan = compiled.mask->specialize(ex.params, ex.dims, kKernelTiling);
      const auto* words = static_cast<const uint64_t*>(plan.blob());
      KernelCase c{ex.example + " n=" + std::to_string(n),
                   {words, words + plan.size_bytes() / sizeof(uint64_t)},
                   ex.dims.batch,
                   ex.dims.heads,
                   static_cast<int32_t>(ex.dims.nq),
                   static_cast<int32_t>(ex.dims.nk),
                   {}};
      for (int32_t b = 0; b < c.batch; ++b) {
        for (int32_t h = 0; h < c.heads; ++h) {
          c.dense.push_back(testing::brute_force_dense(*compiled.mask, ex.params, ex.dims, b, h));
        }
      }
      visit(c);
    }
  }
}

// A random single-instance case of nq x nk (mask_fixtures' random_instance, with grid
// formulas when with_formulas).
inline KernelCase random_case(std::mt19937& rng, int32_t nq, int32_t nk, bool with_formulas,
                              const std::string& name) {
  const testing::RandomInstance inst = testing::random_instance(rng, nq, nk, with_formulas);
  PlanStats stats;
  return {name + " nq=" + std::to_string(nq) + " nk=" + std::to_string(nk),
          build_descriptor({inst.rows}, {0}, 1, 1, kKernelTiling, stats),
          1,
          1,
          nq,
          nk,
          {inst.expected.cells}};
}

}  // namespace cm::kernel_test
