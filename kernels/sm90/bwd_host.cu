// Host launcher of the sm90 backward kernels (include/compilemask/cuda_backward.h): checks the
// problem against the descriptor, lays out the workspace, encodes the TMA tensor maps and
// enqueues preprocess, main kernel and postprocess. Allocates nothing.
#include <compilemask/cuda_backward.h>
#include <compilemask/descriptor.h>

#include "bwd_launch.h"
#include "host_checks.h"
#include "packed_rows.h"
#include "tma_maps.h"

#include <cuda.h>

#include <string>

namespace cm::cuda {
namespace {

constexpr int kTile = sm90::kBwdTile;
constexpr size_t kSectionAlign = 256;
constexpr host::LaunchChecks check{"cm::cuda::backward"};

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// Byte offsets of the workspace sections (bwd_params.h) and the total size.
struct WorkspaceLayout {
  int64_t rows_padded;
  size_t lse_log2, dsum, dq_accum, semaphores, zeroed, total;
};

// Rows are per query tile, each padded to kTile (tiles may be shorter than kTile anywhere,
// descriptor.h), so a tile's rows of the workspace start at m * kTile.
WorkspaceLayout workspace_layout(const DescriptorView& descriptor, int32_t batch, int32_t heads_q,
                                 int32_t head_dim) {
  const desc::Header& h = check.descriptor(descriptor, kTile);
  check.require(batch >= 1 && batch <= 65535, "batch must be in [1, 65535]");
  check.require(heads_q >= 1 && heads_q <= 65535, "heads_q must be in [1, 65535]");
  check.require(h.nq >= 1, "the descriptor's nq must be >= 1");
  check.head_dim(head_dim);
  WorkspaceLayout w{};
  w.rows_padded = int64_t{h.num_q_tiles} * kTile;
  const int64_t rows = int64_t{batch} * heads_q * w.rows_padded;
  const auto section = [](int64_t bytes) {
    return static_cast<size_t>(round_up(bytes, kSectionAlign));
  };
  w.lse_log2 = 0;
  w.dsum = w.lse_log2 + section(rows * 4);
  w.dq_accum = w.dsum + section(rows * 4);
  w.semaphores = w.dq_accum + section(rows * host::kernel_head_dim(head_dim) * 4);
  w.zeroed = w.semaphores + section(rows / sm90::kBwdStepRows * 4);
  w.total = w.zeroed + section(int64_t{batch} * heads_q * 4);
  return w;
}

// Validates args against the descriptor header; throws cm::Error naming the broken rule.
void validate(const DescriptorView& d, const BackwardArgs& a) {
  const desc::Header& h = check.descriptor(d, kTile);
  const bool packed = check.problem(h, kTile, a);
  check.tensor(a.dout, "dout", packed);
  check.tensor(a.dq, "dq", packed);
  check.tensor(a.dk, "dk", packed);
  check.tensor(a.dv, "dv", packed);
}

template <sm90::ElementKind kElement>
cudaError_t dispatch_head_dim(int head_dim, const sm90::BwdPrepParams& prep,
                              const sm90::BwdMainParams& main, const sm90::BwdPostParams& post,
                              const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                              const CUtensorMap& dout, bool deterministic, cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return sm90::launch_backward<kElement, 64>(prep, main, post, q, k, v, dout, deterministic,
                                                 stream);
    case 128:
      return sm90::launch_backward<kElement, 128>(prep, main, post, q, k, v, dout, deterministic,
                                                  stream);
    default:
      return sm90::launch_backward<kElement, 256>(prep, main, post, q, k, v, dout, deterministic,
                                                  stream);
  }
}

}  // namespace

size_t backward_workspace_bytes(const DescriptorView& descriptor, int32_t batch, int32_t heads_q,
                                int32_t head_dim) {
  return workspace_layout(descriptor, batch, heads_q, head_dim).total;
}

