// libFuzzer target for the descriptor reader, the gate for blobs that come from outside (files
// written by `compilemask compile --emit descriptor`, bytes handed to the kernels' launchers):
// verify_descriptor must reject any bytes with cm::Error or accept them, never crash or read
// out of bounds. A blob it accepts must decode (both forms, every (b, h)) and dump to JSON
// without a sanitizer report, since the CPU reference and the kernels trust what it accepts.
#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include "descriptor/decode.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> blob((size + 7) / 8);  // the 8-byte aligned storage verify expects
  if (size > 0) std::memcpy(blob.data(), data, size);
  try {
    cm::verify_descriptor(blob.data(), size);
  } catch (const cm::Error&) {
    return 0;
  }
  const cm::desc::Header& h = cm::desc::header(blob.data());
  if (int64_t{h.nq} * h.nk * h.batch * h.heads <= (int64_t{1} << 20)) {
    for (int32_t b = 0; b < h.batch; ++b) {
      for (int32_t head = 0; head < h.heads; ++head) {
        const auto forward = cm::decode_dense(blob.data(), b, head, cm::DescriptorForm::kForward);
        const auto transposed =
            cm::decode_dense(blob.data(), b, head, cm::DescriptorForm::kTransposed);
        if (forward != transposed) __builtin_trap();  // verify checks both forms list one mask
      }
    }
  }
  if (cm::descriptor_to_json(blob.data()).empty()) __builtin_trap();
  return 0;
}
