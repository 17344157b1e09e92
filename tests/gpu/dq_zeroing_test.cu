// The backward's dq_accum zeroing ahead (kernels/sm90/bwd_zeroing.cuh), on the host: the chunks
// that the num_k_tiles x key parts CTAs of a kv slice zero in the slice a pair ahead are disjoint
// and cover exactly the dq_accum rows that the consumers add to for that slice's items (the query
// heads of its kv group, every padded row, dq_row_floats each), and kv_slice numbers the items'
// slices in their dispatch order (pairs of consecutive slices, bwd_work.cuh).
#include "bwd_launch.h"
#include "bwd_zeroing.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace cm::sm90 {
namespace {

struct Shape {
  int32_t batch, heads_q, heads_kv, nq, num_k_tiles;
};

BwdShape bwd_shape(const Shape& c, int head_dim) {
  BwdShape s{};
  s.head_dim = head_dim;
  s.batch = c.batch;
  s.heads_q = c.heads_q;
  s.heads_kv = c.heads_kv;
  s.nq = c.nq;
  s.num_k_tiles = c.num_k_tiles;
  s.rows_padded = (c.nq + kBwdTile - 1) / kBwdTile * kBwdTile;
  return s;
}

// Q of head_dim columns on the kernel for kHeadDim, whose dq_accum rows hold row_floats.
template <int kHeadDim>
void check_cover(const Shape& c, int head_dim, int64_t row_floats) {
  const BwdShape s = bwd_shape(c, head_dim);
  ASSERT_EQ(dq_row_floats(kHeadDim, head_dim), row_floats) << "head dim " << head_dim;
  const int group = s.heads_q / s.heads_kv;
  for (int b = 0; b < s.batch; ++b) {
    for (int hk = 0; hk < s.heads_kv; ++hk) {
      const int slice = kv_slice(s, b, hk);
      ASSERT_EQ(slice, b * s.heads_kv + hk) << "slices follow the dispatch order (hk, then b)";
      // The float4s the consumers address for this slice: rows of the group's query heads, as
      // bwd_consumer.cuh forms dst = dq_accum + (bh * rows_padded + row) * row_floats.
      const int64_t first_bh = int64_t{b} * s.heads_q + int64_t{hk} * group;
      const int64_t want_begin = first_bh * s.rows_padded * row_floats / 4;
      const int64_t want_end = (first_bh + group) * s.rows_padded * row_floats / 4;
      // As zero_slice_ahead forms its chunk: slice * slice_vectors + chunk_begin(rank).
      const int64_t slice_vectors = dq_slice_vectors<kHeadDim>(s);
      EXPECT_EQ(slice * slice_vectors, want_begin) << "slice " << slice << " starts elsewhere";
      int64_t at = want_begin;
      int64_t min_size = INT64_MAX, max_size = 0;
      // The slice's CTAs, as bwd_kernel.cuh counts them.
      const int units = s.num_k_tiles * (kBwdTile / backward_keys_per_item(kHeadDim));
      for (int rank = 0; rank < units; ++rank) {
        const int64_t begin = slice * slice_vectors + chunk_begin(slice_vectors, units, rank);
        const int64_t size = chunk_size(slice_vectors, units, rank);
        ASSERT_EQ(begin, at) << "rank " << rank << " of slice " << slice
                             << ": chunks must follow each other without gap or overlap";
        at += size;
        min_size = std::min(min_size, size);
        max_size = std::max(max_size, size);
      }
      EXPECT_EQ(at, want_end) << "slice " << slice << ": the chunks must end at the slice's end";
      EXPECT_LE(max_size - min_size, 1) << "slice " << slice << ": chunks must be near-equal";
    }
  }
}

TEST(DqZeroing, ChunksCoverEachSliceExactly) {
  // The benchmark shapes, GQA and MQA, odd lengths, one key tile, chunk counts that do not
  // divide the slice, and a long query sequence against one key tile, whose chunks hold 2^31
  // float4s or more (zero_slice_ahead counts them in 64 bits).
  const std::vector<Shape> shapes = {
      {1, 16, 16, 32768, 256}, {8, 16, 16, 4096, 32}, {32, 4, 2, 1024, 8}, {3, 8, 1, 300, 3},
      {2, 6, 3, 17, 1},        {5, 4, 4, 1023, 7},    {1, 2, 1, 4097, 33}, {3, 64, 1, 1 << 20, 1},
  };
  for (const Shape& c : shapes) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + " heads " + std::to_string(c.heads_q) + "/" +
                 std::to_string(c.heads_kv) + " nq " + std::to_string(c.nq) + " key tiles " +
                 std::to_string(c.num_k_tiles));
    check_cover<64>(c, 40, 64);
    check_cover<128>(c, 128, 128);
    check_cover<128>(c, 40, 128);  // V wider than 64 takes the kernel for 128
    check_cover<256>(c, 256, 256);
    check_cover<256>(c, 192, 192);  // MLA: Q's 64 padded columns left out
    check_cover<256>(c, 136, 192);  // whole 64-float swizzle groups
    check_cover<256>(c, 40, 64);    // V wider than 128 takes the kernel for 256
  }
  // The long shape's single chunk is past int32: counted in an int, it would zero nothing.
  const BwdShape long_rows = bwd_shape(shapes.back(), 128);
  EXPECT_GT(chunk_size(dq_slice_vectors<128>(long_rows), 1, 0), INT32_MAX);
}

}  // namespace
}  // namespace cm::sm90
