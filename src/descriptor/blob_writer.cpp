// Aligned section layout for descriptor blobs (see blob_writer.h).
#include "descriptor/blob_writer.h"

#include <compilemask/compilemask.h>

namespace cm::descriptor {

uint32_t BlobWriter::reserve(size_t bytes) {
  const size_t offset = (size_ + kAlign - 1) / kAlign * kAlign;
  if (offset + bytes > size_t{0xFFFFFFFFu}) {
    throw Error("descriptor: the blob would exceed 4 GiB; use larger tiles or fewer instances");
  }
  size_ = offset + bytes;
  storage_.resize((size_ + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
  return static_cast<uint32_t>(offset);
}

std::vector<uint64_t> BlobWriter::finish() {
  size_ = (size_ + kAlign - 1) / kAlign * kAlign;
  storage_.resize(size_ / sizeof(uint64_t), 0);
  return std::move(storage_);
}

}  // namespace cm::descriptor
