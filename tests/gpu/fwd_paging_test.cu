// The forward's paged K/V addressing (kernels/sm90/fwd_paging.h): which page sizes are taken, and
// that the TMA boxes of a sequence's stages load each key row below nk once, from the row of the
// page the table names, and nothing past nk.
#include "fwd_paging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace cm::sm90 {
namespace {

TEST(FwdPaging, SupportedPageSizes) {
  for (int size : {16, 32, 64, 128, 256, 384, 1024}) {
    EXPECT_TRUE(cuda::page_size_supported(size)) << size;
  }
  for (int size : {-128, 0, 1, 8, 48, 96, 100, 200}) {
    EXPECT_FALSE(cuda::page_size_supported(size)) << size;
  }
}

// Walks every stage of every sequence as the loader does (stages of stage_keys keys from key 0)
// and places each loaded row: the rows of box i are the stage's rows i * box_rows onwards.
void check_pages(int page_size, int stage_keys, int nk) {
  SCOPED_TRACE("page_size " + std::to_string(page_size) + ", stage " + std::to_string(stage_keys) +
               ", nk " + std::to_string(nk));
  const int batch = 3;
  const int pages_per_sequence = (nk + page_size - 1) / page_size;
  const int stride = pages_per_sequence + 2;  // the table's rows may be longer
  std::vector<int32_t> table(batch * stride, -1);
  std::vector<int32_t> pages(batch * pages_per_sequence + 5);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(page_size + nk));
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < pages_per_sequence; ++j) {
      table[b * stride + j] = pages[b * pages_per_sequence + j];
    }
  }
  const PagedBoxes boxes_of(page_size, stage_keys);
  const int box_rows = boxes_of.rows();
  EXPECT_EQ(box_rows, std::min(page_size, stage_keys));
  EXPECT_EQ(box_rows, kv_box_rows(page_size, stage_keys));
  for (int b = 0; b < batch; ++b) {
    const int32_t* table_row = table.data() + b * stride;
    std::vector<int> loaded(nk + stage_keys, 0);
    for (int first = 0; first < nk; first += stage_keys) {
      KeyBox box[128 / kMinPageSize];
      const int boxes = boxes_of.stage(table_row, nk, first, box);
      EXPECT_GE(boxes, 1);
      EXPECT_LE(boxes * box_rows, stage_keys);
      for (int i = 0; i < boxes; ++i) {
        EXPECT_EQ(box[i].row % box_rows, 0);
        EXPECT_LE(box[i].row + box_rows, page_size);  // a box never crosses a page
        for (int r = 0; r < box_rows; ++r) {
          const int key = first + i * box_rows + r;
          ++loaded[key];
          if (key < nk) {
            EXPECT_EQ(box[i].batch, table_row[key / page_size]) << "key " << key;
            EXPECT_EQ(box[i].row + r, key % page_size) << "key " << key;
          }
        }
      }
      // Unused entries read the stage's last page again, never the table past the sequence.
      if (page_size < stage_keys) {
        for (int i = boxes; i < stage_keys / page_size; ++i) {
          EXPECT_EQ(box[i].batch, box[boxes - 1].batch) << "box " << i;
        }
      }
    }
    for (int key = 0; key < nk; ++key) ASSERT_EQ(loaded[key], 1) << "key " << key;
    // Past nk only the rest of the last box is loaded.
    for (int key = nk; key < nk + stage_keys; ++key) {
      EXPECT_EQ(loaded[key], key < (nk + box_rows - 1) / box_rows * box_rows ? 1 : 0) << key;
    }
  }
}

TEST(FwdPaging, BoxesLoadEachKeyOnceFromItsPage) {
  for (int stage_keys : {64, 128}) {
    for (int page_size : {16, 32, 64, 128, 256, 384}) {
      for (int nk : {1, 15, 16, 17, 100, 128, 129, 1000, 4097})
        check_pages(page_size, stage_keys, nk);
    }
  }
}

}  // namespace
}  // namespace cm::sm90
