// Default mode: the backward main kernel zeroes dq_accum a dispatch group of kv slices ahead, so
// that the preprocess does not write the whole accumulator (half of its DRAM traffic) while the
// main kernel, which is compute-bound, leaves DRAM and its idle producer warps unused.
//
// A kv slice t = kv_slice(b, hk) (bwd_params.h) is the work of `units` = num_k_tiles x key
// parts CTAs (bwd_work.cuh), dispatched in groups of g = BwdShape::slice_group slices (pairs,
// or all slices in a grid of a few waves); its dq_accum rows, those of the kv group's query
// heads, are contiguous. The preprocess zeroes the first g slices and the counts ws.zeroed. As
// it starts, the CTA of rank r in slice t zeroes the r-th of `units` equal chunks of slice t + g
// (then a proxy fence, since bulk reduce-adds read the zeros, and a release) and adds one to
// ws.zeroed[t + g]. Another of its threads waits until the count of slice t is complete and
// tells the consumers by an mbarrier, which they wait on after the K/V barrier. The CTAs of
// slice t - g, in the group before t's, were all dispatched before those of slice t and wait for
// nothing before counting themselves, so the wait always ends, and mostly at once.
#pragma once

#include "bwd_params.h"
#include "bwd_work.cuh"
#include "sync.cuh"

namespace cm::sm90 {

// The float4s of dq_accum in one kv slice: those of the rows of its kv group's query heads.
template <int kHeadDim>
__host__ __device__ inline int64_t dq_slice_vectors(const BwdShape& s) {
  return int64_t{s.heads_q / s.heads_kv} * s.rows_padded * dq_row_floats(kHeadDim, s.head_dim) / 4;
}

// The first float4 of the rank-th of `chunks` near-equal chunks of `vectors` float4s (rank =
// chunks: the end).
__host__ __device__ inline int64_t chunk_begin(int64_t vectors, int chunks, int rank) {
  return rank * vectors / chunks;
}

// The float4s of that chunk: 2^31 or more in a long query sequence's slice.
__host__ __device__ inline int64_t chunk_size(int64_t vectors, int chunks, int rank) {
  return chunk_begin(vectors, chunks, rank + 1) - chunk_begin(vectors, chunks, rank);
}

// Run by `threads` threads (thread in [0, threads)) that share the named barrier `barrier`:
// zero chunk `item.rank` of the `units` chunks of dq_accum of the slice a group ahead
// (dq_slice_vectors, chunk_begin) and count it there.
template <int kHeadDim>
__device__ void zero_slice_ahead(const BwdMainParams& p, const BwdItem& item, int units, int thread,
                                 int threads, int barrier) {
  const BwdShape& s = p.shape;
  const int next = kv_slice(s, item.b, item.hk) + s.slice_group;
  if (next >= s.batch * s.heads_kv) return;
  const int64_t slice_vectors = dq_slice_vectors<kHeadDim>(s);
  const int rank = item.rank;
  const int64_t begin = chunk_begin(slice_vectors, units, rank);
  float4* chunk = reinterpret_cast<float4*>(p.ws.dq_accum) + next * slice_vectors + begin;
  const int64_t size = chunk_size(slice_vectors, units, rank);
  // Streaming (evict-first) stores: the zeros are read a group of slices later, while the running
  // slices want L2 for their own rows.
  for (int64_t i = thread; i < size; i += threads) {
    __stcs(chunk + i, make_float4(0.f, 0.f, 0.f, 0.f));
  }
  fence_proxy_async_global();  // the zeros are read by other CTAs' bulk reduce-adds
  named_sync(barrier, threads);
  if (thread == 0) add_release(p.ws.zeroed + next, 1);
}

// One thread: waits until this CTA's slice is zero (all `units` chunks), then arrives on
// `slice_zeroed`, which the consumers wait on before their first step (and so before their
// first dQ reduce-add).
__device__ inline void signal_slice_zeroed(const BwdMainParams& p, const BwdItem& item, int units,
                                           uint64_t& slice_zeroed) {
  const int slice = kv_slice(p.shape, item.b, item.hk);
  if (slice >= p.shape.slice_group) {  // else the preprocess, which ran before, zeroed it
    while (load_acquire(p.ws.zeroed + slice) < units) __nanosleep(64);
  }
  arrive_barrier(slice_zeroed);
}

}  // namespace cm::sm90
