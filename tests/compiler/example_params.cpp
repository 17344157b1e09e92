// Test-only example parameter sets (see example_params.h).
#include "example_params.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace cm::testing {

namespace {

// Lengths that cover n: a mix of empty, one-token and longer segments.
std::vector<int64_t> ragged_lengths(int64_t n) {
  const int64_t pattern[] = {0, 1, 7, 2, 13, 0, 5, 31, 1};
  std::vector<int64_t> lens;
  int64_t total = 0;
  for (size_t i = 0; total < n; ++i) {
    const int64_t len = std::min(pattern[i % 9], n - total);
    lens.push_back(len);
    total += len;
  }
  return lens;
}

}  // namespace

std::string example_source(const std::string& name) {
  std::ifstream in(std::string(CM_SOURCE_DIR) + "/examples/" + name + ".mask");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<ExampleCase> example_cases(int64_t n) {
  const Dims d{n, n, 1, 1};
  const std::vector<int64_t> lens = ragged_lengths(n);
  std::vector<int64_t> ctx, targets;
  for (int64_t len : lens) {
    ctx.push_back(std::min<int64_t>(2, len / 4));
    targets.push_back(len == 0 ? 0 : std::max<int64_t>(1, len / 8));
  }
  const int64_t prompt = n / 4;
  const int64_t side = 5;
  std::vector<ExampleCase> cases = {
      {"causal", {}, d},
      {"causal", {}, Dims{n, n + 3, 1, 1}},
      {"causal", {}, Dims{n + 5, n, 1, 1}},
      {"sliding_window", {{"W", int64_t{9}}}, d},
      {"sliding_window", {{"W", int64_t{1}}}, Dims{n, n + 7, 1, 1}},
      {"chunked_causal", {{"C", int64_t{6}}}, d},
      {"prefix_lm", {{"P", int64_t{n / 3}}}, d},
      {"sinks_window", {{"S", int64_t{2}}, {"W", int64_t{5}}}, d},
      {"doc_causal", {{"docs", Segments::from_lengths(lens)}}, d},
      {"shared_prefix",
       {{"prompt", Segments::from_lengths({prompt})},
        {"responses", Segments::from_lengths(ragged_lengths(n - prompt), prompt)}},
       d},
      {"hstu", {{"seqs", Segments::from_lengths(lens)}, {"ctx", ctx}, {"targets", targets}}, d},
      {"clear",
       {{"text", std::min<int64_t>(n, 4)}, {"s", side}, {"r", int64_t{2}}, {"strip", side}},
       Dims{std::min<int64_t>(n, 4) + side * side, std::min<int64_t>(n, 4) + side * side, 1, 1}},
      {"clear",  // strip order, the last strip narrower
       {{"text", std::min<int64_t>(n, 4)}, {"s", side}, {"r", int64_t{3}}, {"strip", int64_t{3}}},
       Dims{std::min<int64_t>(n, 4) + side * side, std::min<int64_t>(n, 4) + side * side, 1, 1}},
      {"block_causal_video", {{"F", int64_t{4}}}, d},
      {"neighbourhood_2d",
       {{"rows", int64_t{4}},
        {"cols", int64_t{6}},
        {"ry", int64_t{1}},
        {"rx", int64_t{2}},
        {"shape", int64_t{0}},
        {"strip", int64_t{6}}},
       Dims{24, 24, 1, 1}},
      {"neighbourhood_2d",  // strip order, the last strip narrower
       {{"rows", int64_t{7}},
        {"cols", int64_t{5}},
        {"ry", int64_t{3}},
        {"rx", int64_t{2}},
        {"shape", int64_t{1}},
        {"strip", int64_t{2}}},
       Dims{35, 35, 1, 1}},
      {"video_neighbourhood",  // each frame in strips
       {{"frames", int64_t{3}},
        {"rows", int64_t{4}},
        {"cols", int64_t{5}},
        {"rt", int64_t{2}},
        {"ry", int64_t{2}},
        {"rx", int64_t{3}},
        {"strip", int64_t{3}}},
       Dims{60, 60, 1, 1}},
      {"cross_attention",
       {{"queries", Segments::from_lengths(lens)},
        {"keys", Segments::from_lengths(std::vector<int64_t>(lens.size(), 3))}},
       Dims{n, static_cast<int64_t>(lens.size()) * 3, 1, 1}},
      {"per_head_window", {{"windows", std::vector<int64_t>{1, 4, 4, 0}}}, Dims{n, n, 2, 4}},
      {"padded",
       {{"lengths", std::vector<int64_t>{n, 0, n / 2, 1}}, {"causal", int64_t{1}}},
       Dims{n, n, 4, 1}},
      {"padded",
       {{"lengths", std::vector<int64_t>{n / 3, n}}, {"causal", int64_t{0}}},
       Dims{n, n, 2, 2}},
  };
  // row_intervals: bounds that stray past both ends and cross, per batch row (2 x n entries).
  std::vector<int64_t> starts, ends;
  for (int64_t i = 0; i < 2 * n; ++i) {
    starts.push_back((i * 37) % (n + 9) - 4);
    ends.push_back(starts.back() + (i * 11) % 23 - 3);
  }
  cases.push_back({"row_intervals", {{"starts", starts}, {"ends", ends}}, Dims{n, n, 2, 1}});
  std::vector<int64_t> starts2, ends2;
  for (int64_t i = 0; i < 2 * n; ++i) {
    starts2.push_back((i * 53) % (n + 5) - 2);
    ends2.push_back(starts2.back() + (i * 7) % 19 - 2);
  }
  cases.push_back({"row_intervals_2",
                   {{"starts", starts}, {"ends", ends}, {"starts2", starts2}, {"ends2", ends2}},
                   Dims{n, n, 2, 1}});
  // row_intervals_per_head: both pairs per (batch row, head) of 3 heads, 2 x 3 x n entries
  // each, straying past both ends and crossing as above.
  std::vector<int64_t> head_starts, head_ends, head_starts2, head_ends2;
  for (int64_t i = 0; i < 6 * n; ++i) {
    head_starts.push_back((i * 41) % (n + 7) - 3);
    head_ends.push_back(head_starts.back() + (i * 13) % 29 - 4);
    head_starts2.push_back((i * 29) % (n + 3));
    head_ends2.push_back(head_starts2.back() + (i * 5) % 17 - 1);
  }
  cases.push_back({"row_intervals_per_head",
                   {{"Nh", int64_t{3}},
                    {"starts", head_starts},
                    {"ends", head_ends},
                    {"starts2", head_starts2},
                    {"ends2", head_ends2}},
                   Dims{n, n, 2, 3}});
  return cases;
}

}  // namespace cm::testing
