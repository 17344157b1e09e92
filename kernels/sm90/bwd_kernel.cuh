// The sm90 (Hopper) backward attention kernel driven by the transposed form of a CompileMask
// descriptor (per key tile: runs of full and partial query tiles).
//
// One CTA per item: (batch, kv head, key tile of 128 keys), or at head dim 256 half of a key
// tile (64 keys; BwdConfig describes the two designs). Three warpgroups:
//   WG0  producer (bwd_producer.cuh): warp 0 TMA-loads K and V once, then, for every query
//        head of the kv group and every query tile the descriptor lists for this key tile
//        (descending in deterministic mode), Q, dO, lse_log2 and dsum of 64 query rows at a
//        time (a "step", bwd_work.cuh) into a 2-stage mbarrier ring (1 stage at head dim 256);
//        with packed inputs it zeroes the loaded rows past the sequence's end (bwd_tails.cuh).
//        In the default mode warps 2-3 zero a share of the dq_accum of the kv slice a pair
//        ahead, and warp 1 waits until this CTA's slice is zero (bwd_zeroing.cuh).
//   WG1, WG2  consumers (bwd_consumer.cuh). Per step, by wgmma:
//          Sᵀ = K Qᵀ, dPᵀ = V dOᵀ                       (keys x 64 rows, from shared memory)
//          Pᵀ = exp2(Sᵀ scale_log2 - lse_log2), dSᵀ = Pᵀ (dPᵀ - dsum)   (in registers)
//          dV += Pᵀ dO, dK += dSᵀ Q
//          dQ_step = dS K                                 (dS through shared memory; each
//                                                          warpgroup takes half the head dim)
//        Head dims 64 and 128: each warpgroup owns 64 of the 128 keys through every product,
//        and Pᵀ and dSᵀ enter dV and dK as register operands. Head dim 256: each warpgroup takes
//        32 of the step's rows for Sᵀ and dPᵀ, then half the head dim of dV, dK and dQ_step,
//        with Pᵀ and dS read from shared memory.
//        dQ_step goes to one of two shared-memory buffers (one at 256), in turn, and is added to
//        the fp32 dq_accum workspace by one bulk reduce-add (cp.reduce.async.bulk), which may
//        still read it during the next step; in deterministic mode a dQ writer thread per
//        buffer (lane 0 of warps 1 and 2) issues it, ordered across items by a per-64-row
//        semaphore (ascending key tile, then part; bwd_dq_writer.cuh).
// dK and dV stay in registers over all steps (so GQA groups are summed inside the CTA) and are
// written once; when the key tiles alone make few waves, the group's query heads are split over
// BwdShape::head_splits CTAs, which write float32 sums that bwd_kv_postprocess adds up. Full tiles
// run no mask code; partial tiles and the key tile cut by nk build a 64-row visibility bitmap of
// the item's keys from the descriptor's per-row intervals. Rows past nq and rows that see no key
// have lse_log2 = +inf (bwd_params.h), so their P is exactly 0. Tile shapes, the register split and
// shared memory: bwd_config.cuh.
#pragma once

#include "bwd_config.cuh"
#include "bwd_consumer.cuh"
#include "bwd_dq_writer.cuh"
#include "bwd_params.h"
#include "bwd_producer.cuh"
#include "bwd_work.cuh"
#include "bwd_zeroing.cuh"
#include "sync.cuh"

#include <cutlass/arch/reg_reconfig.h>

#include <cuda.h>

namespace cm::sm90 {

// kLogitMods: the logits' modifications that params asks for (logit_mods.h), compile-time as in
// the forward (tested at run time, the cap's branch made the uncapped backward 1.6-2.8% slower,
// run 192).
// kHeadSplits: params.shape.head_splits is more than 1 (compile-time too: as a run-time branch
// in the epilogue it made the deterministic head-dim-128 kernels spill in their step loop).
template <class Config, bool kDeterministic, int kLogitMods, bool kHeadSplits>
__global__ void __launch_bounds__(Config::kThreads, 1)
    bwd_kernel(const __grid_constant__ BwdMainParams params,
               const __grid_constant__ CUtensorMap tma_q, const __grid_constant__ CUtensorMap tma_k,
               const __grid_constant__ CUtensorMap tma_v,
               const __grid_constant__ CUtensorMap tma_dout) {
  extern __shared__ unsigned char smem_raw[];
  auto* ss = &aligned_storage<typename Config::SharedStorage>(smem_raw);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    prefetch_tensor_maps(&tma_q, &tma_k, &tma_v, &tma_dout);
    Barrier::init(&ss->kv_full, 1);
    Barrier::init(&ss->kv_loaded, 1);
    Barrier::init(&ss->slice_zeroed, 1);
    for (int s = 0; s < Config::kStages; ++s) {
      Barrier::init(&ss->step_full[s], 1);
      Barrier::init(&ss->step_loaded[s], 1);
      Barrier::init(&ss->step_empty[s], Config::kConsumerThreads);
    }
    for (int b = 0; b < Config::kDqBuffers; ++b) {
      Barrier::init(&ss->dq_full[b], 1);
      Barrier::init(&ss->dq_empty[b], 1);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  const int head_splits = head_splits_of<kHeadSplits>(params.shape);
  const BwdItem item = decode_bwd_item(params, kDeterministic, Config::kKeyParts, head_splits);
  const int units = bwd_slice_items(params.shape, Config::kKeyParts, head_splits);
  // A packed sequence that does not fit its tensors (sequence_fits, problem_shape.h): nothing is
  // loaded, computed or written (packed_rows.cu writes NaN on its dK and dV rows). The zeroing
  // warps still zero their share of a slice ahead, which other CTAs wait for.
  if (warp < 4) {
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegs>();
    if (warp == 0) {
      if (sequence_fits(params.shape, item.b)) {
        run_bwd_producer<Config, kDeterministic>(params, *ss, item, head_splits, &tma_q, &tma_k,
                                                 &tma_v, &tma_dout, static_cast<int>(threadIdx.x));
      }
    } else if (kDeterministic && warp <= Config::kDqBuffers && threadIdx.x % 32 == 0) {
      if (sequence_fits(params.shape, item.b)) {
        run_bwd_dq_writer<Config>(params, *ss, item, head_splits, warp - 1);
      }
    } else if (!kDeterministic && threadIdx.x == 32) {
      signal_slice_zeroed(params, item, units, ss->slice_zeroed);
    } else if (!kDeterministic && warp > 1) {
      zero_slice_ahead<Config::kHeadDim>(params, item, units, static_cast<int>(threadIdx.x) - 64,
                                         64, kBwdZeroingBarrier);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegs>();
    if (sequence_fits(params.shape, item.b)) {
      BwdConsumer<Config, kDeterministic, kLogitMods, kHeadSplits>{
          params, *ss, item, static_cast<int>(threadIdx.x) - 128}
          .run();
    }
  }
}

}  // namespace cm::sm90
