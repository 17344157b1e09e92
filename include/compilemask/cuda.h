// CompileMask GPU forward attention (Hopper, sm_90a), driven by a descriptor.
//
//   cm::cuda::DeviceDescriptor plan_gpu(plan.blob());           // once: uploads the descriptor
//   size_t bytes = cm::cuda::forward_workspace_bytes(plan_gpu.view(), args);  // device memory
//   cm::cuda::forward(plan_gpu.view(), args, workspace, bytes, stream);  // per call
//
// forward() is stream-ordered, allocates nothing and can be captured in a CUDA graph. It checks
// the problem against the descriptor and throws cm::Error before launching anything when they
// do not fit; CUDA failures throw cm::cuda::CudaError.
#pragma once

#include <compilemask/compilemask.h>
#include <compilemask/cuda_limits.h>
#include <compilemask/reference.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace cm::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DType : int32_t { kBFloat16 = 0, kFloat16 = 1 };

// The kernel's main loop. kSerial runs QKᵀ, softmax and PV one after the other in each consumer
// warpgroup (the two warpgroups still overlap each other); kPingpong also overlaps the softmax
// with the products inside a warpgroup and makes the two warpgroups alternate. Measured on an
// H200 (docs/perf-notes.md, v9), pingpong is 2–11% faster on every benchmark workload and
// length, short rows included, at head dims up to 128; at head dims above 128 serial is 4–22%
// faster (pingpong's scores, probabilities and O outgrow the registers; session 30). kAuto
// picks pingpong where O has at most 128 columns (the kernels for head dims up to 128, and the
// one for 192 with 128 for V), else serial.
enum class Mainloop : int32_t { kAuto = 0, kSerial = 1, kPingpong = 2 };

// A [batch, rows, heads, columns] tensor by element strides; its columns (head_dim, or
// head_dim_v for v, out, dout and dv) must be contiguous.
// [B, S, H, D] and [B, H, S, D] are two choices of strides. In the packed layout ([T, H, D],
// see Problem::q_offsets) stride_b is ignored.
struct TensorRef {
  const void* data = nullptr;
  int64_t stride_b = 0;
  int64_t stride_s = 0;
  int64_t stride_h = 0;
};

