// Every example in examples/ is compiled and its lowered IR evaluated at small sizes against the
// mask's definition, written independently here (the benchmark masks follow
// ../shared/reference/workloads.py line by line).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>

#include "grid_layout.h"
#include "ir_eval.h"
#include "test_util.h"

namespace cm::lang::testing {
namespace {

using Predicate = std::function<bool(int64_t q, int64_t k)>;

ir::Program example(const std::string& name) {
  const std::string path = std::string(CM_SOURCE_DIR) + "/examples/" + name + ".mask";
  const std::string source = read_file(path);
  EXPECT_FALSE(source.empty()) << path;
  return compile_ok(source, path);
}

void expect_mask(const ir::Program& p, const std::vector<ParamValue>& values, int64_t nq,
                 int64_t nk, const Predicate& want, int64_t h = 0, int64_t b = 0) {
  IrEval eval(p, values, nq, nk, static_cast<int32_t>(b), static_cast<int32_t>(h));
  for (int64_t q = 0; q < nq; ++q) {
    for (int64_t k = 0; k < nk; ++k) {
      ASSERT_EQ(eval.visible(q, k), want(q, k))
          << p.name << " nq=" << nq << " nk=" << nk << " b=" << b << " h=" << h << " q=" << q
          << " k=" << k;
    }
  }
}

// Segment number of each token, as workloads.py's _segment_ids.
std::vector<int64_t> segment_ids(const std::vector<int64_t>& lens) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < lens.size(); ++i)
    ids.insert(ids.end(), static_cast<size_t>(lens[i]), static_cast<int64_t>(i));
  return ids;
}

const std::vector<std::vector<int64_t>> kLengthLists = {
    {1}, {5}, {3, 1, 4}, {2, 7, 1, 1, 9}, {12, 12}};

int64_t total(const std::vector<int64_t>& lens) {
  int64_t n = 0;
  for (int64_t l : lens) n += l;
  return n;
}

TEST(Examples, Causal) {
  const ir::Program p = example("causal");
  for (int64_t n : {1, 2, 7, 20})
    expect_mask(p, {}, n, n, [](int64_t q, int64_t k) { return q >= k; });
  // Bottom-right alignment.
  expect_mask(p, {}, 5, 9, [](int64_t q, int64_t k) { return k <= q + 4; });
  expect_mask(p, {}, 9, 5, [](int64_t q, int64_t k) { return k <= q - 4; });
}

TEST(Examples, SlidingWindow) {
  const ir::Program p = example("sliding_window");
  for (int64_t w : {1, 3, 8, 50}) {
    expect_mask(p, {w}, 20, 20, [w](int64_t q, int64_t k) { return q >= k && q - k < w; });
  }
}

TEST(Examples, ChunkedCausal) {
  const ir::Program p = example("chunked_causal");
  for (int64_t c : {1, 4, 7}) {
    expect_mask(p, {c}, 23, 23, [c](int64_t q, int64_t k) { return q / c == k / c && k <= q; });
  }
}

TEST(Examples, PrefixLm) {
  const ir::Program p = example("prefix_lm");
  for (int64_t pre : {0, 1, 6, 30}) {
    expect_mask(p, {pre}, 20, 20, [pre](int64_t q, int64_t k) { return k < pre || k <= q; });
  }
}

TEST(Examples, SinksWindow) {
  const ir::Program p = example("sinks_window");
  for (int64_t s : {0, 2}) {
    for (int64_t w : {1, 4}) {
      expect_mask(p, {s, w}, 20, 20,
                  [s, w](int64_t q, int64_t k) { return k <= q && (k < s || q - k < w); });
    }
  }
}

TEST(Examples, DocCausal) {
  const ir::Program p = example("doc_causal");
  for (const auto& lens : kLengthLists) {
    const std::vector<int64_t> doc = segment_ids(lens);
    const int64_t n = total(lens);
    expect_mask(p, {segments_of(lens)}, n, n, [&](int64_t q, int64_t k) {
      return doc[static_cast<size_t>(q)] == doc[static_cast<size_t>(k)] && q >= k;
    });
  }
}

TEST(Examples, SharedPrefix) {
  const ir::Program p = example("shared_prefix");
  for (int64_t n : {8, 21, 40}) {
    const int64_t g = 3;
    const int64_t prompt = n / 4;
    const int64_t r = (n - prompt) / g;
    const std::vector<int64_t> lens = {prompt, r, r, n - prompt - r * (g - 1)};
    const std::vector<int64_t> seg = segment_ids(lens);
    const std::vector<int64_t> responses(lens.begin() + 1, lens.end());
    expect_mask(p, {segments_of({prompt}), segments_of(responses, prompt)}, n, n,
                [&](int64_t q, int64_t k) {
                  const int64_t sq = seg[static_cast<size_t>(q)], sk = seg[static_cast<size_t>(k)];
                  return q >= k && (sq == sk || sk == 0);
                });
  }
}

