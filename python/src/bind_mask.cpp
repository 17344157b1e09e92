// Bindings of cm::compile and cm::Mask. Parameter values arrive already sorted by kind by
// compilemask/_params.py: integers, int64 arrays, and segment lists as (starts, ends) arrays.
#include <compilemask/compilemask.h>

#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "numpy_out.h"

#include "bindings.h"

namespace nb = nanobind;

namespace cm::python {
namespace {

using IntArray = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::vector<int64_t> to_vector(const IntArray& a) {
  return {a.data(), a.data() + a.shape(0)};
}

// (file, line, column, message, source_line, formatted text with the caret)
using DiagnosticTuple = std::tuple<std::string, int, int, std::string, std::string, std::string>;

std::pair<std::optional<Mask>, std::vector<DiagnosticTuple>> compile_source(
    const std::string& source, const std::string& file) {
  CompileResult result = compile(source, file);
  std::vector<DiagnosticTuple> diagnostics;
  for (const Diagnostic& d : result.diagnostics) {
    diagnostics.emplace_back(d.file, d.line, d.column, d.message, d.source_line, d.format());
  }
  return {std::move(result.mask), std::move(diagnostics)};
}

using IntParams = std::map<std::string, int64_t>;
using ArrayParams = std::map<std::string, IntArray>;
using SegmentParams = std::map<std::string, std::pair<IntArray, IntArray>>;

Params to_params(const IntParams& ints, const ArrayParams& arrays, const SegmentParams& segments) {
  Params params;
  for (const auto& [name, value] : ints) params[name] = value;
  for (const auto& [name, value] : arrays) params[name] = to_vector(value);
  for (const auto& [name, value] : segments) {
    params[name] = Segments{to_vector(value.first), to_vector(value.second)};
  }
  return params;
}

using SegmentArrays = std::pair<nb::ndarray<nb::numpy, int64_t>, nb::ndarray<nb::numpy, int64_t>>;

using PositionArray = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Defines Mask.NAME(ints, arrays, segments, nq, nk, batch, heads, tile_m, tile_n,
// query_positions): the parameters as compilemask/_params.py sorts them, the problem's shape
// and the query rows to keep (empty: all). It calls (mask.*run)(params, dims, tiling,
// query_positions) without the GIL and returns finish(its result).
template <class Run, class Finish>
void def_problem_method(nb::class_<Mask>& mask, const char* name, Run run, Finish finish) {
  mask.def(
      name,
      [run, finish](const Mask& self, const IntParams& ints, const ArrayParams& arrays,
                    const SegmentParams& segments, int64_t nq, int64_t nk, int32_t batch,
                    int32_t heads, int32_t tile_m, int32_t tile_n,
                    const PositionArray& query_positions) {
        const Params params = to_params(ints, arrays, segments);
        auto result = [&] {
          nb::gil_scoped_release unlocked;
          return (self.*run)(params, Dims{nq, nk, batch, heads}, Tiling{tile_m, tile_n},
                             {query_positions.data(), query_positions.shape(0)});
        }();
        return finish(std::move(result));
      },
      nb::arg("ints"), nb::arg("arrays"), nb::arg("segments"), nb::arg("nq"), nb::arg("nk"),
      nb::arg("batch"), nb::arg("heads"), nb::arg("tile_m"), nb::arg("tile_n"),
      nb::arg("query_positions"));
}

using Int32Array = nb::ndarray<nb::numpy, int32_t>;

// Mask::slices as MagiAttention's arrays: q_ranges and k_ranges [S, 2], attn_type_map [S].
std::tuple<Int32Array, Int32Array, Int32Array> slice_arrays(const std::vector<AttnSlice>& slices) {
  const size_t n = slices.size();
  std::vector<int32_t> q, k, types;
  q.reserve(2 * n);
  k.reserve(2 * n);
  types.reserve(n);
  for (const AttnSlice& s : slices) {
    q.insert(q.end(), {s.q_begin, s.q_end});
    k.insert(k.end(), {s.k_begin, s.k_end});
    types.push_back(static_cast<int32_t>(s.shape));
  }
  return {to_numpy(std::move(q), {n, 2}), to_numpy(std::move(k), {n, 2}),
          to_numpy(std::move(types), {n})};
}

using Uint32Array = nb::ndarray<nb::numpy, uint32_t>;

// Mask::block_grid as numpy arrays: instance_of [batch * heads], codes [masks, q_blocks,
// k_blocks] and bits [bitmaps, block_q, words_per_row].
std::tuple<Int32Array, Int32Array, Uint32Array> block_grid_arrays(BlockGrid grid) {
  const size_t blocks = static_cast<size_t>(grid.q_blocks) * static_cast<size_t>(grid.k_blocks);
  const size_t masks = blocks == 0 ? 0 : grid.codes.size() / blocks;
  const size_t block_words = static_cast<size_t>(grid.block_q) * grid.words_per_row;
  const size_t bitmaps = grid.bits.size() / block_words;
  const size_t instances = grid.instance_of.size();
  return {to_numpy(std::move(grid.instance_of), {instances}),
          to_numpy(std::move(grid.codes),
                   {masks, static_cast<size_t>(grid.q_blocks), static_cast<size_t>(grid.k_blocks)}),
          to_numpy(std::move(grid.bits), {bitmaps, static_cast<size_t>(grid.block_q),
                                          static_cast<size_t>(grid.words_per_row)})};
}

SegmentArrays to_arrays(Segments s) {
  const size_t n = s.size();
  return {to_numpy(std::move(s.starts), {n}), to_numpy(std::move(s.ends), {n})};
}

}  // namespace

void bind_mask(nb::module_& m) {
  m.def("compile", &compile_source, nb::arg("source"), nb::arg("file"),
        "Returns (mask or None, diagnostics as (file, line, column, message, source line, "
        "formatted text)).");
  m.def("pass_names", &pass_names);
  m.def(
      "segments_from_lengths",
      [](const IntArray& lengths, int64_t origin) {
        return to_arrays(Segments::from_lengths(to_vector(lengths), origin));
      },
      nb::arg("lengths"), nb::arg("origin"));
  m.def(
      "segments_from_boundaries",
      [](const IntArray& boundaries) {
        return to_arrays(Segments::from_boundaries(to_vector(boundaries)));
      },
      nb::arg("boundaries"));

  nb::class_<Mask> mask(m, "Mask");
  mask.def_prop_ro("name", &Mask::name);
  mask.def("params", [](const Mask& self) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const ParamInfo& p : self.params()) out.emplace_back(p.name, p.type);
    return out;
  });
  def_problem_method(mask, "specialize", &Mask::specialize, [](Plan plan) { return plan; });
  def_problem_method(mask, "count_tiles", &Mask::count_tiles, &tile_counts_dict);
  def_problem_method(mask, "block_grid", &Mask::block_grid, &block_grid_arrays);
  mask.def(
      "slices",
      [](const Mask& self, const IntParams& ints, const ArrayParams& arrays,
         const SegmentParams& segments, int64_t nq, int64_t nk, int32_t batch, int32_t heads,
         int32_t b, int32_t h) {
        const Params params = to_params(ints, arrays, segments);
        std::vector<AttnSlice> slices = [&] {
          nb::gil_scoped_release unlocked;
          return self.slices(params, Dims{nq, nk, batch, heads}, b, h);
        }();
        return slice_arrays(slices);
      },
      nb::arg("ints"), nb::arg("arrays"), nb::arg("segments"), nb::arg("nq"), nb::arg("nk"),
      nb::arg("batch"), nb::arg("heads"), nb::arg("b"), nb::arg("h"));
}

}  // namespace cm::python
