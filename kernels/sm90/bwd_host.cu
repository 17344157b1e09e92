// Host launcher of the sm90 backward kernels (include/compilemask/cuda_backward.h): checks the
// problem against the descriptor, lays out the workspace, encodes the TMA tensor maps and
// enqueues preprocess, main kernel and postprocess. Allocates nothing.
#include <compilemask/cuda_backward.h>
#include <compilemask/descriptor.h>

#include "bwd_launch.h"
#include "bwd_schedule_memo.h"
#include "bwd_work.cuh"
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

// The backward kernel instantiation that runs a checked problem.
sm90::KernelDims kernel_dims(const Problem& a) {
  return sm90::backward_kernel_dims(a.head_dim, host::value_head_dim(a));
}

// Floats per row of dq_accum (bwd_params.h).
int dq_row_floats(const Problem& a) {
  return sm90::dq_row_floats(kernel_dims(a).head_dim, a.head_dim);
}

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// The schedule auto_bwd_schedule picks for the sizes of `a` and head_splits (0: automatic),
// replayed once per problem (bwd_schedule_memo.h).
// Precondition: `a` passed work_layout's checks.
sm90::BwdSchedule estimated_schedule(const DescriptorView& descriptor, const BackwardArgs& a,
                                     int head_splits) {
  const desc::Header& h = desc::header(descriptor.host);
  check.fits_header(h, kTile, a.batch, a.heads_q, h.nq, h.nk);  // the estimate reads (b, h)
  sm90::BwdMainParams p{};
  static_cast<sm90::ProblemShape&>(p.shape) =
      host::problem_shape(a, descriptor, host::TileTables::kAlways);
  p.descriptor = descriptor.host;
  const int parts = kTile / sm90::backward_keys_per_item(kernel_dims(a).head_dim);
  return sm90::memoized_bwd_schedule(p, a.deterministic, parts, check.multiprocessors(),
                                     head_splits);
}

// How backward() lays out its work and workspace (bwd_params.h) for a problem's sizes: the main
// kernel's schedule (head splits, dispatch order), then the byte offsets of the workspace
// sections and the total size.
struct WorkLayout {
  sm90::BwdSchedule schedule;
  bool order_estimated;  // else the paired order stands in: the order changes no size
  int64_t rows_padded, k_rows_padded;
  size_t lse_log2, dsum, dq_accum, semaphores, zeroed, dkv_parts, total;
};

// The layout for the sizes of `a` that it reads (batch, heads_q, heads_kv, head dims,
// head_splits, and deterministic for the automatic schedule), checked first; throws cm::Error
// naming a broken rule. Rows are per tile, each padded to kTile (tiles may be shorter than kTile
// anywhere, descriptor.h), so a tile's rows of the workspace start at m * kTile. Only the
// automatic count needs the estimate (and the device's SM count); for a given count the
// dispatch order is left to backward().
WorkLayout work_layout(const DescriptorView& descriptor, const BackwardArgs& a) {
  const desc::Header& h = check.descriptor(descriptor, kTile);
  check.require(a.batch >= 1 && a.batch <= 65535, "batch must be in [1, 65535]");
  check.require(a.heads_q >= 1 && a.heads_q <= 65535, "heads_q must be in [1, 65535]");
  check.require(a.heads_kv >= 1, "heads_kv must be >= 1");
  check.heads_group(a.heads_q, a.heads_kv);
  check.require(h.nq >= 1, "the descriptor's nq must be >= 1");
  check.head_dims(a);
  const int group = a.heads_q / a.heads_kv;
  // bwd_item_at's linear block index is an int: key tiles x key parts (at most 2) x head
  // splits (at most the group) x kv heads x batch.
  check.require(int64_t{h.num_k_tiles} * 2 * a.heads_q * a.batch < (int64_t{1} << 31),
                "too many backward work items: key tiles * 2 * heads_q * batch must be below "
                "2^31");
  check.require(a.head_splits >= 0 && a.head_splits <= group,
                "head_splits must be 0 (automatic), 1 (heads not split) or up to heads_q / "
                "heads_kv = " +
                    std::to_string(group));
  WorkLayout w{};
  const int head_splits = group == 1 ? 1 : a.head_splits;
  w.order_estimated = head_splits == 0;
  w.schedule = w.order_estimated ? estimated_schedule(descriptor, a, 0)
                                 : sm90::BwdSchedule{head_splits, false};
  w.rows_padded = int64_t{h.num_q_tiles} * kTile;
  w.k_rows_padded = int64_t{h.num_k_tiles} * kTile;
  const int64_t rows = int64_t{a.batch} * a.heads_q * w.rows_padded;
  const int64_t slices = int64_t{a.batch} * a.heads_kv;
  const sm90::KernelDims dims = kernel_dims(a);
  const auto section = [](int64_t bytes) {
    return static_cast<size_t>(round_up(bytes, kSectionAlign));
  };
  w.lse_log2 = 0;
  w.dsum = w.lse_log2 + section(rows * 4);
  w.dq_accum = w.dsum + section(rows * 4);
  w.semaphores = w.dq_accum + section(rows * dq_row_floats(a) * 4);
  w.zeroed = w.semaphores + section(rows / sm90::kBwdStepRows * 4);
  w.dkv_parts = w.zeroed + section(slices * 4);
  const int64_t parts = w.schedule.head_splits > 1 ? w.schedule.head_splits : 0;
  w.total = w.dkv_parts +
            section(parts * slices * w.k_rows_padded * (dims.head_dim + dims.head_dim_v) * 4);
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
  check.require(a.dsinks == nullptr || a.sinks != nullptr,
                "dsinks needs sinks (the gradient of which sinks?)");
  check.per_head(a.dsinks, "dsinks");
}

