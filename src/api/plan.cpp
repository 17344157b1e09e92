// cm::Plan: a descriptor blob with its stats.
#include <compilemask/compilemask.h>

#include "descriptor/decode.h"

namespace cm {

Plan::Plan(std::vector<uint64_t> storage, PlanStats stats, Dims dims, Tiling tiling)
    : storage_(std::move(storage)), stats_(stats), dims_(dims), tiling_(tiling) {}

size_t Plan::size_bytes() const {
  return static_cast<size_t>(desc::header(blob()).total_bytes);
}

std::vector<uint8_t> Plan::dense(int32_t b, int32_t h, int32_t q_begin, int32_t q_end) const {
  return decode_dense(blob(), b, h, DescriptorForm::kForward, {q_begin, q_end});
}

}  // namespace cm
