// The sm90 (Hopper) forward attention kernel driven by a CompileMask descriptor.
//
// One persistent CTA per SM, three warpgroups:
//   WG0  producer. The loader (one thread of warp 0; fwd_loader.cuh) pulls work items (b, h,
//        query tile) from a global counter in paired order (paired_unit, problem_shape.h;
//        each (b, h)'s query tiles longest-first), decodes them and
//        hands them on through a 2-slot ring, and TMA-loads Q and the K/V tiles the descriptor
//        lists for that query tile, telling the consumers with each K/V stage whether it is
//        masked and whether it ends the item. The mask warps (warps 1-3; fwd_masker.cuh) walk
//        the same tiles (fwd_work.cuh) and write the visibility of every masked tile's rows
//        into a ring of mask slots, ahead of use. With packed or paged K/V, the loader's warp's
//        other lanes (fwd_guard.cuh) zero the V rows that no row of a masked tile sees.
//   WG1, WG2  consumers (fwd_consumer.cuh): each owns 64 of the 128 query rows. S = Q Kᵀ by
//        wgmma from shared memory, online softmax in registers, O += P V by wgmma with P from
//        registers. They never read the descriptor: a masked tile costs one shared-memory load
//        per row.
// At head dim 256 each key tile passes through the K/V stages and the products as two 64-key
// parts (FwdConfig::kStageKeys), its visibility read once for both.
// Tile shapes, pipeline depths, the register split and shared memory: fwd_config.cuh.
// Full key tiles run no mask code; partial tiles (and key tiles narrower than 128) mask elements
// from per-row visibility bits (tile_mask.cuh). Rows that see no key get O = 0, LSE = -inf.
#pragma once

#include "fwd_config.cuh"
#include "fwd_consumer.cuh"
#include "fwd_guard.cuh"
#include "fwd_loader.cuh"
#include "fwd_masker.cuh"
#include "fwd_params.h"
#include "sync.cuh"

#include <cutlass/arch/reg_reconfig.h>

#include <cuda.h>

namespace cm::sm90 {

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    fwd_kernel(const __grid_constant__ FwdParams params, const __grid_constant__ CUtensorMap tma_q,
               const __grid_constant__ CUtensorMap tma_k,
               const __grid_constant__ CUtensorMap tma_v) {
  extern __shared__ unsigned char smem_raw[];
  auto* ss = &aligned_storage<typename Config::SharedStorage>(smem_raw);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    prefetch_tensor_maps(&tma_q, &tma_k, &tma_v);
    for (int s = 0; s < Config::kQStages; ++s) {
      Barrier::init(&ss->q_full[s], 1);
      Barrier::init(&ss->q_empty[s], Config::kConsumerWarps);
    }
    for (int s = 0; s < Config::kStages; ++s) {
      Barrier::init(&ss->k_full[s], 1);
      // A masked tile's V lands on v_loaded, and one guard lane completes v_full (fwd_guard.cuh).
      Barrier::init(&ss->v_loaded[s], 1);
      Barrier::init(&ss->v_full[s], 1);
      Barrier::init(&ss->guard_full[s], 1);
      Barrier::init(&ss->guard_empty[s], kGuardLanes);
      Barrier::init(&ss->k_empty[s], Config::kConsumerWarps);
      Barrier::init(&ss->v_empty[s], Config::kConsumerWarps);
    }
    for (int s = 0; s < Config::kItemSlots; ++s) {
      Barrier::init(&ss->item_full[s], 1);
      Barrier::init(&ss->item_empty[s], Config::kConsumerWarps + Config::kMaskWarps);
    }
    for (int s = 0; s < Config::kMaskSlots; ++s) {
      Barrier::init(&ss->mask_full[s], Config::kMaskThreads);
      // The guard lanes read the mask slots too (fwd_guard.cuh).
      Barrier::init(&ss->mask_empty[s],
                    Config::kConsumerThreads + (params.zero_unseen ? kGuardLanes : 0));
    }
    cutlass::arch::fence_barrier_init();
  }
  if (threadIdx.x <= kMaskTileN) ss->quad_below[threadIdx.x] = quad_bits_below(threadIdx.x);
  __syncthreads();

  if (warp < 4) {
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegs>();
    if (threadIdx.x == 0) {
      run_loader<Config>(params, *ss, &tma_q, &tma_k, &tma_v);
    } else if (warp > 0) {
      run_masker<Config>(params, *ss, static_cast<int>(threadIdx.x) - 32);
    } else if (params.zero_unseen) {
      run_guard_lanes<Config>(*ss, static_cast<int>(threadIdx.x));
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegs>();
    Consumer<Config>(params, *ss, static_cast<int>(threadIdx.x) - 128).run();
  }
}

}  // namespace cm::sm90
