// Inner loops of the reference attention over head_dim-long rows, with float inputs and an
// accumulator type Acc (float or double). The summation order is fixed, so results do not
// depend on threading.
#pragma once

namespace cm::reference {

// sum_i a[i] * b[i]. Eight independent partial sums let the compiler vectorize without
// reassociating, and hide the add latency.
template <class Acc>
Acc dot(const float* a, const float* b, int n) {
  constexpr int kLanes = 8;
  Acc lanes[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<Acc>(a[i + l]) * b[i + l];
  }
  Acc tail = 0;
  for (; i < n; ++i) tail += static_cast<Acc>(a[i]) * b[i];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])) + tail;
}

// acc[i] += w * x[i]. Chunks are loaded before they are stored, so the compiler vectorizes
// them without a run-time aliasing check.
template <class Acc>
void add_scaled(Acc* acc, Acc w, const float* x, int n) {
  constexpr int kChunk = 8;
  int i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    Acc chunk[kChunk];
    for (int l = 0; l < kChunk; ++l) chunk[l] = acc[i + l] + w * x[i + l];
    for (int l = 0; l < kChunk; ++l) acc[i + l] = chunk[l];
  }
  for (; i < n; ++i) acc[i] += w * x[i];
}

}  // namespace cm::reference
