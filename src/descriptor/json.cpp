// JSON dump of a descriptor for `compilemask compile --emit json` (see decode.h).
#include <compilemask/descriptor.h>

#include "descriptor/decode.h"
#include "descriptor/pattern_encode.h"

#include <cstdio>
#include <string>

namespace cm {
namespace {

class JsonDump {
 public:
  explicit JsonDump(const void* blob) : blob_(blob), hd_(desc::header(blob)) {}

  std::string run() {
    out_ += "{\n";
    header();
    tile_starts("q_tile_starts", hd_.q_starts_offset, hd_.num_q_tiles);
    tile_starts("k_tile_starts", hd_.k_starts_offset, hd_.num_k_tiles);
    instance_map();
    formulas();
    patterns();
    instances();
    out_ += "}\n";
    return out_;
  }

 private:
  void field(const char* name, long long value, bool last = false) {
    out_ += "    \"" + std::string(name) + "\": " + std::to_string(value) + (last ? "\n" : ",\n");
  }

  void header() {
    out_ += "  \"header\": {\n";
    field("version", hd_.version);
    field("total_bytes", static_cast<long long>(hd_.total_bytes));
    field("nq", hd_.nq);
    field("nk", hd_.nk);
    field("tile_m", hd_.tile_m);
    field("tile_n", hd_.tile_n);
    field("num_q_tiles", hd_.num_q_tiles);
    field("num_k_tiles", hd_.num_k_tiles);
    field("batch", hd_.batch);
    field("heads", hd_.heads);
    field("num_instances", hd_.num_instances);
    field("num_patterns", hd_.num_patterns);
    field("num_grid_formulas", hd_.num_grid_formulas, true);
    out_ += "  },\n";
  }

  // The tile-start tables: tile t of an axis is [starts[t], starts[t + 1]).
  void tile_starts(const char* name, uint32_t offset, int32_t count) {
    out_ += "  \"" + std::string(name) + "\": [";
    const int32_t* starts = desc::at<int32_t>(blob_, offset);
    for (int32_t t = 0; t <= count; ++t) out_ += (t ? ", " : "") + std::to_string(starts[t]);
    out_ += "],\n";
  }

  void instance_map() {
    out_ += "  \"instance_map\": [";
    const int32_t* map = desc::at<int32_t>(blob_, hd_.instance_map_offset);
    for (int64_t i = 0; i < int64_t{hd_.batch} * hd_.heads; ++i) {
      out_ += (i ? ", " : "") + std::to_string(map[i]);
    }
    out_ += "],\n";
  }

  void formulas() {
    out_ += "  \"grid_formulas\": [";
    for (int32_t i = 0; i < hd_.num_grid_formulas; ++i) {
      const desc::GridFormula& f = desc::grid_formula(blob_, i);
      out_ += std::string(i ? "," : "") + "\n    {\"q_lo\": " + std::to_string(f.q_lo) +
              ", \"q_hi\": " + std::to_string(f.q_hi) + ", \"start\": " + std::to_string(f.start) +
              ", \"center_start\": " + std::to_string(f.center_start) +
              ", \"frames\": " + std::to_string(f.frames) +
              ", \"rows\": " + std::to_string(f.rows) + ", \"cols\": " + std::to_string(f.cols) +
              ", \"strip\": " + std::to_string(f.strip) + ", \"shape\": \"" +
              (f.shape == desc::kShapeBox ? "box" : "ellipse") +
              "\", \"rt\": " + std::to_string(f.rt) + ", \"ry\": " + std::to_string(f.ry) +
              ", \"rx\": " + std::to_string(f.rx) + "}";
    }
    out_ += hd_.num_grid_formulas ? "\n  ],\n" : "],\n";
  }

  void bands(const desc::Pattern& p) {
    out_ += ", \"bands\": [";
    const desc::RowBand* band = desc::at<desc::RowBand>(blob_, p.data_offset);
    for (int i = 0; i < p.count; ++i) {
      out_ += std::string(i ? ", " : "") + "{\"rows\": [" + std::to_string(band[i].row_first) +
              ", " + std::to_string(band[i].row_last) +
              "], \"lo0\": " + std::to_string(band[i].lo0) +
              ", \"lo_slope\": " + std::to_string(band[i].lo_slope) +
              ", \"hi0\": " + std::to_string(band[i].hi0) +
              ", \"hi_slope\": " + std::to_string(band[i].hi_slope) + "}";
    }
    out_ += "]";
  }

  // Per tile row, its non-empty listed intervals as [lo, hi) pairs, under `key`: tile-relative
  // for row ranges, in the instance's key columns for a row table.
  void row_intervals(const desc::Pattern& p, const char* key) {
    out_ += std::string(", \"") + key + "\": [";
    for (int32_t r = 0; r < hd_.tile_m; ++r) {
      out_ += r ? ", [" : "[";
      const char* separator = "";
      desc::for_each_listed_interval(blob_, p, 0, r, [&](int lo, int hi) {
        if (lo >= hi) return;
        out_ += std::string(separator) + "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        separator = ", ";
      });
      out_ += "]";
    }
    out_ += "]";
  }