// The attention problem that forward() and backward() share: element type, sizes, the
// forward's tensors and LSE, and the packed layout.
struct Problem {
  DType dtype = DType::kBFloat16;
  int32_t batch = 1;
  int32_t heads_q = 1;
  int32_t heads_kv = 1;  // heads_q must be a multiple (GQA/MQA)
  int32_t nq = 0;        // query rows per sequence; must equal the descriptor's nq
  int32_t nk = 0;        // key rows per sequence; must equal the descriptor's nk
  int32_t head_dim = 0;  // columns of q and k: head_dim_supported(head_dim) (cuda_limits.h)
  // Columns of v and out (and of dout and dv): 0 means head_dim, else head_dim_supported too.
  // Multi-head latent attention (DeepSeek's MLA) trains with 192 for q and k and 128 for v: the
  // forward has a kernel for that pair; other pairs, and the backward, run on the kernel of the
  // wider head dim (cuda_limits.h), with zero-padded columns.
  int32_t head_dim_v = 0;
  float scale = 0.f;  // softmax scale; 0 means 1/sqrt(head_dim)
  // Logit soft-capping (Gemma 2): with softcap > 0 the logits are softcap * tanh(scale * q·k /
  // softcap), as FlashAttention's softcap; 0 means none. The kernels take tanh from the special
  // function unit (relative error about 2^-11).
  float softcap = 0.f;
  // Attention sinks (gpt-oss; FlashInfer's and FlashAttention 3's learnable sink): null, or
  // device float32 [heads_q], a natural-log logit per query head (not scaled, not capped) of a
  // key of value 0 that every row of the head sees. It joins each row's softmax denominator
  // only: O = sum_j e^{s_j} v_j / (e^{sinks[h]} + sum_j e^{s_j}), LSE = log(e^{sinks[h]} +
  // sum_j e^{s_j}); a row that sees no key gets O = 0 and LSE = sinks[h]. -inf is no sink for
  // that head; in the packed layout the rows outside every sequence keep LSE -inf
  // (write_rows_outside_sequences). The kernels do not read it on the host: NaN or +inf give
  // NaN rows. The backward reads the LSE that includes the sinks (pass the forward's Problem)
  // and can return their gradient (BackwardArgs::dsinks).
  const float* sinks = nullptr;
  // ALiBi (Press et al.; FlashAttention 2's alibi_slopes): null, or device float32 [heads_q]:
  // logit (i, j) of query head h gains -alibi_slopes[h] * |i + nk - nq - j|, where i and j count
  // from each sequence's first query and key (the last query row and the last key at distance
  // 0), after the cap and before the mask. The bias does not depend on Q or K, so it has no
  // gradient of its own. Positions are the kernels' rows: with a token order (Plan::token_order)
  // they are the reordered ones. The backward needs the same slopes (pass the forward's Problem).
  const float* alibi_slopes = nullptr;
  TensorRef q, k, v;
  TensorRef out;  // same dtype as q; forward() writes it (through a cast), backward() reads it
  // Natural-log LSE, float32, row stride 1: lse[b * lse_stride_b + h * lse_stride_h + row].
  // forward() writes it (through a cast), backward() reads it.
  const float* lse = nullptr;
  int64_t lse_stride_b = 0;
  int64_t lse_stride_h = 0;
  // Packed layout [T, H, D]: when set, device arrays of `batch` int32 row offsets; sequence b
  // occupies rows [q_offsets[b], q_offsets[b] + nq) of q/out (and of the LSE rows) and rows
  // [k_offsets[b], k_offsets[b] + nk) of k/v. total_q and total_k are T of each tensor, below
  // 2^31 (rows are int32, as the offsets).
  // Those ranges must lie inside [0, T). The host does not read the offsets (that would cost a
  // sync); the kernels check them: a sequence that does not fit is not computed, its rows of
  // out, the LSE and the gradients that lie inside the tensors get NaN, and no kernel reads or
  // writes a row outside them.
  // The rows between and after the sequences may hold anything, NaN included: neither pass lets
  // them reach a result. In the forward, neither do keys inside a sequence that the mask hides;
  // the backward needs every row inside a sequence finite (a masked gradient product there is
  // 0 * NaN).
  const int32_t* q_offsets = nullptr;
  const int32_t* k_offsets = nullptr;
  int64_t total_q = 0;
  int64_t total_k = 0;
  // Packed layout: what becomes of the output rows that lie in no sequence (of out and the LSE,
  // or of dq, dk and dv). false: the passes leave them as they are (FlashAttention's varlen
  // convention; the rows may then belong to other data). true: they are written as rows that
  // see no key, 0 in out and the gradients and -inf in the LSE, in a small kernel after each
  // pass that writes only those rows, so a caller need not zero-fill whole outputs first.
  bool write_rows_outside_sequences = false;
};

// K and V in pages (decoding against a paged cache, as vLLM's block tables and
// FlashAttention's page_table): Problem::k and Problem::v are pools of num_pages pages of
// page_size rows, page p's row r of head h at data + p * stride_b + r * stride_s + h * stride_h
// (elements; [pages, page_size, H, D] and [pages, H, page_size, D] are two choices of strides).
// Key row j of sequence b is row j % page_size of page page_table[b * page_table_stride +
// j / page_size]. A page index outside [0, num_pages) reads as zeros (it never faults). Key
// rows that no query row sees never reach O, whatever they hold (NaN included): the rows of a
// sequence's last page past nk, and the keys below nk of a sequence that the mask makes shorter
// (cm::cuda::Problem's packed layout has the same guarantee).
struct PagedKV {
  const int32_t* page_table = nullptr;  // device memory; null: K and V are not paged
  int64_t page_table_stride = 0;        // entries per sequence, >= ceil(nk / page_size)
  int32_t page_size = 0;                // 16, 32, 64 or a multiple of 128
  int32_t num_pages = 0;
};

