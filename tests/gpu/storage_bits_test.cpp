// cm::cuda::to_storage_bits and from_storage_bits on the host: the IEEE bit patterns of bf16
// (1-8-7) and fp16 (1-5-10), rounding to nearest even, infinities, NaN, and exact round trips.
#include <compilemask/cuda.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace cm::cuda {
namespace {

TEST(StorageBits, KnownPatterns) {
  EXPECT_EQ(to_storage_bits(1.0f, DType::kBFloat16), 0x3F80);
  EXPECT_EQ(to_storage_bits(-2.0f, DType::kBFloat16), 0xC000);
  EXPECT_EQ(to_storage_bits(1.0f, DType::kFloat16), 0x3C00);
  EXPECT_EQ(to_storage_bits(-2.0f, DType::kFloat16), 0xC000);
  EXPECT_EQ(to_storage_bits(0.0f, DType::kFloat16), 0x0000);
  EXPECT_EQ(to_storage_bits(-0.0f, DType::kBFloat16), 0x8000);
  EXPECT_EQ(from_storage_bits(0x3F80, DType::kBFloat16), 1.0f);
  EXPECT_EQ(from_storage_bits(0x3C00, DType::kFloat16), 1.0f);
  EXPECT_EQ(from_storage_bits(0x0001, DType::kFloat16), std::ldexp(1.0f, -24));  // subnormal
}

TEST(StorageBits, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7: even (1) wins; 1 + 3 * 2^-8 lies halfway
  // between 1 + 2^-7 and 1 + 2^-6: even (1 + 2^-6) wins.
  EXPECT_EQ(to_storage_bits(1.0f + std::ldexp(1.0f, -8), DType::kBFloat16), 0x3F80);
  EXPECT_EQ(to_storage_bits(1.0f + 3 * std::ldexp(1.0f, -8), DType::kBFloat16), 0x3F82);
  EXPECT_EQ(to_storage_bits(1.0f + std::ldexp(1.0f, -11), DType::kFloat16), 0x3C00);
  EXPECT_EQ(to_storage_bits(1.0f + 3 * std::ldexp(1.0f, -11), DType::kFloat16), 0x3C02);
  EXPECT_EQ(to_storage_bits(70000.0f, DType::kFloat16), 0x7C00);  // past fp16's max: +inf
}

TEST(StorageBits, InfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    EXPECT_EQ(from_storage_bits(to_storage_bits(inf, dtype), dtype), inf);
    EXPECT_EQ(from_storage_bits(to_storage_bits(-inf, dtype), dtype), -inf);
    EXPECT_TRUE(std::isnan(from_storage_bits(to_storage_bits(NAN, dtype), dtype)));
    EXPECT_TRUE(std::isnan(from_storage_bits(0xFFFF, dtype)));  // the poison pattern
  }
}

TEST(StorageBits, EveryFiniteValueRoundTrips) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
      const float value = from_storage_bits(static_cast<uint16_t>(bits), dtype);
      if (std::isnan(value)) continue;
      ASSERT_EQ(to_storage_bits(value, dtype), bits) << "bits 0x" << std::hex << bits;
    }
  }
}

}  // namespace
}  // namespace cm::cuda
