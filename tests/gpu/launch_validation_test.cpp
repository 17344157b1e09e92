// The launchers' checks, on the host: every problem that does not fit is rejected by
// cm::cuda::forward and cm::cuda::backward with a cm::Error whose message names the entry point
// and the broken rule. The checks run before any CUDA call, so this suite needs no GPU and runs
// in CI; the tensors are host memory and nothing is launched.
#include <compilemask/compilemask.h>
#include <compilemask/cuda.h>
#include <compilemask/cuda_backward.h>
#include <compilemask/descriptor.h>
#include <compilemask/reference.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using cm::cuda::BackwardArgs;
using cm::cuda::DType;
using cm::cuda::ForwardArgs;

constexpr int kN = 256, kHeads = 2, kDim = 128;

cm::Plan causal_plan(int tile) {
  const cm::CompileResult compiled =
      cm::compile("mask causal() {\n  q in all: k in [0, diag]\n}\n", "causal.mask");
  if (!compiled) throw std::runtime_error("the causal mask does not compile");
  return compiled.mask->specialize({}, {.nq = kN, .nk = kN, .batch = 1, .heads = kHeads},
                                   {tile, tile});
}

// 256-byte aligned host memory, so that only the alignments a case breaks are broken.
struct HostBuffer {
  std::unique_ptr<void, decltype(&std::free)> memory;
  explicit HostBuffer(size_t bytes) : memory(std::aligned_alloc(256, bytes), &std::free) {}
  void* get() const { return memory.get(); }
};

// How a case breaks a valid problem, and what the message must say.
struct Rule {
  std::string broken;
  std::function<void(cm::cuda::Problem&)> apply;
  std::string message;
};

// Rules of the problem both entry points share.
std::vector<Rule> problem_rules() {
  using P = cm::cuda::Problem;
  return {
      {"dtype", [](P& a) { a.dtype = static_cast<DType>(7); }, "dtype must be bf16 or fp16"},
      {"head dim", [](P& a) { a.head_dim = 100; }, "head_dim 100 is not supported"},
      {"wide head dim", [](P& a) { a.head_dim = 264; }, "(a multiple of 8 from 8 to 256)"},
      {"no heads", [](P& a) { a.heads_kv = 0; }, "batch and heads must be >= 1"},
      {"GQA group", [](P& a) { a.heads_kv = 3; }, "must be a multiple of heads_kv (3)"},
      {"negative scale", [](P& a) { a.scale = -1.f; }, "scale must be finite and >= 0"},
      {"NaN scale", [](P& a) { a.scale = std::nanf(""); }, "scale must be finite and >= 0"},
      {"negative softcap", [](P& a) { a.softcap = -1.f; }, "softcap must be finite and >= 0"},
      {"infinite softcap", [](P& a) { a.softcap = std::numeric_limits<float>::infinity(); },
       "softcap must be finite and >= 0"},
      {"sink alignment",
       [](P& a) {
         a.sinks = reinterpret_cast<const float*>(reinterpret_cast<const char*>(&a) + 1);
       },
       "sinks must be 4-byte aligned (float32)"},
      {"ALiBi alignment",
       [](P& a) {
         a.alibi_slopes = reinterpret_cast<const float*>(reinterpret_cast<const char*>(&a) + 2);
       },
       "alibi_slopes must be 4-byte aligned (float32)"},
      {"nq", [](P& a) { a.nq = kN - 1; }, "differ from the descriptor's nq=256"},
      {"heads", [](P& a) { a.heads_q = a.heads_kv = 4; }, "descriptor heads 2 must be 1 or"},
      {"half packed", [](P& a) { a.q_offsets = reinterpret_cast<const int32_t*>(&a); },
       "packed layout needs both q_offsets and k_offsets"},
      {"packed totals",
       [](P& a) {
         a.q_offsets = a.k_offsets = reinterpret_cast<const int32_t*>(&a);
         a.total_q = kN - 1;
         a.total_k = kN;
       },
       "packed layout needs total_q >= nq and total_k >= nk"},
      {"packed rows past int32",
       [](P& a) {
         a.q_offsets = a.k_offsets = reinterpret_cast<const int32_t*>(&a);
         a.total_q = kN;
         a.total_k = int64_t{1} << 31;
       },
       "packed layout needs total_q and total_k below 2^31 (the offsets are int32)"},
      {"q stride", [](P& a) { a.q.stride_s = 100; }, "q.stride_s must be a positive multiple"},
      {"k null", [](P& a) { a.k.data = nullptr; }, "k.data is null"},
      {"v stride_h", [](P& a) { a.v.stride_h = 0; }, "v.stride_h must be a positive multiple"},
      {"out alignment", [](P& a) { a.out.data = static_cast<const char*>(a.out.data) + 2; },
       "out.data must be 16-byte aligned"},
      {"lse null", [](P& a) { a.lse = nullptr; }, "lse is null"},
      {"lse stride", [](P& a) { a.lse_stride_h = -1; }, "lse strides must be >= 0"},
  };
}

