// cm::Segments constructors.
#include <compilemask/compilemask.h>

namespace cm {

Segments Segments::from_boundaries(const std::vector<int64_t>& boundaries) {
  Segments s;
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] < boundaries[i - 1]) {
      throw Error("segment boundaries must not decrease: boundary " + std::to_string(i) + " (" +
                  std::to_string(boundaries[i]) + ") is below boundary " + std::to_string(i - 1) +
                  " (" + std::to_string(boundaries[i - 1]) + ")");
    }
    s.starts.push_back(boundaries[i - 1]);
    s.ends.push_back(boundaries[i]);
  }
  return s;
}

Segments Segments::from_lengths(const std::vector<int64_t>& lengths, int64_t origin) {
  Segments s;
  int64_t at = origin;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      throw Error("segment lengths must be >= 0: length " + std::to_string(i) + " is " +
                  std::to_string(lengths[i]));
    }
    s.starts.push_back(at);
    at += lengths[i];
    s.ends.push_back(at);
  }
  return s;
}

}  // namespace cm