struct ForwardArgs : Problem {
  Mainloop mainloop = Mainloop::kAuto;
  // Persistent CTAs to launch at most; 0 means one per SM. Fewer leave SMs free for kernels
  // running concurrently on other streams. Each CTA takes work items until none is left.
  int32_t max_ctas = 0;
  // Split keys, for launches with fewer (b, h, query tile) work items than the GPU has SMs
  // (decoding, a short chunk of queries against a long cache): each query tile's key tiles are
  // cut into num_splits parts that run as separate work items, then merged by their LSEs (as
  // FlashAttention's num_splits). 0: automatic (split only when the items leave SMs idle; see
  // forward_num_splits), 1: never, 2 to 256: that many parts. The split parts need workspace.
  int32_t num_splits = 0;
  // Paged K and V (forward only). Needs the strided layout for q and out (no offsets) and a
  // plan whose key tiles do not restart (uniform 128-key tiles: no segments that restart them).
  PagedKV paged;
};

// The 16-bit storage bits of x in dtype (rounded to nearest even), and the value that storage
// bits hold: for filling and reading the kernels' tensors on the host.
uint16_t to_storage_bits(float x, DType dtype);
float from_storage_bits(uint16_t bits, DType dtype);

// A contiguous [B, H, S, D] tensor: `heads` heads of `rows` rows of head_dim elements each.
TensorRef dense_bhsd(const void* data, int32_t heads, int32_t rows, int32_t head_dim);

// The Problem of contiguous [B, H, S, D] tensors q, k, v and out and a contiguous [B, H, nq]
// LSE, sized by `shape`: the layout of the CPU reference (compilemask/reference.h).
Problem dense_problem(DType dtype, const AttentionShape& shape, const void* q, const void* k,
                      const void* v, const void* out, const float* lse);

// A non-owning pair: the descriptor in host memory (read for validation and the launch
// geometry) and the same bytes in device memory (read by the kernel).
struct DescriptorView {
  const void* host = nullptr;
  const void* device = nullptr;
};

// Owns a device copy of a descriptor blob; keeps a pointer to the caller's host blob, which
// must outlive this object. Construction allocates and copies (not a hot path).
class DeviceDescriptor {
 public:
  explicit DeviceDescriptor(const void* host_blob);
  ~DeviceDescriptor();
  DeviceDescriptor(const DeviceDescriptor&) = delete;
  DeviceDescriptor& operator=(const DeviceDescriptor&) = delete;

  DescriptorView view() const { return {host_, device_}; }

 private:
  const void* host_;
  void* device_ = nullptr;
};

// These two read only the sizes of `args` (batch, heads_q, heads_kv, head_dim, head_dim_v) and
// num_splits, so they can be asked before the tensors exist, and throw cm::Error for sizes
// forward() would reject.
//
// The number of parts forward() cuts each query tile's key tiles into on the current device:
// num_splits itself when it is not 0; else 1 when the work items fill the SMs, or the fewest
// parts (each of two key tiles or more) that fill them about as well as any count does. The
// work items are (b, h, query tile), or (b, GQA group, query tile) when the group's query heads
// share tiles: when heads_q / heads_kv divides 128, the descriptor has one mask for all heads
// and nq <= 128 / (heads_q / heads_kv) (decoding; FlashAttention 3's PackGQA).
int forward_num_splits(const DescriptorView& descriptor, const ForwardArgs& args);

// Bytes of device workspace forward() needs: 256, and with split keys or shared tiles 4
// (head_dim_v + 1) bytes per key part and output row.
size_t forward_workspace_bytes(const DescriptorView& descriptor, const ForwardArgs& args);

// O = softmax(scale * Q Kᵀ masked) V (or of the capped logits, Problem::softcap; with
// Problem::sinks in the denominator) and the LSE, for every (b, h). Rows that see no key get
// O = 0 and LSE = -inf (the head's sink with sinks). `workspace` is device memory
// of at least forward_workspace_bytes(...) bytes, 16-byte aligned; its contents need not be
// initialised.
void forward(const DescriptorView& descriptor, const ForwardArgs& args, void* workspace,
             size_t workspace_bytes, cudaStream_t stream);

}  // namespace cm::cuda