TEST(Examples, Hstu) {
  const ir::Program p = example("hstu");
  for (const auto& lens : std::vector<std::vector<int64_t>>{{1}, {4, 12, 20}, {9, 33, 2, 17}}) {
    const int64_t ctx = 3;
    std::vector<int64_t> kind, first_target, ctxs, targets;
    int64_t start = 0;
    for (int64_t len : lens) {
      const int64_t c = std::min(ctx, len / 4);
      // Python's round() rounds halves to even, as nearbyint does in the default mode.
      const int64_t t = std::max<int64_t>(
          1, static_cast<int64_t>(std::nearbyint(0.125 * static_cast<double>(len))));
      kind.insert(kind.end(), static_cast<size_t>(c), 0);
      kind.insert(kind.end(), static_cast<size_t>(len - c - t), 1);
      kind.insert(kind.end(), static_cast<size_t>(t), 2);
      first_target.insert(first_target.end(), static_cast<size_t>(len), start + len - t);
      ctxs.push_back(c);
      targets.push_back(t);
      start += len;
    }
    const std::vector<int64_t> seg = segment_ids(lens);
    expect_mask(p, {segments_of(lens), ctxs, targets}, start, start, [&](int64_t q, int64_t k) {
      const auto uq = static_cast<size_t>(q), uk = static_cast<size_t>(k);
      const int64_t kq = kind[uq], kk = kind[uk];
      const bool context_row = kq == 0 && kk != 2;
      const bool history_row = kq == 1 && (kk == 0 || (kk == 1 && k <= q));
      const bool target_row = kq == 2 && (k < first_target[uq] || k == q);
      return seg[uq] == seg[uk] && (context_row || history_row || target_row);
    });
  }
}

TEST(Examples, Clear) {
  const ir::Program p = example("clear");
  const int64_t text = 5, s = 6;
  const int64_t n = text + s * s;
  for (int64_t r : {1, 2, 3}) {
    for (int64_t strip : {1, 4, 6, 50}) {  // 6 and 50: row-major
      expect_mask(p, {text, s, r, strip}, n, n, [&](int64_t q, int64_t k) {
        if (q < text || k < text) return true;
        const cm::testing::GridPosition a =
            cm::testing::walk_grid_cell(s, s, std::min(strip, s), q - text);
        const cm::testing::GridPosition b =
            cm::testing::walk_grid_cell(s, s, std::min(strip, s), k - text);
        const int64_t dy = a.y - b.y, dx = a.x - b.x;
        return dy * dy + dx * dx < r * r;
      });
    }
  }
}

TEST(Examples, BlockCausalVideo) {
  const ir::Program p = example("block_causal_video");
  for (int64_t f : {1, 3, 8}) {
    expect_mask(p, {f}, 25, 25, [f](int64_t q, int64_t k) { return k / f <= q / f; });
  }
}

TEST(Examples, Neighbourhood2d) {
  const ir::Program p = example("neighbourhood_2d");
  const int64_t rows = 5, cols = 7;
  for (int64_t shape : {0, 1}) {
    for (const auto& radii : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 3}, {2, 2}}) {
      const int64_t ry = radii.first, rx = radii.second;
      expect_mask(p, {rows, cols, ry, rx, shape, cols}, rows * cols, rows * cols,
                  [&](int64_t q, int64_t k) {
                    const int64_t dy = q / cols - k / cols, dx = q % cols - k % cols;
                    if (shape == 0) return std::abs(dy) <= ry && std::abs(dx) <= rx;
                    return dy * dy * rx * rx + dx * dx * ry * ry < ry * ry * rx * rx;
                  });
    }
  }
}

TEST(Examples, VideoNeighbourhood) {
  const ir::Program p = example("video_neighbourhood");
  const int64_t frames = 3, rows = 4, cols = 5;
  const int64_t plane = rows * cols, n = frames * plane;
  for (const auto& radii : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 3, 2}, {1, 2, 4}}) {
    const int64_t rt = radii[0], ry = radii[1], rx = radii[2];
    expect_mask(p, {frames, rows, cols, rt, ry, rx, cols}, n, n, [&](int64_t q, int64_t k) {
      const int64_t dt = q / plane - k / plane;
      const int64_t dy = q % plane / cols - k % plane / cols, dx = q % cols - k % cols;
      return dt * dt * ry * ry * rx * rx + dy * dy * rt * rt * rx * rx +
                 dx * dx * rt * rt * ry * ry <
             rt * rt * ry * ry * rx * rx;
    });
  }
}

TEST(Examples, CrossAttention) {
  const ir::Program p = example("cross_attention");
  const std::vector<int64_t> qlens = {2, 5, 1}, klens = {7, 1, 4};
  const std::vector<int64_t> qseg = segment_ids(qlens), kseg = segment_ids(klens);
  expect_mask(p, {segments_of(qlens), segments_of(klens)}, total(qlens), total(klens),
              [&](int64_t q, int64_t k) {
                return qseg[static_cast<size_t>(q)] == kseg[static_cast<size_t>(k)];
              });
}

