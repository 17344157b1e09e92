// cm::Plan: a descriptor blob with its stats.
#include <compilemask/compilemask.h>

#include "descriptor/decode.h"
#include "descriptor/plan_stats.h"

#include <cstring>

namespace cm {

Plan::Plan(std::vector<uint64_t> storage, PlanStats stats, Dims dims, Tiling tiling)
    : storage_(std::move(storage)), stats_(stats), dims_(dims), tiling_(tiling) {}

Plan Plan::from_descriptor(const void* data, size_t size) {
  // The readers need 8-byte aligned storage; verification reads only `size` bytes of it.
  std::vector<uint64_t> storage((size + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
  if (size > 0) std::memcpy(storage.data(), data, size);
  verify_descriptor(storage.data(), size);
  const desc::Header& hd = desc::header(storage.data());
  const Dims dims{hd.nq, hd.nk, hd.batch, hd.heads};
  const Tiling tiling{hd.tile_m, hd.tile_n};
  PlanStats stats = descriptor::read_plan_stats(storage.data());
  return Plan(std::move(storage), stats, dims, tiling);
}

size_t Plan::size_bytes() const {
  return static_cast<size_t>(desc::header(blob()).total_bytes);
}

std::vector<uint8_t> Plan::dense(int32_t b, int32_t h, int32_t q_begin, int32_t q_end) const {
  return decode_dense(blob(), b, h, DescriptorForm::kForward, {q_begin, q_end});
}

}  // namespace cm
