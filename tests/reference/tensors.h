// Tensor helpers for the reference attention tests: random inputs, NaN-poisoned outputs and
// error measures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace cm::test {

// Uniform in [-2, -0.01] U [0.01, 2]: never zero, so a skipped term always shows.
inline std::vector<float> random_tensor(size_t size, std::mt19937& rng) {
  std::uniform_real_distribution<float> magnitude(0.01f, 2.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> t(size);
  for (float& x : t) x = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return t;
}

inline std::vector<float> poisoned(size_t size) {
  return std::vector<float>(size, std::numeric_limits<float>::quiet_NaN());
}

// max |got - want| divided by max(1, max |want|); NaN in `got` gives infinity.
template <class Got, class Want>
double relative_error(const std::vector<Got>& got, const std::vector<Want>& want) {
  double worst = 0, scale = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::isinf(w) && g == w) continue;  // matching -inf LSE of fully masked rows
    const double diff = std::fabs(g - w);
    worst = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(worst, diff);
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  }
  return worst / scale;
}

}  // namespace cm::test
