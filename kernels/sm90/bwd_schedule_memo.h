// A process-wide memo of the backward's replayed schedules (auto_bwd_schedule,
// bwd_head_splits.h). The replay costs 10-200 us of host time on grids of a few waves, where the
// backward itself may take 0.1-1 ms, and a training loop asks for the same problem every step
// (the Python operator twice: the automatic count for the workspace, then the launch's order
// for that count). Host code (bwd_host.cu).
//
// Keyed by a hash of the descriptor's bytes and every other value the replay reads. A collision
// could only hand one problem another's schedule: any count and order computes the same
// gradients, and backward() checks the workspace against the count it runs.
#pragma once

#include "bwd_head_splits.h"

#include "descriptor/hash.h"

#include <compilemask/descriptor.h>

#include <stdint.h>

#include <mutex>
#include <span>
#include <unordered_map>

namespace cm::sm90 {

// What auto_bwd_schedule reads besides the descriptor's bytes.
struct BwdScheduleKey {
  uint64_t descriptor_hash;
  int32_t batch, heads_q, heads_kv, parts, sms, head_splits;
  bool deterministic;
  bool operator==(const BwdScheduleKey&) const = default;
};

// Schedules kept at most; the memo starts afresh past it (a process runs few shapes).
inline constexpr size_t kBwdScheduleMemoEntries = 256;

// The hash of the descriptor at `descriptor` (host memory, header.total_bytes long).
inline uint64_t bwd_descriptor_hash(const void* descriptor) {
  const auto* bytes = static_cast<const unsigned char*>(descriptor);
  return descriptor::hash_bytes(
      std::span<const unsigned char>(bytes, desc::header(descriptor).total_bytes), 0);
}

// auto_bwd_schedule(p, deterministic, parts, sms, head_splits), replayed once per key.
// Thread-safe; the replay runs outside the lock. Preconditions: as auto_bwd_schedule's.
inline BwdSchedule memoized_bwd_schedule(const BwdMainParams& p, bool deterministic, int parts,
                                         int sms, int head_splits) {
  if (!bwd_schedule_replays(p.shape, deterministic, parts, sms, head_splits)) {
    return auto_bwd_schedule(p, deterministic, parts, sms, head_splits);  // no replay to keep
  }
  struct KeyHash {
    size_t operator()(const BwdScheduleKey& k) const {
      uint64_t h = k.descriptor_hash;
      for (const int64_t v :
           {int64_t{k.batch}, int64_t{k.heads_q}, int64_t{k.heads_kv}, int64_t{k.parts},
            int64_t{k.sms}, int64_t{k.head_splits}, int64_t{k.deterministic}}) {
        h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ull;
      }
      return static_cast<size_t>(h);
    }
  };
  static std::mutex mutex;
  static std::unordered_map<BwdScheduleKey, BwdSchedule, KeyHash> memo;
  const BwdShape& s = p.shape;
  const BwdScheduleKey key{bwd_descriptor_hash(p.descriptor),
                           s.batch,
                           s.heads_q,
                           s.heads_kv,
                           parts,
                           sms,
                           head_splits,
                           deterministic};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = memo.find(key); it != memo.end()) return it->second;
  }
  const BwdSchedule schedule = auto_bwd_schedule(p, deterministic, parts, sms, head_splits);
  const std::lock_guard<std::mutex> lock(mutex);
  if (memo.size() >= kBwdScheduleMemoEntries) memo.clear();
  memo.emplace(key, schedule);
  return schedule;
}

}  // namespace cm::sm90
