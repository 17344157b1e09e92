// The sm90 GPU backend of `compilemask run --gpu` (see gpu_backend.h). Every CUDA call is
// checked; a failure throws cm::cuda::CudaError naming the step.
#include "gpu_backend.h"

#include <compilemask/cuda.h>
#include <compilemask/cuda_backward.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace cm::cli {
namespace {

using cuda::CudaError;

constexpr int kTimedRuns = 5;  // odd, so that the median is one run's time

void check(cudaError_t status, const std::string& step) {
  if (status != cudaSuccess) {
    throw CudaError("GPU run: " + step + ": " + cudaGetErrorString(status));
  }
}

// Device memory that every exit path frees.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, const std::string& name) : bytes_(bytes) {
    check(cudaMalloc(&ptr_, bytes), "allocating " + std::to_string(bytes) + " bytes for " + name);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  // All bytes 0xff: NaN in bf16, fp16 and float32 alike.
  void poison() const { check(cudaMemset(ptr_, 0xff, bytes_), "filling a buffer with NaN"); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// A 16-bit tensor on the device.
class DeviceTensor {
 public:
  DeviceTensor(size_t elements, cuda::DType dtype, const std::string& name)
      : buffer_(elements * sizeof(uint16_t), name), dtype_(dtype) {}

  void upload(const std::vector<float>& values) const {
    std::vector<uint16_t> bits(values.size());
    std::transform(values.begin(), values.end(), bits.begin(),
                   [&](float x) { return cuda::to_storage_bits(x, dtype_); });
    check(cudaMemcpy(buffer_.get(), bits.data(), buffer_.bytes(), cudaMemcpyHostToDevice),
          "uploading an input");
  }

  std::vector<float> download() const {
    std::vector<uint16_t> bits(buffer_.bytes() / sizeof(uint16_t));
    check(cudaMemcpy(bits.data(), buffer_.get(), buffer_.bytes(), cudaMemcpyDeviceToHost),
          "downloading a result");
    std::vector<float> values(bits.size());
    std::transform(bits.begin(), bits.end(), values.begin(),
                   [&](uint16_t b) { return cuda::from_storage_bits(b, dtype_); });
    return values;
  }

  void* get() const { return buffer_.get(); }
  void poison() const { buffer_.poison(); }

 private:
  DeviceBuffer buffer_;
  cuda::DType dtype_;
};

class Event {
 public:
  Event() { check(cudaEventCreate(&event_), "creating a CUDA event"); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Runs `launch` once to warm up, then kTimedRuns times between CUDA events on the default
// stream; returns the median in seconds. Kernel faults surface at the synchronizations.
double median_seconds(const std::function<void()>& launch, const std::string& phase) {
  launch();
  check(cudaDeviceSynchronize(), "the " + phase + " warm-up run");
  const Event start, stop;
  std::vector<float> milliseconds(kTimedRuns);
  for (float& ms : milliseconds) {
    check(cudaEventRecord(start.get(), nullptr), "recording a CUDA event");
    launch();
    check(cudaEventRecord(stop.get(), nullptr), "recording a CUDA event");
    check(cudaEventSynchronize(stop.get()), "the timed " + phase + " runs");
    check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "reading a CUDA event time");
  }
  std::nth_element(milliseconds.begin(), milliseconds.begin() + kTimedRuns / 2, milliseconds.end());
  return milliseconds[kTimedRuns / 2] * 1e-3;
}

cuda::DType kernel_dtype(GpuDType dtype) {
  return dtype == GpuDType::kBFloat16 ? cuda::DType::kBFloat16 : cuda::DType::kFloat16;
}

std::vector<float> download_floats(const DeviceBuffer& buffer) {
  std::vector<float> values(buffer.bytes() / sizeof(float));
  check(cudaMemcpy(values.data(), buffer.get(), buffer.bytes(), cudaMemcpyDeviceToHost),
        "downloading float32 results");
  return values;
}

// K and V of a problem ([B, Hkv, nk, D]) in pools of pages [num_pages, Hkv, page_size, D], as a
// paged cache holds them: each sequence's pages where a shuffle put them, one page spare, and
// NaN in every slot that holds no key (a last page's rows past nk, the spare page), which the
// forward must never let reach O.
struct PagedInputs {
  std::vector<int32_t> table;  // [batch][pages per sequence]
  int32_t pages_per_sequence = 0;
  int32_t num_pages = 0;
  std::vector<float> k, v;
};

PagedInputs in_pages(const AttentionProblem& p, int32_t page_size) {
  const AttentionShape& s = p.shape;
  PagedInputs paged;
  paged.pages_per_sequence = (s.nk + page_size - 1) / page_size;
  paged.num_pages = s.batch * paged.pages_per_sequence + 1;
  std::vector<int32_t> order(static_cast<size_t>(paged.num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<uint32_t>(page_size)));
  paged.table.assign(order.begin(), order.end() - 1);
  const auto heads = static_cast<size_t>(s.heads_kv);
  const auto nk = static_cast<size_t>(s.nk), rows = static_cast<size_t>(page_size);
  const auto per_sequence = static_cast<size_t>(paged.pages_per_sequence);
  const auto k_dim = static_cast<size_t>(s.head_dim),
             v_dim = static_cast<size_t>(value_head_dim(s));
  for (auto [from, to, dim] :
       {std::tuple{&p.k, &paged.k, k_dim}, std::tuple{&p.v, &paged.v, v_dim}}) {
    to->assign(static_cast<size_t>(paged.num_pages) * heads * rows * dim,
               std::numeric_limits<float>::quiet_NaN());
    for (size_t b = 0; b < static_cast<size_t>(s.batch); ++b) {
      for (size_t h = 0; h < heads; ++h) {
        for (size_t j = 0; j < nk; ++j) {
          const auto page = static_cast<size_t>(paged.table[b * per_sequence + j / rows]);
          std::copy_n(from->data() + ((b * heads + h) * nk + j) * dim, dim,
                      to->data() + ((page * heads + h) * rows + j % rows) * dim);
        }
      }
    }
  }
  return paged;
}

AttentionResult run_gpu(cuda::DType dtype, const void* blob, const AttentionProblem& p,
                        const BackendOptions& options) {
  const AttentionShape& s = p.shape;
  const cuda::DeviceDescriptor descriptor(blob);
  const bool paged = options.page_size > 0;
  const PagedInputs pages = paged ? in_pages(p, options.page_size) : PagedInputs{};
  const std::vector<float>& k_values = paged ? pages.k : p.k;
  const std::vector<float>& v_values = paged ? pages.v : p.v;
  const DeviceTensor q(p.q.size(), dtype, "Q"), k(k_values.size(), dtype, "K"),
      v(v_values.size(), dtype, "V"),
      out(static_cast<size_t>(s.batch) * s.heads_q * s.nq * value_head_dim(s), dtype, "O");
  const DeviceBuffer lse(static_cast<size_t>(s.batch) * s.heads_q * s.nq * sizeof(float), "LSE");

  q.upload(p.q);
  k.upload(k_values);
  v.upload(v_values);
  out.poison();
  lse.poison();

  // AttentionProblem's tensors are [B, H, S, D].
  cuda::ForwardArgs f;
  static_cast<cuda::Problem&>(f) = cuda::dense_problem(dtype, s, q.get(), k.get(), v.get(),
                                                       out.get(), static_cast<float*>(lse.get()));
  f.softcap = p.softcap;
  // A float32 vector of one value per query head, uploaded into `buffer`: its address, or null
  // for none.
  const auto upload_per_head = [](const std::vector<float>& values, const std::string& name,
                                  std::optional<DeviceBuffer>& buffer) -> const float* {
    if (values.empty()) return nullptr;
    buffer.emplace(values.size() * sizeof(float), name);
    check(cudaMemcpy(buffer->get(), values.data(), buffer->bytes(), cudaMemcpyHostToDevice),
          "uploading " + name);
    return static_cast<const float*>(buffer->get());
  };
  std::optional<DeviceBuffer> sinks, slopes, dsinks;
  f.sinks = upload_per_head(p.sinks, "the sinks", sinks);
  f.alibi_slopes = upload_per_head(p.alibi_slopes, "the ALiBi slopes", slopes);
  f.num_splits = options.num_splits;
  std::optional<DeviceBuffer> page_table;
  if (paged) {
    page_table.emplace(pages.table.size() * sizeof(int32_t), "the page table");
    check(cudaMemcpy(page_table->get(), pages.table.data(), page_table->bytes(),
                     cudaMemcpyHostToDevice),
          "uploading the page table");
    for (auto [pool, dim] : {std::pair{&f.k, s.head_dim}, std::pair{&f.v, value_head_dim(s)}}) {
      const int64_t head_rows = int64_t{options.page_size} * dim;
      pool->stride_b = head_rows * s.heads_kv;  // a page
      pool->stride_s = dim;
      pool->stride_h = head_rows;
    }
    f.paged = {static_cast<const int32_t*>(page_table->get()), pages.pages_per_sequence,
               options.page_size, pages.num_pages};
  }
  // The count that num_splits gives, asked once (forward() would estimate again for 0) and
  // reported.
  f.num_splits = cuda::forward_num_splits(descriptor.view(), f);
  const DeviceBuffer forward_workspace(cuda::forward_workspace_bytes(descriptor.view(), f),
                                       "the forward workspace");
  forward_workspace.poison();  // forward() needs no initialised workspace

  AttentionResult r;
  r.schedule = "key splits " + std::to_string(f.num_splits);
  if (options.on_phase) options.on_phase("forward");
  r.forward_seconds = median_seconds(
      [&] {
        cuda::forward(descriptor.view(), f, forward_workspace.get(), forward_workspace.bytes(),
                      nullptr);
      },
      "forward");
  r.out = out.download();
  r.lse = download_floats(lse);
  if (!options.backward) return r;

  const DeviceTensor dout(p.dout.size(), dtype, "dO"), dq(p.q.size(), dtype, "dQ"),
      dk(p.k.size(), dtype, "dK"), dv(p.v.size(), dtype, "dV");
  cuda::BackwardArgs b;
  static_cast<cuda::Problem&>(b) = f;  // the forward's problem, read
  b.dout = cuda::dense_bhsd(dout.get(), s.heads_q, s.nq, value_head_dim(s));
  b.dq = cuda::dense_bhsd(dq.get(), s.heads_q, s.nq, s.head_dim);
  b.dk = cuda::dense_bhsd(dk.get(), s.heads_kv, s.nk, s.head_dim);
  b.dv = cuda::dense_bhsd(dv.get(), s.heads_kv, s.nk, value_head_dim(s));
  if (sinks) {
    dsinks.emplace(sinks->bytes(), "the sinks' gradient");
    dsinks->poison();
    b.dsinks = static_cast<float*>(dsinks->get());
  }
  b.head_splits = options.head_splits;  // then the count it gives, asked once as num_splits was
  b.head_splits = cuda::backward_head_splits(descriptor.view(), b);
  r.schedule += ", head splits " + std::to_string(b.head_splits);
  const DeviceBuffer backward_workspace(cuda::backward_workspace_bytes(descriptor.view(), b),
                                        "the backward workspace");
  dout.upload(p.dout);
  for (const DeviceTensor* t : {&dq, &dk, &dv}) t->poison();
  backward_workspace.poison();

  if (options.on_phase) options.on_phase("backward");
  r.backward_seconds = median_seconds(
      [&] {
        cuda::backward(descriptor.view(), b, backward_workspace.get(), backward_workspace.bytes(),
                       nullptr);
      },
      "backward");
  r.dq = dq.download();
  r.dk = dk.download();
  r.dv = dv.download();
  if (dsinks) r.dsinks = download_floats(*dsinks);
  return r;
}

// The name of device 0 after checking that it runs sm_90a code.
std::string sm90_device_name() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    throw CudaError(std::string("no CUDA device: ") +
                    (status != cudaSuccess ? cudaGetErrorString(status) : "the driver lists none") +
                    " (--gpu needs an NVIDIA driver and a Hopper GPU)");
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "reading the properties of device 0");
  if (prop.major != 9 || prop.minor != 0) {
    throw CudaError(std::string("--gpu needs a compute capability 9.0 GPU (Hopper, sm_90a); "
                                "device 0, ") +
                    prop.name + ", is " + std::to_string(prop.major) + "." +
                    std::to_string(prop.minor));
  }
  return prop.name;
}

}  // namespace

AttentionBackend gpu_backend(GpuDType dtype) {
  const std::string device = sm90_device_name();
  const std::string type = dtype == GpuDType::kBFloat16 ? "bf16" : "fp16";
  const cuda::DType kernel = kernel_dtype(dtype);
  return {
      "GPU " + type + " (" + device + ")",
      [kernel](const void* descriptor, const AttentionProblem& p, const BackendOptions& options) {
        return run_gpu(kernel, descriptor, p, options);
      },
      [kernel](float x) {
        return cuda::from_storage_bits(cuda::to_storage_bits(x, kernel), kernel);
      }};
}

}  // namespace cm::cli