TEST(Examples, PerHeadWindow) {
  const ir::Program p = example("per_head_window");
  const std::vector<int64_t> windows = {1, 4, 100};
  for (int64_t h = 0; h < 3; ++h) {
    const int64_t w = windows[static_cast<size_t>(h)];
    expect_mask(
        p, {windows}, 15, 15, [w](int64_t q, int64_t k) { return q >= k && q - k < w; }, h);
  }
}

TEST(Examples, Padded) {
  const ir::Program p = example("padded");
  const std::vector<int64_t> lengths = {15, 0, 1, 9};
  for (int64_t causal : {0, 1}) {
    for (int64_t b = 0; b < 4; ++b) {
      const int64_t len = lengths[static_cast<size_t>(b)];
      expect_mask(
          p, {lengths, causal}, 15, 15,
          [=](int64_t q, int64_t k) { return q < len && k < len && (causal == 0 || k <= q); }, 0,
          b);
    }
  }
}

TEST(Examples, RowIntervals) {
  const ir::Program p = example("row_intervals");
  const int64_t nq = 6, nk = 9;
  // Two batch rows of bounds: empty, reversed, clipped at both ends, whole.
  const std::vector<int64_t> starts = {0, 3, 5, -2, 4, 0, 8, 0, 1, 1, 2, 3};
  const std::vector<int64_t> ends = {1, 3, 2, 4, 20, 9, 9, 9, 2, 8, 7, 6};
  for (int64_t b = 0; b < 2; ++b) {
    expect_mask(
        p, {starts, ends}, nq, nk,
        [&](int64_t q, int64_t k) {
          const size_t i = static_cast<size_t>(b * nq + q);
          return k >= starts[i] && k < ends[i];
        },
        0, b);
  }
  // One set of rows for every batch row.
  const std::vector<int64_t> row_starts(starts.begin(), starts.begin() + nq);
  const std::vector<int64_t> row_ends(ends.begin(), ends.begin() + nq);
  for (int64_t b = 0; b < 3; ++b) {
    expect_mask(
        p, {row_starts, row_ends}, nq, nk,
        [&](int64_t q, int64_t k) {
          return k >= row_starts[static_cast<size_t>(q)] && k < row_ends[static_cast<size_t>(q)];
        },
        0, b);
  }
}

TEST(Examples, RowIntervals2) {
  const ir::Program p = example("row_intervals_2");
  const int64_t nq = 5, nk = 9;
  // Per row: apart, overlapping, the second inside the first, one empty, both empty.
  const std::vector<int64_t> starts = {0, 2, 1, 4, 3}, ends = {2, 5, 8, 4, 3};
  const std::vector<int64_t> starts2 = {5, 4, 3, 6, 7}, ends2 = {7, 7, 5, 9, 7};
  expect_mask(p, {starts, ends, starts2, ends2}, nq, nk, [&](int64_t q, int64_t k) {
    const size_t i = static_cast<size_t>(q);
    return (k >= starts[i] && k < ends[i]) || (k >= starts2[i] && k < ends2[i]);
  });
}

TEST(Examples, RowIntervalsPerHead) {
  const ir::Program p = example("row_intervals_per_head");
  const int64_t nq = 4, nk = 7, heads = 3;
  // Per (b, h, q), i = (b * heads + h) * nq + q: two batch rows of three heads of four rows.
  std::vector<int64_t> starts, ends, starts2, ends2;
  for (int64_t i = 0; i < 2 * heads * nq; ++i) {
    starts.push_back((i * 5) % 9 - 1);
    ends.push_back(starts.back() + (i * 3) % 5);
    starts2.push_back((i * 7) % 8);
    ends2.push_back(starts2.back() + i % 3);
  }
  const auto sees = [&](size_t i, int64_t k) {
    return (k >= starts[i] && k < ends[i]) || (k >= starts2[i] && k < ends2[i]);
  };
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      expect_mask(
          p, {heads, starts, ends, starts2, ends2}, nq, nk,
          [&](int64_t q, int64_t k) {
            return sees(static_cast<size_t>((b * heads + h) * nq + q), k);
          },
          h, b);
    }
  }
  // One set of rows per head for every batch row: the first heads * nq entries.
  const auto head_rows = [&](const std::vector<int64_t>& v) {
    return std::vector<int64_t>(v.begin(), v.begin() + heads * nq);
  };
  for (int64_t b = 0; b < 3; ++b) {
    expect_mask(
        p, {heads, head_rows(starts), head_rows(ends), head_rows(starts2), head_rows(ends2)}, nq,
        nk, [&](int64_t q, int64_t k) { return sees(static_cast<size_t>(2 * nq + q), k); }, 2, b);
  }
}

}  // namespace
}  // namespace cm::lang::testing
