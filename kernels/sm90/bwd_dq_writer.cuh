// The backward main kernel's dQ writers in deterministic mode: one thread per dq buffer, each in
// its own warp of the producer warpgroup's idle warps, adds the dQ_step of each step that fills
// its buffer into dq_accum in the fixed order, so that the consumers never wait for it. Per such
// step, in the order StepCursor<true> walks (query tiles descending): it waits until the
// consumers filled the buffer (dq_full), then until the lower items (ascending key tile, then
// part) added theirs to the same 64 rows (the per-64-row semaphore reaches dq_rank), adds the
// buffer by one bulk reduce-add, hands the buffer back (dq_empty) once read, and raises the
// semaphore once the writes are complete. The
// consumers run up to Config::kDqBuffers steps ahead of the writers. One writer for both buffers
// (run 248: 1.52-1.61 times as fast at 32K as the consumers making these adds themselves) made
// the adds one after another, each a semaphore read, a reduce-add and its completion: with the
// order, it ran causal and sliding 1.35 and 1.40 times as long as with the semaphore wait left
// out (run 250), where a per-step replay of the waits' chains accounts for 3% and 2%
// (docs/perf-notes.md, session 47); two writers overlap two steps' adds.
#pragma once

#include "bwd_params.h"
#include "bwd_work.cuh"
#include "sync.cuh"

namespace cm::sm90 {

// The writer of dq buffer `buffer_index`.
template <class Config>
__device__ void run_bwd_dq_writer(const BwdMainParams& p, typename Config::SharedStorage& ss,
                                  const BwdItem& item, int head_splits, int buffer_index) {
  PipeState<Config::kDqBuffers> buffer;
  StepCursor<true> steps(p, item, head_splits);
  for (BwdStep step; steps.next(step); buffer.advance()) {
    if (buffer.stage != buffer_index) continue;
    const int64_t row = dq_first_row(p, item.b, step);
    float* dst = p.ws.dq_accum + row * dq_row_floats(Config::kHeadDim, p.shape.head_dim);
    int32_t* semaphore = p.ws.semaphores + row / kBwdStepRows;
    const int rank = Config::kKeyParts * dq_rank(p, item, step.h, step.m, step.half) + item.part;
    wait_barrier(ss.dq_full[buffer.stage], buffer.phase);
    while (load_acquire(semaphore) != rank) {
    }
    fence_proxy_async_global();  // the lower items' adds come before this one's (async proxy)
    bulk_reduce_add(dst, ss.dq[buffer.stage], Config::dq_step_bytes(p.shape));
    bulk_wait_read<0>();
    arrive_barrier(ss.dq_empty[buffer.stage]);
    bulk_wait_all();
    fence_proxy_async_global();  // the add's writes come before the release (generic proxy)
    add_release(semaphore, 1);
  }
}

}  // namespace cm::sm90
