// Work-sharing loop: workers pull item indices from a shared counter; the calling thread only
// waits and reports progress. One worker runs the items on the calling thread.
#include "parallel/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cm::parallel {

namespace {
constexpr int64_t kProgressSteps = 20;
constexpr int64_t kRowsPerWorker = int64_t{1} << 14;
}  // namespace

int resolve_workers(int requested, int64_t count) {
  int64_t workers = requested > 0 ? requested : std::thread::hardware_concurrency();
  workers = std::min<int64_t>(workers, count);
  return static_cast<int>(std::max<int64_t>(workers, 1));
}

int workers_for_work(int64_t count, int64_t work) {
  const int64_t wanted = (std::max<int64_t>(work, 1) + kRowsPerWorker - 1) / kRowsPerWorker;
  return resolve_workers(0, std::min(count, wanted));
}

int workers_for_rows(int64_t count, int64_t rows_each) {
  return workers_for_work(count, count * std::max<int64_t>(rows_each, 1));
}

void parallel_for(int64_t count, int workers, const std::function<void(double)>& progress,
                  const std::function<void(int64_t item, int worker)>& body) {
  if (workers <= 1) {  // no thread to start (specialize's one (b, h) instance, say)
    int64_t reported_step = 0;
    for (int64_t item = 0; item < count; ++item) {
      body(item, 0);
      const int64_t step = (item + 1) * kProgressSteps / count;
      if (progress && step > reported_step) progress(static_cast<double>(step) / kProgressSteps);
      reported_step = std::max(reported_step, step);
    }
    if (progress && reported_step < kProgressSteps) progress(1.0);
    return;
  }
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  std::condition_variable changed;
  int64_t completed = 0;  // guarded by mutex
  int running = workers;  // guarded by mutex
  std::exception_ptr failure;

  auto work = [&](int worker) {
    try {
      for (int64_t item = next++; item < count; item = next++) {
        body(item, worker);
        std::lock_guard lock(mutex);
        ++completed;
        changed.notify_one();
      }
    } catch (...) {
      next = count;  // stop handing out items
      std::lock_guard lock(mutex);
      if (!failure) failure = std::current_exception();
    }
    std::lock_guard lock(mutex);
    --running;
    changed.notify_one();
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);

  int64_t reported_step = 0;
  {
    std::unique_lock lock(mutex);
    while (running > 0) {
      changed.wait(lock);
      const int64_t step = count > 0 ? completed * kProgressSteps / count : kProgressSteps;
      if (progress && step > reported_step && !failure) {
        reported_step = step;
        lock.unlock();
        progress(static_cast<double>(step) / kProgressSteps);
        lock.lock();
      }
    }
  }
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  if (progress && reported_step < kProgressSteps) progress(1.0);
}

}  // namespace cm::parallel
