// Aligned section layout for descriptor blobs (see blob_writer.h).
#include "descriptor/blob_writer.h"

#include <compilemask/compilemask.h>

namespace cm::descriptor {

uint32_t BlobWriter::reserve(size_t bytes) {
  const size_t offset = (bytes_.size() + kAlign - 1) / kAlign * kAlign;
  if (offset + bytes > size_t{0xFFFFFFFFu}) {
    throw Error("descriptor: the blob would exceed 4 GiB; use larger tiles or fewer instances");
  }
  bytes_.resize(offset + bytes, 0);
  return static_cast<uint32_t>(offset);
}

std::vector<uint64_t> BlobWriter::finish() {
  bytes_.resize((bytes_.size() + kAlign - 1) / kAlign * kAlign, 0);
  std::vector<uint64_t> storage(bytes_.size() / sizeof(uint64_t));
  std::memcpy(storage.data(), bytes_.data(), bytes_.size());
  return storage;
}

}  // namespace cm::descriptor
