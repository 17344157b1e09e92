// Helpers shared by the sm90 kernel tests (gpu_test_support.h).
#include "gpu_test_support.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace cm::gpu_test {
namespace {

std::string read_example(const std::string& name) {
  std::ifstream in(std::string(CM_SOURCE_DIR) + "/examples/" + name + ".mask");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

bool have_hopper() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major == 9 && prop.minor == 0;
}

cm::Plan make_plan(const std::string& example, const cm::Params& params, int nq, int nk, int batch,
                   int heads) {
  cm::CompileResult compiled = cm::compile(read_example(example), example + ".mask");
  if (!compiled) throw std::runtime_error("example " + example + " does not compile");
  return compiled.mask->specialize(params, {.nq = nq, .nk = nk, .batch = batch, .heads = heads},
                                   {128, 128});
}

Rounded rounded(const std::vector<float>& x, cuda::DType dtype) {
  Rounded r{std::vector<float>(x.size()), std::vector<uint16_t>(x.size())};
  for (size_t i = 0; i < x.size(); ++i) {
    r.bits[i] = cuda::to_storage_bits(x[i], dtype);
    r.values[i] = cuda::from_storage_bits(r.bits[i], dtype);
  }
  return r;
}

Rounded random_rounded(size_t n, cuda::DType dtype, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return rounded(x, dtype);
}

DeviceBuffer::DeviceBuffer(size_t bytes) {
  if (cudaMalloc(&ptr, bytes) != cudaSuccess) ptr = nullptr;
}

DeviceBuffer::~DeviceBuffer() {
  cudaFree(ptr);
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.example << " nq=" << c.nq << " nk=" << c.nk << " d=" << c.head_dim << " h=" << c.heads_q
      << "/" << c.heads_kv << (c.dtype == cuda::DType::kBFloat16 ? " bf16" : " fp16");
  if (c.softcap > 0) *os << " softcap=" << c.softcap;
  if (c.sinks) *os << " sinks";
  if (c.alibi) *os << " alibi";
  if (c.head_dim_v != 0) *os << " dv=" << c.head_dim_v;
}

std::vector<float> alibi_slopes(int heads) {
  std::vector<float> slopes;
  for (int h = 0; h < heads; ++h) {
    slopes.push_back(std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(heads)));
  }
  return slopes;
}

std::vector<float> sink_logits(int heads) {
  std::vector<float> sinks;
  for (int h = 0; h < heads; ++h) sinks.push_back(-1.5f + 0.9f * static_cast<float>(h % 6));
  if (heads > 1) sinks[1] = -std::numeric_limits<float>::infinity();
  return sinks;
}