void backward(const DescriptorView& descriptor, const BackwardArgs& args, void* workspace,
              size_t workspace_bytes, cudaStream_t stream) {
  validate(descriptor, args);
  const WorkspaceLayout layout =
      workspace_layout(descriptor, args.batch, args.heads_q, args.head_dim);
  check.require(workspace != nullptr && workspace_bytes >= layout.total,
                "workspace must hold backward_workspace_bytes() = " + std::to_string(layout.total) +
                    " bytes");
  check.require(reinterpret_cast<uintptr_t>(workspace) % kSectionAlign == 0,
                "workspace must be 256-byte aligned");
  const desc::Header& h = desc::header(descriptor.host);
  const bool packed = args.q_offsets != nullptr;
  auto* base = static_cast<unsigned char*>(workspace);

  sm90::BwdShape shape{};
  static_cast<sm90::ProblemShape&>(shape) =
      host::problem_shape(args, descriptor, host::TileTables::kAlways);
  shape.rows_padded = static_cast<int32_t>(layout.rows_padded);
  sm90::BwdWorkspace ws{};
  ws.lse_log2 = reinterpret_cast<float*>(base + layout.lse_log2);
  ws.dsum = reinterpret_cast<float*>(base + layout.dsum);
  ws.dq_accum = reinterpret_cast<float*>(base + layout.dq_accum);
  ws.semaphores = reinterpret_cast<int32_t*>(base + layout.semaphores);
  ws.zeroed = reinterpret_cast<int32_t*>(base + layout.zeroed);
  const float scale = host::softmax_scale(args);
  const auto batch_stride = [&](const TensorRef& t) { return packed ? 0 : t.stride_b; };

  sm90::BwdPrepParams prep{};
  prep.shape = shape;
  prep.out = args.out.data;
  prep.out_stride_b = batch_stride(args.out);
  prep.out_stride_s = args.out.stride_s;
  prep.out_stride_h = args.out.stride_h;
  prep.dout = args.dout.data;
  prep.dout_stride_b = batch_stride(args.dout);
  prep.dout_stride_s = args.dout.stride_s;
  prep.dout_stride_h = args.dout.stride_h;
  prep.lse = args.lse;
  prep.lse_stride_b = packed ? 0 : args.lse_stride_b;
  prep.lse_stride_h = args.lse_stride_h;
  prep.dlse = args.dlse;
  prep.ws = ws;
  prep.zeroed_slices = args.deterministic ? args.batch * args.heads_kv : sm90::kPrepZeroedSlices;

  sm90::BwdMainParams main{};
  main.shape = shape;
  main.descriptor = descriptor.device;
  main.scale = scale;
  const host::LogitFactors logits = host::logit_factors(args);
  main.scale_log2 = logits.scale_log2;
  main.softcap_scale = logits.softcap_scale;
  main.dk = const_cast<void*>(args.dk.data);
  main.dk_stride_b = batch_stride(args.dk);
  main.dk_stride_s = args.dk.stride_s;
  main.dk_stride_h = args.dk.stride_h;
  main.dv = const_cast<void*>(args.dv.data);
  main.dv_stride_b = batch_stride(args.dv);
  main.dv_stride_s = args.dv.stride_s;
  main.dv_stride_h = args.dv.stride_h;
  main.ws = ws;

  sm90::BwdPostParams post{};
  post.shape = shape;
  post.scale = scale;
  post.dq = const_cast<void*>(args.dq.data);
  post.dq_stride_b = batch_stride(args.dq);
  post.dq_stride_s = args.dq.stride_s;
  post.dq_stride_h = args.dq.stride_h;
  post.dq_accum = ws.dq_accum;

  const int64_t q_rows = packed ? args.total_q : args.nq;
  const int64_t k_rows = packed ? args.total_k : args.nk;
  const int d = args.head_dim;
  const int kernel_d = host::kernel_head_dim(d);
  const int step = sm90::kBwdStepRows;
  const CUtensorMap q = host::make_tile_map(check, args.q, args.dtype, d, q_rows, args.heads_q,
                                            args.batch, packed, step);
  const CUtensorMap dout = host::make_tile_map(check, args.dout, args.dtype, d, q_rows,
                                               args.heads_q, args.batch, packed, step);
  const int item_keys = sm90::backward_keys_per_item(kernel_d);
  const CUtensorMap k = host::make_tile_map(check, args.k, args.dtype, d, k_rows, args.heads_kv,
                                            args.batch, packed, item_keys);
  const CUtensorMap v = host::make_tile_map(check, args.v, args.dtype, d, k_rows, args.heads_kv,
                                            args.batch, packed, item_keys);

  const cudaError_t launched =
      args.dtype == DType::kBFloat16
          ? dispatch_head_dim<sm90::ElementKind::kBFloat16>(kernel_d, prep, main, post, q, k, v,
                                                            dout, args.deterministic, stream)
          : dispatch_head_dim<sm90::ElementKind::kFloat16>(kernel_d, prep, main, post, q, k, v,
                                                           dout, args.deterministic, stream);
  check.cuda(launched, "launching the backward kernels");
  if (packed) {
    sm90::PackedRowsParams rows{};
    rows.shape = shape;
    rows.write_outside = args.write_rows_outside_sequences;
    rows.num_axes = 2;
    rows.axes[0] = {false, args.heads_q, 1, {host::rows_tensor(args.dq, d)}};
    rows.axes[1] = {
        true, args.heads_kv, 2, {host::rows_tensor(args.dk, d), host::rows_tensor(args.dv, d)}};
    check.cuda(sm90::launch_packed_rows(rows, stream), "launching the packed rows kernel");
  }
}

}  // namespace cm::cuda