class LaunchValidation : public testing::Test {
 protected:
  LaunchValidation()
      : plan_(causal_plan(128)),
        tensors_(4 * kTensorBytes + kHeads * kN * sizeof(float)),
        workspace_(backward_bytes()) {}

  static constexpr size_t kTensorBytes = size_t{kHeads} * kN * kDim * 2;

  cm::cuda::DescriptorView view(const void* host) const {
    return {host, host};  // never dereferenced as device memory: every case fails first
  }

  cm::cuda::Problem problem() const {
    auto* base = static_cast<char*>(tensors_.get());
    const cm::AttentionShape shape{
        .batch = 1, .heads_q = kHeads, .heads_kv = kHeads, .nq = kN, .nk = kN, .head_dim = kDim};
    return cm::cuda::dense_problem(DType::kBFloat16, shape, base, base + kTensorBytes,
                                   base + 2 * kTensorBytes, base + 3 * kTensorBytes,
                                   reinterpret_cast<const float*>(base + 4 * kTensorBytes));
  }

  // Keys not split: the automatic split count would read the device's SM count.
  ForwardArgs forward_args() const {
    ForwardArgs a;
    static_cast<cm::cuda::Problem&>(a) = problem();
    a.num_splits = 1;
    return a;
  }

  BackwardArgs backward_args() const {
    BackwardArgs a;
    static_cast<cm::cuda::Problem&>(a) = problem();
    a.dout = a.dq = a.q;  // read and written tensors alike are only checked, never touched
    a.dk = a.k;
    a.dv = a.v;
    a.head_splits = 1;  // automatic would ask the device for its SM count
    return a;
  }

  void forward(const void* blob, const ForwardArgs& a, size_t workspace_bytes) const {
    cm::cuda::forward(view(blob), a, workspace_.get(), workspace_bytes, nullptr);
  }

  void backward(const void* blob, const BackwardArgs& a, void* workspace,
                size_t workspace_bytes) const {
    cm::cuda::backward(view(blob), a, workspace, workspace_bytes, nullptr);
  }

  size_t forward_bytes(int num_splits = 1) const {
    ForwardArgs a = forward_args();
    a.num_splits = num_splits;
    return cm::cuda::forward_workspace_bytes(view(plan_.blob()), a);
  }

  size_t backward_bytes() const {
    return cm::cuda::backward_workspace_bytes(view(plan_.blob()), backward_args());
  }

  cm::Plan plan_;
  HostBuffer tensors_;
  HostBuffer workspace_;
};

