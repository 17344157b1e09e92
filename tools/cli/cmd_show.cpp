// `compilemask show FILE -p ...`: draws the tile map of one (b, h) mask on the terminal and
// optionally writes the element mask and tile map as a PNG image.
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"

#include "render/mask_image.h"
#include "render/png.h"
#include "render/tile_map.h"

#include <iostream>
#include <limits>

namespace cm::cli {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

// b (or h) to show, and the batch (or heads) extent of the plan: the extent defaults to just
// enough to contain the index.
std::pair<int32_t, int32_t> index_and_extent(const ParsedArgs& args, const std::string& index_flag,
                                             const std::string& extent_flag) {
  const int64_t index = integer_flag(args, index_flag, 0, 0, kMaxInt - 1);
  const int64_t extent = integer_flag(args, extent_flag, index + 1, 1, kMaxInt);
  if (index >= extent) {
    throw UsageError("--" + index_flag + " " + std::to_string(index) + " must be less than --" +
                     extent_flag + " " + std::to_string(extent));
  }
  return {static_cast<int32_t>(index), static_cast<int32_t>(extent)};
}

int run_show(const ParsedArgs& args) {
  Dims dims = parse_lengths(args);
  const auto [b, batch] = index_and_extent(args, "b", "batch");
  const auto [h, heads] = index_and_extent(args, "h", "heads");
  dims.batch = batch;
  dims.heads = heads;
  const Tiling tiling = parse_tiling(args);
  const int max_width = static_cast<int>(integer_flag(args, "max-width", 80, 8, 100000));

  const Mask mask = load_mask(args.positional[0]);
  const Plan plan = make_plan(mask, args, dims, tiling);
  std::cout << mask.name() << ": " << render::format_tile_map(plan.blob(), b, h, max_width);
  if (const std::optional<std::string> png = args.value("png")) {
    const render::Image image = render::render_mask_image(plan.blob(), b, h);
    render::write_png(*png, image);
    std::cout << "wrote " << *png << " (" << image.width << "x" << image.height
              << "): element mask on the left (dark = visible), tiles on the right (blue full, "
                 "orange partial, grey empty)\n";
  }
  return kExitOk;
}

}  // namespace

Command show_command() {
  std::vector<FlagSpec> flags = plan_flags();
  flags.insert(
      flags.end(),
      {
          {"b", 0, "B", false, "batch index of the mask to show (default 0)"},
          {"h", 0, "H", false, "head index of the mask to show (default 0)"},
          {"batch", 0, "B", false, "batch size of the plan (default: b + 1)"},
          {"heads", 0, "H", false, "query heads of the plan (default: h + 1)"},
          {"max-width", 0, "COLS", false,
           "widest tile map in columns; wider maps merge tiles (default 80)"},
          {"png", 0, "OUT.png", false, "also write the element mask and tile map as a PNG image"},
      });
  return {{"show", "FILE -p NAME=VALUE... (-n N | --nq N --nk N) [options]",
           "draw the tile map of a mask (and optionally a PNG)",
           "Specializes FILE and draws the tile map of mask (b, h): '██' full tiles, '░░'\n"
           "partial tiles, blank empty tiles. When the map is wider than --max-width, square\n"
           "blocks of tiles are merged: a merged cell is full if all its tiles are full, empty\n"
           "if all are empty, and partial otherwise. --png writes the element mask (downsampled\n"
           "for large N) beside the tile map." +
               param_syntax_help(),
           flags},
          run_show};
}

}  // namespace cm::cli
