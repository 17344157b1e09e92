// `compilemask show FILE -p ...`: draws the tile map of one (b, h) mask on the terminal and
// optionally writes the element mask and tile map as a PNG image.
#include "cli_error.h"
#include "commands.h"
#include "mask_setup.h"

#include "render/mask_image.h"
#include "render/png.h"
#include "render/tile_map.h"

#include <iostream>

namespace cm::cli {
namespace {

int run_show(const ParsedArgs& args) {
  const auto [dims, b, h] = parse_one_mask(args);
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
  for (FlagSpec& f : context_parallel_flags()) flags.push_back(std::move(f));
  for (FlagSpec& f : one_mask_flags("to show")) flags.push_back(std::move(f));
  flags.insert(flags.end(), {
                                {"max-width", 0, "COLS", false,
                                 "widest tile map in columns; wider maps merge tiles (default 80)"},
                                {"png", 0, "OUT.png", false,
                                 "also write the element mask and tile map as a PNG image"},
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