// Runs call, which must throw a cm::Error "<entry>: ..." that contains message.
void expect_rejected(const std::function<void()>& call, const std::string& entry,
                     const std::string& message, const std::string& broken) {
  try {
    call();
    ADD_FAILURE() << entry << " accepted a problem with a broken " << broken;
  } catch (const cm::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(entry + ": ", 0), 0u) << broken << ": " << what;
    EXPECT_NE(what.find(message), std::string::npos)
        << broken << ": \"" << what << "\" lacks \"" << message << "\"";
  } catch (const std::exception& e) {
    ADD_FAILURE() << broken << ": not a cm::Error: " << e.what();
  }
}

TEST_F(LaunchValidation, ForwardRejectsEachBrokenRule) {
  const size_t bytes = forward_bytes();
  for (const Rule& rule : problem_rules()) {
    ForwardArgs a = forward_args();
    rule.apply(a);
    expect_rejected([&] { forward(plan_.blob(), a, bytes); }, "cm::cuda::forward", rule.message,
                    rule.broken);
  }
  const std::vector<Rule> forward_rules = {
      {"mainloop",
       [](cm::cuda::Problem& a) {
         static_cast<ForwardArgs&>(a).mainloop = static_cast<cm::cuda::Mainloop>(9);
       },
       "mainloop must be kAuto, kSerial or kPingpong"},
      {"max_ctas", [](cm::cuda::Problem& a) { static_cast<ForwardArgs&>(a).max_ctas = -1; },
       "max_ctas must be >= 0"},
      {"num_splits", [](cm::cuda::Problem& a) { static_cast<ForwardArgs&>(a).num_splits = -1; },
       "num_splits must be 0 (automatic), 1 (keys not split) or up to 256"},
      {"num_splits", [](cm::cuda::Problem& a) { static_cast<ForwardArgs&>(a).num_splits = 257; },
       "num_splits must be 0 (automatic), 1 (keys not split) or up to 256"},
      // 2 query tiles x 2 heads x 2^29 batch rows: 2^31 items, whose indices would wrap.
      {"work items", [](cm::cuda::Problem& a) { a.batch = 1 << 29; },
       "too many (batch, head, query tile, key split) work items"},
  };
  for (const Rule& rule : forward_rules) {
    ForwardArgs a = forward_args();
    rule.apply(a);
    expect_rejected([&] { forward(plan_.blob(), a, bytes); }, "cm::cuda::forward", rule.message,
                    rule.broken);
  }
  expect_rejected([&] { forward(plan_.blob(), forward_args(), bytes - 1); }, "cm::cuda::forward",
                  "workspace must hold forward_workspace_bytes()", "workspace size");
  // Split keys need room for every part's O and LSE.
  ForwardArgs split = forward_args();
  split.num_splits = 3;
  expect_rejected(
      [&] { forward(plan_.blob(), split, bytes); }, "cm::cuda::forward",
      "workspace must hold forward_workspace_bytes() = " + std::to_string(forward_bytes(3)),
      "split workspace size");
  expect_rejected(
      [&] {
        cm::cuda::forward(view(plan_.blob()), forward_args(),
                          static_cast<char*>(workspace_.get()) + 4, bytes, nullptr);
      },
      "cm::cuda::forward", "workspace must be 16-byte aligned", "workspace alignment");
}