std::vector<Case> example_cases() {
  using cm::Segments;
  using B = cuda::DType;
  const auto segs = [](std::vector<int64_t> lengths) { return Segments::from_lengths(lengths); };
  const auto one = [](int64_t a, int64_t b) { return Segments{{a}, {b}}; };
  const cm::Params grid = {
      {"rows", int64_t{15}}, {"cols", int64_t{20}}, {"ry", int64_t{3}}, {"rx", int64_t{4}}};
  cm::Params box = grid, ellipse = grid;
  box["shape"] = int64_t{0};
  box["strip"] = int64_t{20};  // row-major
  ellipse["shape"] = int64_t{1};
  ellipse["strip"] = int64_t{6};  // strips, the last one narrower
  const cm::Params hstu = {{"seqs", segs({100, 120, 80})},
                           {"ctx", std::vector<int64_t>{4, 8, 2}},
                           {"targets", std::vector<int64_t>{10, 15, 8}}};
  // row_intervals: a bound per row of both batch rows (the tests run batch 2), some empty, some
  // reaching past nk, the rest anywhere.
  std::vector<int64_t> starts, ends;
  for (int64_t i = 0; i < 2 * 300; ++i) {
    starts.push_back((i * 97) % 420 - 60);
    ends.push_back(starts.back() + (i * 53) % 330 - 30);
  }
  const auto shifted = [](std::vector<int64_t> bounds) {
    for (int64_t& x : bounds) x += 90;
    return bounds;
  };
  // row_intervals_per_head: bounds per (batch row, head) of 4 heads, each head's rows a
  // different draw.
  std::vector<int64_t> head_starts, head_ends;
  for (int64_t i = 0; i < 2 * 4 * 300; ++i) {
    head_starts.push_back((i * 61) % 400 - 40);
    head_ends.push_back(head_starts.back() + (i * 37) % 300 - 20);
  }
  return {
      {"causal", {}, 300, 300, 128, 4, 2, B::kBFloat16},
      {"row_intervals", {{"starts", starts}, {"ends", ends}}, 300, 360, 128, 4, 2, B::kBFloat16},
      // A second interval per row: the first shifted by 90 keys, some overlapping the first.
      {"row_intervals_2",
       {{"starts", starts}, {"ends", ends}, {"starts2", shifted(starts)}, {"ends2", shifted(ends)}},
       300,
       360,
       64,
       4,
       2,
       B::kFloat16},
      {"causal", {}, 129, 385, 64, 4, 4, B::kFloat16},
      {"sliding_window", {{"W", int64_t{77}}}, 300, 300, 64, 4, 1, B::kBFloat16},
      {"chunked_causal", {{"C", int64_t{100}}}, 300, 300, 128, 4, 2, B::kFloat16},
      {"prefix_lm", {{"P", int64_t{50}}}, 257, 257, 128, 4, 4, B::kBFloat16},
      {"sinks_window", {{"S", int64_t{4}}, {"W", int64_t{60}}}, 300, 300, 64, 4, 2, B::kBFloat16},
      {"block_causal_video", {{"F", int64_t{64}}}, 300, 300, 128, 4, 2, B::kBFloat16},
      {"per_head_window",
       {{"windows", std::vector<int64_t>{10, 50, 130, 300}}},
       300,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      {"doc_causal", {{"docs", segs({90, 1, 150, 59})}}, 300, 300, 128, 4, 2, B::kBFloat16},
      {"shared_prefix",
       {{"prompt", one(0, 60)}, {"responses", Segments::from_boundaries({60, 140, 220, 300})}},
       300,
       300,
       64,
       4,
       4,
       B::kFloat16},
      {"hstu", hstu, 300, 300, 128, 4, 2, B::kBFloat16},
      {"clear",
       {{"text", int64_t{44}}, {"s", int64_t{16}}, {"r", int64_t{5}}, {"strip", int64_t{16}}},
       300,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      {"clear",  // strip order: 128-token tiles on 8 x 16 patches and across strips
       {{"text", int64_t{40}}, {"s", int64_t{30}}, {"r", int64_t{6}}, {"strip", int64_t{7}}},
       940,
       940,
       64,
       4,
       4,
       B::kFloat16},
      {"neighbourhood_2d", box, 300, 300, 64, 4, 2, B::kBFloat16},
      {"neighbourhood_2d", ellipse, 300, 300, 128, 4, 2, B::kFloat16},
      // Query rows [120, 130) belong to no query sequence: they see no key.
      {"cross_attention",
       {{"queries", Segments{{0, 50, 130}, {50, 120, 200}}},
        {"keys", Segments{{0, 100, 180}, {100, 180, 300}}}},
       200,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      // Masks that differ by batch row (the tests run batch 2): a row shorter than the
      // sequence, and a row of padding only.
      {"padded",
       {{"lengths", std::vector<int64_t>{300, 113}}, {"causal", int64_t{1}}},
       300,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      {"padded",
       {{"lengths", std::vector<int64_t>{0, 257}}, {"causal", int64_t{0}}},
       300,
       300,
       64,
       4,
       1,
       B::kFloat16},
      {"video_neighbourhood",  // each frame in strips
       {{"frames", int64_t{3}},
        {"rows", int64_t{10}},
        {"cols", int64_t{10}},
        {"rt", int64_t{2}},
        {"ry", int64_t{3}},
        {"rx", int64_t{4}},
        {"strip", int64_t{4}}},
       300,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      // Rows [600, 700) belong to no document: query tile 5 (rows 640-699) has no key tile.
      {"doc_causal",
       {{"docs", Segments{{0, 150, 300}, {100, 300, 600}}}},
       700,
       700,
       128,
       4,
       2,
       B::kBFloat16},
      // Head dims other than 64 and 128 run on those kernels with zero-padded columns.
      {"doc_causal", {{"docs", segs({90, 1, 150, 59})}}, 300, 300, 96, 4, 2, B::kBFloat16},
      {"sliding_window", {{"W", int64_t{77}}}, 255, 255, 40, 4, 1, B::kFloat16},
      {"causal", {}, 129, 300, 8, 2, 2, B::kBFloat16},
      {"hstu", hstu, 300, 300, 120, 4, 4, B::kFloat16},
      // Bounds that differ per head.
      {"row_intervals_per_head",
       {{"Nh", int64_t{4}},
        {"starts", head_starts},
        {"ends", head_ends},
        {"starts2", shifted(head_starts)},
        {"ends2", shifted(head_ends)}},
       300,
       330,
       128,
       4,
       2,
       B::kBFloat16},
  };
}

namespace {

// Example case `example` at nq, with its head dim changed to head_dim (0: kept).
Case example_case(const std::string& example, int nq, int head_dim) {
  for (Case c : example_cases()) {
    if (c.example == example && c.nq == nq) {
      if (head_dim > 0) c.head_dim = head_dim;
      return c;
    }
  }
  throw std::logic_error("no example case " + example + " with nq " + std::to_string(nq));
}

}  // namespace

std::vector<Case> wide_head_cases() {
  return {example_case("causal", 129, 256),
          example_case("doc_causal", 700, 256),
          example_case("clear", 940, 256),
          example_case("row_intervals", 300, 256),
          example_case("hstu", 300, 200),
          example_case("sliding_window", 255, 136),
          example_case("cross_attention", 200, 256),
          example_case("neighbourhood_2d", 300, 256)};
}

std::vector<Case> softcap_cases() {
  std::vector<Case> cases = {
      example_case("causal", 300, 0),         example_case("doc_causal", 700, 0),
      example_case("clear", 940, 0),          example_case("sliding_window", 300, 0),
      example_case("chunked_causal", 300, 0), example_case("hstu", 300, 200)};
  for (Case& c : cases) c.softcap = 1.5f;
  return cases;
}

namespace {

// The cases of a change to the logits or the rows' sums (sink_cases, alibi_cases): full and
// partial tiles, rows that see no key, GQA, both dtypes, head dims 64, 128 and 200, a soft cap,
// and decoding shapes whose key parts and packed heads fwd_combine merges.
std::vector<Case> logit_cases() {
  const std::vector<Case> decode = decode_cases();
  std::vector<Case> cases = {example_case("causal", 300, 0),
                             example_case("doc_causal", 700, 0),
                             example_case("clear", 940, 0),
                             example_case("hstu", 300, 200),
                             example_case("causal", 300, 64),
                             decode[0],
                             decode[4],  // rows that see no key
                             decode[5]};
  Case capped = example_case("sliding_window", 300, 0);
  capped.softcap = 1.5f;
  cases.push_back(capped);
  return cases;
}

}  // namespace

std::vector<Case> sink_cases() {
  std::vector<Case> cases = logit_cases();
  for (Case& c : cases) c.sinks = true;
  return cases;
}

std::vector<Case> alibi_cases() {
  std::vector<Case> cases = logit_cases();
  cases.push_back(example_case("causal", 129, 0));  // 129 rows against 385 keys
  cases.push_back(decode_cases()[3]);               // cross attention on the kernel for 256
  Case sunk = example_case("chunked_causal", 300, 0);
  sunk.sinks = true;
  cases.push_back(sunk);
  for (Case& c : cases) c.alibi = true;
  return cases;
}

namespace {

// Case c with head dims (head_dim, head_dim_v).
Case with_head_dims(Case c, int head_dim, int head_dim_v) {
  c.head_dim = head_dim;
  c.head_dim_v = head_dim_v;
  return c;
}

}  // namespace

std::vector<Case> value_head_dim_cases() {
  const std::vector<Case> decode = decode_cases();
  Case modified = with_head_dims(example_case("chunked_causal", 300, 0), 192, 128);
  modified.softcap = 1.5f;
  modified.sinks = modified.alibi = true;
  return {with_head_dims(example_case("causal", 300, 0), 192, 128),
          with_head_dims(example_case("doc_causal", 700, 0), 192, 128),
          with_head_dims(example_case("hstu", 300, 0), 64, 128),
          with_head_dims(example_case("clear", 940, 0), 128, 64),
          with_head_dims(example_case("sliding_window", 255, 0), 40, 96),
          with_head_dims(example_case("row_intervals", 300, 0), 160, 104),  // the kernel for 192
          with_head_dims(example_case("causal", 129, 0), 256, 136),         // 129 rows, 385 keys
          modified,
          with_head_dims(decode[0], 192, 128),
          with_head_dims(decode[5], 64, 40)};
}

std::vector<Case> paged_value_head_dim_cases() {
  const std::vector<Case> paged = paged_cases();
  return {with_head_dims(paged[0], 192, 128), with_head_dims(paged[1], 64, 128)};
}

std::vector<Case> decode_cases() {
  using B = cuda::DType;
  return {
      {"causal", {}, 1, 4097, 128, 8, 2, B::kBFloat16},
      {"causal", {}, 17, 4097, 64, 4, 4, B::kFloat16},
      {"sliding_window", {{"W", int64_t{1000}}}, 16, 3000, 128, 4, 1, B::kBFloat16},
      {"cross_attention",
       {{"queries", cm::Segments{{0, 2}, {2, 5}}}, {"keys", cm::Segments{{0, 1500}, {1500, 2000}}}},
       5,
       2000,
       200,
       4,
       2,
       B::kBFloat16},
      {"causal", {}, 130, 100, 128, 4, 2, B::kFloat16},  // rows 0-29 see no key
      {"causal", {}, 2, 3000, 64, 16, 1, B::kFloat16},   // MQA: 16 heads of 2 rows share tiles
  };
}

std::vector<Case> paged_cases() {
  using B = cuda::DType;
  return {
      {"causal", {}, 1, 4097, 128, 8, 2, B::kBFloat16},
      {"causal", {}, 17, 1000, 64, 4, 4, B::kFloat16},
      {"sliding_window", {{"W", int64_t{700}}}, 16, 3000, 128, 4, 1, B::kBFloat16},
      {"causal", {}, 5, 2000, 200, 4, 2, B::kBFloat16},
      {"causal", {}, 130, 100, 128, 4, 2, B::kFloat16},
      {"padded",
       {{"lengths", std::vector<int64_t>{1500, 777}}, {"causal", int64_t{1}}},
       3,
       1500,
       128,
       8,
       2,
       B::kBFloat16},
  };
}

}  // namespace cm::gpu_test
