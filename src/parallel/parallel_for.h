// A small work-sharing loop over independent items on std::thread workers, with progress
// reported from the calling thread. Used by the reference attention, by Mask::specialize for its
// (b, h) instances and by the block grid for its bands of block rows.
#pragma once

#include <cstdint>
#include <functional>

namespace cm::parallel {

// Number of workers to use for `count` items: `requested` (0 means hardware concurrency),
// capped at `count`, at least 1.
int resolve_workers(int requested, int64_t count);

// Number of workers for `count` items of `work` in all, counted in rows evaluated (or a row's
// worth of work each): at most one per 2^14, so that small jobs start no thread (a thread
// costs about as much as evaluating that many rows), at most `count` and at most hardware
// concurrency.
int workers_for_work(int64_t count, int64_t work);

// workers_for_work for `count` mask instances of `rows_each` query rows each.
int workers_for_rows(int64_t count, int64_t rows_each);

// Runs body(item, worker) once for every item in [0, count), on `workers` threads (one worker:
// on the calling thread, in order); `worker` is in [0, workers), so the body can use per-worker
// scratch. Items are handed out dynamically, so the caller must make each item's result
// independent of which worker runs it.
// If `progress` is set it is called on the calling thread with the completed fraction, at most
// 20 times, the last time with 1.0. An exception thrown by a body is rethrown here after all
// workers stop.
void parallel_for(int64_t count, int workers, const std::function<void(double)>& progress,
                  const std::function<void(int64_t item, int worker)>& body);

}  // namespace cm::parallel