TEST_F(LaunchValidation, ForwardRejectsBrokenPagedKeys) {
  const size_t bytes = forward_bytes();
  static const int32_t kTable[4] = {};  // host memory: never read, every case fails first
  const auto paged_args = [&] {
    ForwardArgs a = forward_args();
    a.paged = {.page_table = kTable, .page_table_stride = 2, .page_size = 128, .num_pages = 4};
    return a;
  };
  using Change = std::function<void(ForwardArgs&)>;
  const std::vector<std::pair<std::string, Change>> rules = {
      {"paged.page_size must be 16, 32, 64 or a multiple of 128, got 48",
       [](ForwardArgs& a) { a.paged.page_size = 48; }},
      {"paged.page_size must be 16, 32, 64 or a multiple of 128, got 0",
       [](ForwardArgs& a) { a.paged.page_size = 0; }},
      {"paged.num_pages must be >= 1", [](ForwardArgs& a) { a.paged.num_pages = 0; }},
      {"paged.page_table_stride must be >= ceil(nk / page_size) = 16",
       [](ForwardArgs& a) { a.paged.page_size = 16; }},
      {"paged K/V needs the strided layout for q and out",
       [](ForwardArgs& a) {
         a.q_offsets = a.k_offsets = kTable;
         a.total_q = a.total_k = kN;
       }},
  };
  for (const auto& [message, change] : rules) {
    ForwardArgs a = paged_args();
    change(a);
    expect_rejected([&] { forward(plan_.blob(), a, bytes); }, "cm::cuda::forward", message,
                    message);
  }
  // Packed documents restart the key tiles at their boundaries (the second one at key 300).
  const cm::CompileResult docs = cm::compile(
      "mask docs(d: segments) {\n  for s in d {\n    q in s: k in [s.start, q]\n  }\n}\n",
      "docs.mask");
  ASSERT_TRUE(docs);
  const cm::Plan restarted =
      docs.mask->specialize({{"d", cm::Segments::from_lengths({300, 724})}},
                            {.nq = 1024, .nk = 1024, .batch = 1, .heads = kHeads}, {128, 128});
  ForwardArgs a = paged_args();
  a.nq = a.nk = 1024;
  a.paged.page_table_stride = 8;
  expect_rejected([&] { forward(restarted.blob(), a, bytes); }, "cm::cuda::forward",
                  "paged K/V needs a plan whose key tiles do not restart", "restarted key tiles");
}

TEST_F(LaunchValidation, ForwardWorkspaceSizeRejectsWhatForwardWould) {
  const std::string entry = "cm::cuda::forward";
  const cm::cuda::DescriptorView d = view(plan_.blob());
  using Change = std::function<void(ForwardArgs&)>;
  const std::vector<std::pair<std::string, Change>> rules = {
      {"head_dim 4 is not supported", [](ForwardArgs& a) { a.head_dim = 4; }},
      {"batch and heads must be >= 1", [](ForwardArgs& a) { a.batch = 0; }},
      {"batch and heads must be >= 1", [](ForwardArgs& a) { a.heads_kv = 0; }},
      {"must be a multiple of heads_kv", [](ForwardArgs& a) { a.heads_kv = 3; }},
      {"num_splits must be 0 (automatic), 1 (keys not split) or up to 256",
       [](ForwardArgs& a) { a.num_splits = 300; }},
  };
  for (const auto& [message, change] : rules) {
    ForwardArgs a = forward_args();
    change(a);
    expect_rejected([&] { cm::cuda::forward_workspace_bytes(d, a); }, entry, message, message);
    expect_rejected([&] { cm::cuda::forward_num_splits(d, a); }, entry, message, message);
  }
  expect_rejected([&] { cm::cuda::forward_workspace_bytes({}, forward_args()); }, entry,
                  "descriptor host and device pointers must be set", "descriptor");
  // The sizes alone: no tensor is set.
  ForwardArgs sizes;
  sizes.heads_q = kHeads;
  sizes.heads_kv = kHeads;
  sizes.head_dim = kDim;
  sizes.num_splits = 3;
  EXPECT_EQ(cm::cuda::forward_workspace_bytes(d, sizes), forward_bytes(3));
  // kN rows of kHeads heads, each part's LSE and O in float32.
  const size_t rows = size_t{kHeads} * kN;
  EXPECT_GE(forward_bytes(3), forward_bytes(1) + 3 * rows * (kDim + 1) * sizeof(float));
  EXPECT_EQ(cm::cuda::forward_num_splits(d, sizes), 3);
}

