// Human-readable and JSON renderings of cm::PlanStats.
#include <compilemask/compilemask.h>

#include <cstdio>
#include <string>

namespace cm {
namespace {

std::string fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, v);
  return buffer;
}

}  // namespace

std::string PlanStats::format() const {
  const int64_t total_tiles = full_tiles + partial_tiles + empty_tiles;
  auto share = [&](int64_t tiles) {
    return total_tiles
               ? " (" +
                     fixed(100.0 * static_cast<double>(tiles) / static_cast<double>(total_tiles),
                           1) +
                     "%)"
               : std::string();
  };
  return "descriptor bytes: " + std::to_string(bytes) + " (" +
         fixed(static_cast<double>(bytes) / 1024.0, 1) + " KiB, forward + transposed)\n" +
         "instances:        " + std::to_string(instances) + "\n" +
         "tiles:            " + std::to_string(full_tiles) + " full" + share(full_tiles) + ", " +
         std::to_string(partial_tiles) + " partial" + share(partial_tiles) + ", " +
         std::to_string(empty_tiles) + " empty" + share(empty_tiles) + "\n" +
         "patterns:         " + std::to_string(patterns) + " (" + std::to_string(grid_formulas) +
         " grid formulas)\n" + "visible pairs:    " + std::to_string(visible_pairs) + " (density " +
         fixed(density, 4) + ")\n" + "computed pairs:   " + std::to_string(computed_pairs) + "\n" +
         // A plan read back from its descriptor (Plan::from_descriptor) was not built here.
         (build_seconds > 0 ? "build time:       " + fixed(build_seconds * 1e3, 3) + " ms\n"
                            : std::string());
}

std::string PlanStats::to_json() const {
  return "{\"bytes\": " + std::to_string(bytes) + ", \"instances\": " + std::to_string(instances) +
         ", \"full_tiles\": " + std::to_string(full_tiles) +
         ", \"partial_tiles\": " + std::to_string(partial_tiles) +
         ", \"empty_tiles\": " + std::to_string(empty_tiles) +
         ", \"patterns\": " + std::to_string(patterns) +
         ", \"grid_formulas\": " + std::to_string(grid_formulas) +
         ", \"visible_pairs\": " + std::to_string(visible_pairs) +
         ", \"computed_pairs\": " + std::to_string(computed_pairs) +
         ", \"density\": " + fixed(density, 6) + ", \"build_seconds\": " + fixed(build_seconds, 9) +
         "}";
}

}  // namespace cm