  // One hex string per tile row, most significant word first.
  void bitmap(const desc::Pattern& p) {
    out_ += ", \"bitmap\": [";
    const int32_t words = descriptor::bitmap_words_per_row(hd_.tile_n);
    const uint32_t* bits = desc::at<uint32_t>(blob_, p.data_offset);
    for (int32_t r = 0; r < hd_.tile_m; ++r) {
      out_ += r ? ", \"" : "\"";
      for (int32_t w = words - 1; w >= 0; --w) {
        char hex[9];
        std::snprintf(hex, sizeof(hex), "%08x", bits[r * words + w]);
        out_ += hex;
      }
      out_ += "\"";
    }
    out_ += "]";
  }

  void patterns() {
    out_ += "  \"patterns\": [";
    for (int32_t i = 0; i < hd_.num_patterns; ++i) {
      const desc::Pattern& p = desc::pattern(blob_, static_cast<uint32_t>(i));
      out_ += std::string(i ? "," : "") + "\n    {\"id\": " + std::to_string(i) +
              ", \"empty_halves\": " + std::to_string(p.empty_halves) + ", \"kind\": ";
      if (p.kind == desc::kPatternBitmap) {
        out_ += "\"bitmap\"";
        bitmap(p);
      } else if (p.kind == desc::kPatternRowRanges) {
        out_ += "\"row_ranges\"";
        row_intervals(p, "row_ranges");
      } else if (p.kind == desc::kPatternRowTable) {
        out_ += "\"row_table\"";
        row_intervals(p, "row_table");
      } else {
        const char* kind = p.kind == desc::kPatternGrid         ? "\"grid\""
                           : p.kind == desc::kPatternGridSparse ? "\"grid_sparse\""
                                                                : "\"bands\"";
        out_ += kind;
        if (desc::is_grid_kind(p.kind)) out_ += ", \"formula\": " + std::to_string(p.formula);
        bands(p);
      }
      out_ += "}";
    }
    out_ += hd_.num_patterns ? "\n  ],\n" : "],\n";
  }

  void form(const char* name, uint32_t rows_offset, uint32_t order_offset, int32_t count,
            bool last) {
    const desc::TileRow* rows = desc::at<desc::TileRow>(blob_, rows_offset);
    const uint16_t* order = desc::at<uint16_t>(blob_, order_offset);
    out_ += "      \"" + std::string(name) + "\": {\n        \"order\": [";
    for (int32_t i = 0; i < count; ++i) out_ += (i ? ", " : "") + std::to_string(order[i]);
    out_ += "],\n        \"tiles\": [";
    for (int32_t t = 0; t < count; ++t) {
      const desc::TileRow& row = rows[t];
      char cost[32];
      std::snprintf(cost, sizeof(cost), "%.2f", static_cast<double>(row.cost));
      out_ += std::string(t ? "," : "") + "\n          {\"tile\": " + std::to_string(t) +
              ", \"cost\": " + cost + ", \"full\": [";
      const desc::FullRun* full = desc::full_runs(blob_, row);
      for (int i = 0; i < row.full_count; ++i) {
        out_ += std::string(i ? ", " : "") + "[" + std::to_string(full[i].first) + ", " +
                std::to_string(full[i].count) + "]";
      }
      out_ += "], \"partial\": [";
      const desc::PartialRun* partial = desc::partial_runs(blob_, row);
      for (int i = 0; i < row.partial_count; ++i) {
        out_ += std::string(i ? ", " : "") + "[" + std::to_string(partial[i].first) + ", " +
                std::to_string(partial[i].count) + ", " + std::to_string(partial[i].pattern) + "]";
      }
      out_ += "]}";
    }
    out_ += count ? "\n        ]\n      }" : "]\n      }";
    out_ += last ? "\n" : ",\n";
  }

  void instances() {
    out_ += "  \"instances\": [";
    for (int32_t i = 0; i < hd_.num_instances; ++i) {
      const desc::Instance& inst = desc::instance(blob_, i);
      out_ += std::string(i ? "," : "") +
              "\n    {\n      \"visible_pairs\": " + std::to_string(inst.visible_pairs) + ",\n";
      form("forward", inst.q_tiles_offset, inst.fwd_order_offset, hd_.num_q_tiles, false);
      form("transposed", inst.k_tiles_offset, inst.bwd_order_offset, hd_.num_k_tiles, true);
      out_ += "    }";
    }
    out_ += "\n  ]\n";
  }

  const void* blob_;
  const desc::Header& hd_;
  std::string out_;
};

}  // namespace

std::string descriptor_to_json(const void* blob) {
  return JsonDump(blob).run();
}

}  // namespace cm