TEST_F(LaunchValidation, BackwardRejectsEachBrokenRule) {
  for (const Rule& rule : problem_rules()) {
    BackwardArgs a = backward_args();
    rule.apply(a);
    expect_rejected([&] { backward(plan_.blob(), a, workspace_.get(), backward_bytes()); },
                    "cm::cuda::backward", rule.message, rule.broken);
  }
  using B = BackwardArgs;
  const std::vector<std::pair<std::string, std::function<void(B&)>>> outputs = {
      {"dout.data must be 16-byte aligned",
       [](B& a) { a.dout.data = static_cast<const char*>(a.dout.data) + 2; }},
      {"dq.stride_s must be a positive multiple", [](B& a) { a.dq.stride_s = 100; }},
      {"dk.data is null", [](B& a) { a.dk.data = nullptr; }},
      {"dv.stride_h must be a positive multiple", [](B& a) { a.dv.stride_h = 4; }},
      {"head_splits must be 0 (automatic)", [](B& a) { a.head_splits = -1; }},
      {"dsinks needs sinks",
       [](B& a) {
         static float never_written;  // rejected before any launch
         a.dsinks = &never_written;
       }},
  };
  for (const auto& [message, apply] : outputs) {
    BackwardArgs a = backward_args();
    apply(a);
    expect_rejected([&] { backward(plan_.blob(), a, workspace_.get(), backward_bytes()); },
                    "cm::cuda::backward", message, message);
  }
  expect_rejected(
      [&] { backward(plan_.blob(), backward_args(), workspace_.get(), backward_bytes() - 1); },
      "cm::cuda::backward", "workspace must hold backward_workspace_bytes()", "workspace size");
  expect_rejected(
      [&] {
        backward(plan_.blob(), backward_args(), static_cast<char*>(workspace_.get()) + 16,
                 backward_bytes());
      },
      "cm::cuda::backward", "workspace must be 256-byte aligned", "workspace alignment");
}

TEST_F(LaunchValidation, BackwardWorkspaceSizeRejectsWhatBackwardWould) {
  const std::string entry = "cm::cuda::backward";
  const cm::cuda::DescriptorView d = view(plan_.blob());
  const auto sizes = [](int batch, int heads_q, int heads_kv, int head_dim, int head_splits) {
    BackwardArgs a;
    a.batch = batch;
    a.heads_q = heads_q;
    a.heads_kv = heads_kv;
    a.head_dim = head_dim;
    a.head_splits = head_splits;
    return a;
  };
  expect_rejected([&] { cm::cuda::backward_workspace_bytes({}, sizes(1, 1, 1, kDim, 0)); }, entry,
                  "descriptor host and device pointers must be set", "descriptor");
  expect_rejected([&] { cm::cuda::backward_workspace_bytes(d, sizes(1, 1, 1, 4, 0)); }, entry,
                  "head_dim 4 is not supported", "head dim");
  // Batch and heads index CUDA grid dimensions y and z, which stop at 65535.
  expect_rejected([&] { cm::cuda::backward_workspace_bytes(d, sizes(65536, 1, 1, kDim, 0)); },
                  entry, "batch must be in [1, 65535]", "batch");
  expect_rejected([&] { cm::cuda::backward_workspace_bytes(d, sizes(1, 65536, 1, kDim, 0)); },
                  entry, "heads_q must be in [1, 65535]", "heads");
  expect_rejected([&] { cm::cuda::backward_workspace_bytes(d, sizes(1, 4, 3, kDim, 0)); }, entry,
                  "heads_q (4) must be a multiple of heads_kv (3)", "group");
  // Head splits: 0 (automatic), 1, or up to the group's 4 heads.
  for (const int bad : {-1, 5}) {
    expect_rejected([&] { cm::cuda::backward_head_splits(d, sizes(1, 8, 2, kDim, bad)); }, entry,
                    "head_splits must be 0 (automatic), 1 (heads not split) or up to heads_q / "
                    "heads_kv = 4",
                    "head splits");
  }
  EXPECT_EQ(cm::cuda::backward_head_splits(d, sizes(1, 8, 2, kDim, 3)), 3);
  EXPECT_EQ(cm::cuda::backward_head_splits(d, sizes(1, 8, 8, kDim, 0)), 1);  // no group
  // Split parts add their float32 dK and dV sums to the workspace.
  EXPECT_GT(cm::cuda::backward_workspace_bytes(d, sizes(1, 8, 2, kDim, 4)),
            cm::cuda::backward_workspace_bytes(d, sizes(1, 8, 2, kDim, 1)));
  EXPECT_GT(cm::cuda::backward_workspace_bytes(d, sizes(65535, 1, 1, kDim, 0)), 0u);
  // The grid's linear block index is an int: 2 key tiles x 2 parts x heads x batch below 2^31.
  EXPECT_GT(cm::cuda::backward_workspace_bytes(d, sizes(65535, 8192, 8192, kDim, 0)), 0u);
  expect_rejected(
      [&] { cm::cuda::backward_workspace_bytes(d, sizes(65535, 8193, 8193, kDim, 0)); }, entry,
      "too many backward work items: key tiles * 2 * heads_q * batch must be below 2^31",
      "work items");
}

