// Lays out a descriptor blob: sections appended at 16-byte aligned offsets, written in place
// into the blob's final 8-byte aligned storage (the blob can be megabytes: no second copy).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace cm::descriptor {

class BlobWriter {
 public:
  inline static constexpr size_t kAlign = 16;

  // Appends a zeroed section of `bytes` bytes at the next 16-byte boundary; returns its offset.
  // Throws cm::Error if the blob would pass 4 GiB (offsets are 32-bit).
  uint32_t reserve(size_t bytes);

  template <class T>
  uint32_t append(std::span<const T> items) {
    const uint32_t offset = reserve(items.size_bytes());
    if (!items.empty()) std::memcpy(bytes() + offset, items.data(), items.size_bytes());
    return offset;
  }

  template <class T>
  void write(uint32_t offset, const T& value) {
    std::memcpy(bytes() + offset, &value, sizeof(T));
  }

  // Pads the end to 16 bytes and hands over the blob.
  std::vector<uint64_t> finish();

 private:
  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(storage_.data()); }

  std::vector<uint64_t> storage_;  // always holds at least size_ bytes, zeroed past them
  size_t size_ = 0;
};

}  // namespace cm::descriptor
