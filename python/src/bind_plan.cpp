// Bindings of cm::Plan: the descriptor bytes, stats, dense decoding, and the ASCII and PNG
// renderings of src/render; the kernel time estimates from tile counts (estimate.h); the strip
// token order (token_order.h); and a context-parallel rank's query rows (context_parallel.h).
#include <compilemask/compilemask.h>
#include <compilemask/context_parallel.h>
#include <compilemask/estimate.h>
#include <compilemask/token_order.h>

#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "numpy_out.h"
#include "render/mask_image.h"
#include "render/png.h"
#include "render/tile_map.h"

#include "bindings.h"

namespace nb = nanobind;

namespace cm::python {
namespace {

nb::dict stats_dict(const Plan& plan) {
  const PlanStats& s = plan.stats();
  nb::dict d = tile_counts_dict(s);
  d["bytes"] = s.bytes;
  d["patterns"] = s.patterns;
  d["grid_formulas"] = s.grid_formulas;
  d["density"] = s.density;
  d["build_seconds"] = s.build_seconds;
  return d;
}

}  // namespace

nb::dict tile_counts_dict(const TileCounts& counts) {
  nb::dict d;
  d["instances"] = counts.instances;
  d["full_tiles"] = counts.full_tiles;
  d["partial_tiles"] = counts.partial_tiles;
  d["empty_tiles"] = counts.empty_tiles;
  d["tiles"] = counts.full_tiles + counts.partial_tiles + counts.empty_tiles;
  d["visible_pairs"] = counts.visible_pairs;
  d["computed_pairs"] = counts.computed_pairs;
  return d;
}

TileCounts tile_counts_from(const nb::dict& d) {
  TileCounts counts;
  counts.instances = nb::cast<int32_t>(d["instances"]);
  counts.full_tiles = nb::cast<int64_t>(d["full_tiles"]);
  counts.partial_tiles = nb::cast<int64_t>(d["partial_tiles"]);
  counts.empty_tiles = nb::cast<int64_t>(d["empty_tiles"]);
  counts.visible_pairs = nb::cast<int64_t>(d["visible_pairs"]);
  counts.computed_pairs = nb::cast<int64_t>(d["computed_pairs"]);
  return counts;
}

void bind_plan(nb::module_& m) {
  m.attr("MAX_DENSE_ELEMENTS") = Plan::kMaxDenseElements;
  m.def(
      "strip_order",
      [](int64_t start, int64_t frames, int64_t rows, int64_t cols, int64_t strip, int64_t total) {
        std::vector<int64_t> order = strip_order({start, frames, rows, cols, strip}, total);
        const size_t size = order.size();
        return to_numpy(std::move(order), {size});
      },
      nb::arg("start"), nb::arg("frames"), nb::arg("rows"), nb::arg("cols"), nb::arg("strip"),
      nb::arg("total"));
  m.def(
      "context_parallel_positions",
      [](int64_t n, int64_t world_size, int64_t rank, bool balanced) {
        std::vector<int32_t> positions =
            context_parallel_positions({n, world_size, rank, balanced});
        const size_t size = positions.size();
        return to_numpy(std::move(positions), {size});
      },
      nb::arg("n"), nb::arg("world_size"), nb::arg("rank"), nb::arg("balanced"));
  m.def(
      "estimated_forward_seconds",
      [](const nb::dict& counts, int32_t tile_m, int32_t tile_n, int64_t masks) {
        return estimated_forward_seconds(tile_counts_from(counts), {tile_m, tile_n}, masks);
      },
      nb::arg("counts"), nb::arg("tile_m"), nb::arg("tile_n"), nb::arg("masks"));
  m.def(
      "estimated_backward_seconds",
      [](const nb::dict& halves, int32_t tile_m, int32_t tile_n, int64_t masks) {
        return estimated_backward_seconds(tile_counts_from(halves), {tile_m, tile_n}, masks);
      },
      nb::arg("halves"), nb::arg("tile_m"), nb::arg("tile_n"), nb::arg("masks"));
  m.def(
      "backward_halves",
      [](int32_t tile_m, int32_t tile_n) {
        const Tiling halves = backward_halves({tile_m, tile_n});
        return std::make_pair(halves.m, halves.n);
      },
      nb::arg("tile_m"), nb::arg("tile_n"));
  m.def("estimated_gather_seconds", &estimated_gather_seconds, nb::arg("batch"), nb::arg("rows"),
        nb::arg("heads"));

  nb::class_<Plan>(m, "Plan")
      .def_static(
          "from_descriptor",
          [](const nb::bytes& data) { return Plan::from_descriptor(data.c_str(), data.size()); },
          nb::arg("data"))
      .def_prop_ro(
          "descriptor",
          [](const Plan& self) {
            const size_t shape[1] = {self.size_bytes()};
            return nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>>(self.blob(), 1, shape,
                                                                      nb::handle());
          },
          nb::rv_policy::reference_internal, "The descriptor bytes (a read-only view)")
      .def_prop_ro("nq", [](const Plan& self) { return self.dims().nq; })
      .def_prop_ro("nk", [](const Plan& self) { return self.dims().nk; })
      .def_prop_ro("batch", [](const Plan& self) { return self.dims().batch; })
      .def_prop_ro("heads", [](const Plan& self) { return self.dims().heads; })
      .def_prop_ro("tile_m", [](const Plan& self) { return self.tiling().m; })
      .def_prop_ro("tile_n", [](const Plan& self) { return self.tiling().n; })
      .def("stats", &stats_dict)
      .def("stats_text", [](const Plan& self) { return self.stats().format(); })
      .def("stats_json", [](const Plan& self) { return self.stats().to_json(); })
      .def(
          "dense",
          [](const Plan& self, int32_t b, int32_t h, int32_t q_begin, int32_t q_end) {
            std::vector<uint8_t> rows = self.dense(b, h, q_begin, q_end);  // checks the window
            const int64_t end = q_end < 0 ? self.dims().nq : q_end;
            return to_numpy(std::move(rows), {static_cast<size_t>(end - q_begin),
                                              static_cast<size_t>(self.dims().nk)});
          },
          nb::arg("b"), nb::arg("h"), nb::arg("q_begin") = 0, nb::arg("q_end") = -1)
      .def(
          "tile_map",
          [](const Plan& self, int b, int h, int width) {
            return render::format_tile_map(self.blob(), b, h, width);
          },
          nb::arg("b"), nb::arg("h"), nb::arg("width"))
      .def(
          "save_png",
          [](const Plan& self, const std::string& path, int b, int h) {
            render::write_png(path, render::render_mask_image(self.blob(), b, h));
          },
          nb::arg("path"), nb::arg("b"), nb::arg("h"));
}

}  // namespace cm::python