// Descriptors the kernels cannot read: both entry points refuse them by the same rules.
TEST_F(LaunchValidation, BothRejectForeignDescriptors) {
  const cm::Plan tiles64 = causal_plan(64);
  const auto* header = static_cast<const cm::desc::Header*>(plan_.blob());
  std::vector<unsigned char> foreign(header->total_bytes), future(header->total_bytes);
  std::memcpy(foreign.data(), plan_.blob(), foreign.size());
  std::memcpy(future.data(), plan_.blob(), future.size());
  reinterpret_cast<cm::desc::Header*>(foreign.data())->magic ^= 1u;
  reinterpret_cast<cm::desc::Header*>(future.data())->version += 1;
  const std::vector<std::pair<const void*, std::string>> blobs = {
      {tiles64.blob(), "the sm90 kernel needs 128x128"},
      {foreign.data(), "bad magic number"},
      {future.data(), "is not the supported version"},
  };
  for (const auto& [blob, message] : blobs) {
    expect_rejected([&, blob = blob] { forward(blob, forward_args(), forward_bytes()); },
                    "cm::cuda::forward", message, message);
    expect_rejected(
        [&, blob = blob] { backward(blob, backward_args(), workspace_.get(), backward_bytes()); },
        "cm::cuda::backward", message, message);
  }
  expect_rejected(
      [&] {
        cm::cuda::forward({plan_.blob(), nullptr}, forward_args(), workspace_.get(),
                          forward_bytes(), nullptr);
      },
      "cm::cuda::forward", "descriptor host and device pointers must be set", "device pointer");
}

// A blob with a valid header but broken insides (here a partial run naming a pattern the table
// does not hold, which a kernel would read past the table) is refused at upload, by the full
// verification, before any CUDA call.
TEST_F(LaunchValidation, UploadVerifiesTheWholeDescriptor) {
  const auto* header = static_cast<const cm::desc::Header*>(plan_.blob());
  std::vector<uint64_t> broken(header->total_bytes / sizeof(uint64_t));
  std::memcpy(broken.data(), plan_.blob(), header->total_bytes);
  const cm::desc::Instance& inst = cm::desc::instance(broken.data(), 0);
  const cm::desc::TileRow& row = cm::desc::q_tile(broken.data(), inst, 1);
  ASSERT_GT(row.partial_count, 0);
  auto* run = reinterpret_cast<cm::desc::PartialRun*>(
      reinterpret_cast<unsigned char*>(broken.data()) + row.partial_offset);
  run->pattern = 1000;
  expect_rejected([&] { cm::cuda::DeviceDescriptor upload(broken.data()); },
                  "cm::cuda::DeviceDescriptor", "pattern 1000 is out of range", "pattern index");
}

}  // namespace