template <sm90::ElementKind kElement>
cudaError_t dispatch_head_dims(sm90::KernelDims dims, const sm90::BwdPrepParams& prep,
                               const sm90::BwdMainParams& main, const sm90::BwdPostParams& post,
                               const sm90::BwdKvPostParams& kv_post, const CUtensorMap& q,
                               const CUtensorMap& k, const CUtensorMap& v, const CUtensorMap& dout,
                               bool deterministic, cudaStream_t stream) {
  switch (dims.head_dim) {
    case 64:
      return sm90::launch_backward<kElement, 64, 64>(prep, main, post, kv_post, q, k, v, dout,
                                                     deterministic, stream);
    case 128:
      return sm90::launch_backward<kElement, 128, 128>(prep, main, post, kv_post, q, k, v, dout,
                                                       deterministic, stream);
    default:
      return dims.head_dim_v == 128
                 ? sm90::launch_backward<kElement, 256, 128>(prep, main, post, kv_post, q, k, v,
                                                             dout, deterministic, stream)
                 : sm90::launch_backward<kElement, 256, 256>(prep, main, post, kv_post, q, k, v,
                                                             dout, deterministic, stream);
  }
}

}  // namespace

int backward_head_splits(const DescriptorView& descriptor, const BackwardArgs& args) {
  return work_layout(descriptor, args).schedule.head_splits;
}

size_t backward_workspace_bytes(const DescriptorView& descriptor, const BackwardArgs& args) {
  return work_layout(descriptor, args).total;
}

void backward(const DescriptorView& descriptor, const BackwardArgs& args, void* workspace,
              size_t workspace_bytes, cudaStream_t stream) {
  validate(descriptor, args);
  WorkLayout layout = work_layout(descriptor, args);
  check.require(workspace != nullptr && workspace_bytes >= layout.total,
                "workspace must hold backward_workspace_bytes() = " + std::to_string(layout.total) +
                    " bytes");
  check.require(reinterpret_cast<uintptr_t>(workspace) % kSectionAlign == 0,
                "workspace must be 256-byte aligned");
  if (!layout.order_estimated && !args.deterministic) {  // the dispatch order of a given count
    layout.schedule = estimated_schedule(descriptor, args, layout.schedule.head_splits);
  }
  const desc::Header& h = desc::header(descriptor.host);
  const bool packed = args.q_offsets != nullptr;
  auto* base = static_cast<unsigned char*>(workspace);

  sm90::BwdShape shape{};
  static_cast<sm90::ProblemShape&>(shape) =
      host::problem_shape(args, descriptor, host::TileTables::kAlways);
  shape.rows_padded = static_cast<int32_t>(layout.rows_padded);
  shape.k_rows_padded = static_cast<int32_t>(layout.k_rows_padded);
  shape.head_splits = layout.schedule.head_splits;
  shape.slice_group = sm90::slice_group(shape, args.deterministic, layout.schedule);
  sm90::BwdWorkspace ws{};
  ws.lse_log2 = reinterpret_cast<float*>(base + layout.lse_log2);
  ws.dsum = reinterpret_cast<float*>(base + layout.dsum);
  ws.dq_accum = reinterpret_cast<float*>(base + layout.dq_accum);
  ws.semaphores = reinterpret_cast<int32_t*>(base + layout.semaphores);
  ws.zeroed = reinterpret_cast<int32_t*>(base + layout.zeroed);
  ws.dkv_parts =
      layout.schedule.head_splits > 1 ? reinterpret_cast<float*>(base + layout.dkv_parts) : nullptr;
  const float scale = host::softmax_scale(args);
  const auto batch_stride = [&](const TensorRef& t) { return packed ? 0 : t.stride_b; };
  const auto gradient = [&](const TensorRef& t) {  // written: its data pointer cast writable
    return sm90::GradientRef{const_cast<void*>(t.data), batch_stride(t), t.stride_s, t.stride_h};
  };

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

  sm90::BwdMainParams main{};
  main.shape = shape;
  main.descriptor = descriptor.device;
  main.scale = scale;
  const host::LogitFactors logits = host::logit_factors(args);
  main.scale_log2 = logits.scale_log2;
  main.softcap_scale = logits.softcap_scale;
  main.alibi_slopes = args.alibi_slopes;
  main.score_units = logits.score_units;
  main.dk = gradient(args.dk);
  main.dv = gradient(args.dv);
  main.ws = ws;

  sm90::BwdPostParams post{};
  post.shape = shape;
  post.scale = scale;
  post.dq = gradient(args.dq);
  post.dq_accum = ws.dq_accum;

  sm90::BwdKvPostParams kv_post{};
  kv_post.shape = shape;
  kv_post.dk = main.dk;
  kv_post.dv = main.dv;
  kv_post.dkv_parts = ws.dkv_parts;

  const int64_t q_rows = packed ? args.total_q : args.nq;
  const int64_t k_rows = packed ? args.total_k : args.nk;
  const int d = args.head_dim, dv = shape.head_dim_v;
  const sm90::KernelDims dims = kernel_dims(args);
  const int step = sm90::kBwdStepRows;
  const CUtensorMap q = host::make_tile_map(check, args.q, args.dtype, d, q_rows, args.heads_q,
                                            args.batch, packed, step);
  const CUtensorMap dout = host::make_tile_map(check, args.dout, args.dtype, dv, q_rows,
                                               args.heads_q, args.batch, packed, step);
  const int item_keys = sm90::backward_keys_per_item(dims.head_dim);
  const CUtensorMap k = host::make_tile_map(check, args.k, args.dtype, d, k_rows, args.heads_kv,
                                            args.batch, packed, item_keys);
  const CUtensorMap v = host::make_tile_map(check, args.v, args.dtype, dv, k_rows, args.heads_kv,
                                            args.batch, packed, item_keys);

  const cudaError_t launched =
      args.dtype == DType::kBFloat16
          ? dispatch_head_dims<sm90::ElementKind::kBFloat16>(dims, prep, main, post, kv_post, q, k,
                                                             v, dout, args.deterministic, stream)
          : dispatch_head_dims<sm90::ElementKind::kFloat16>(dims, prep, main, post, kv_post, q, k,
                                                            v, dout, args.deterministic, stream);
  check.cuda(launched, "launching the backward kernels");
  if (args.dsinks != nullptr) {
    const sm90::SinkGradientParams sinks{shape, ws.lse_log2, ws.dsum, args.sinks, args.dsinks};
    check.cuda(sm90::launch_sink_gradient(sinks, stream), "launching the sink gradient kernel");
  }
  if (packed) {
    sm90::PackedRowsParams rows{};
    rows.shape = shape;
    rows.write_outside = args.write_rows_outside_sequences;
    rows.num_axes = 2;
    rows.axes[0] = {false, args.heads_q, 1, {host::rows_tensor(args.dq, d)}};
    rows.axes[1] = {
        true, args.heads_kv, 2, {host::rows_tensor(args.dk, d), host::rows_tensor(args.dv, dv)}};
    check.cuda(sm90::launch_packed_rows(rows, stream), "launching the packed rows kernel");
  }
}

}  // namespace cm::cuda
