// Host launcher of the sm90 forward kernel: checks the problem against the descriptor, encodes
// the TMA tensor maps and launches the instantiation for (dtype, head dim). Allocates nothing.
#include <compilemask/cuda.h>
#include <compilemask/descriptor.h>

#include "descriptor/decode.h"
#include "fwd_launch.h"
#include "fwd_packing.h"
#include "fwd_paging.h"
#include "fwd_splits.h"
#include "host_checks.h"
#include "logit_mods.h"
#include "packed_rows.h"
#include "tma_maps.h"
#include "with_flags.h"

#include <cuda.h>

#include <algorithm>
#include <string>

namespace cm::cuda {
namespace {

constexpr int kTile = 128;  // the kernel's tile_m and tile_n
constexpr host::LaunchChecks check{"cm::cuda::forward"};

// Validates args against the descriptor header; throws cm::Error naming the broken rule.
void validate(const DescriptorView& d, const ForwardArgs& a) {
  const desc::Header& h = check.descriptor(d, kTile);
  check.problem(h, kTile, a);
  check.require(a.mainloop == Mainloop::kAuto || a.mainloop == Mainloop::kSerial ||
                    a.mainloop == Mainloop::kPingpong,
                "mainloop must be kAuto, kSerial or kPingpong");
  check.require(a.max_ctas >= 0, "max_ctas must be >= 0 (0: one CTA per SM)");
  if (a.paged.page_table != nullptr) {
    const PagedKV& paged = a.paged;
    check.require(a.q_offsets == nullptr,
                  "paged K/V needs the strided layout for q and out (no q_offsets, k_offsets)");
    check.require(page_size_supported(paged.page_size), std::string("paged.page_size must be ") +
                                                            kPageSizeRule + ", got " +
                                                            std::to_string(paged.page_size));
    check.require(paged.num_pages >= 1, "paged.num_pages must be >= 1");
    const int64_t pages_per_sequence = (int64_t{a.nk} + paged.page_size - 1) / paged.page_size;
    check.require(paged.page_table_stride >= pages_per_sequence,
                  "paged.page_table_stride must be >= ceil(nk / page_size) = " +
                      std::to_string(pages_per_sequence));
  }
}

// How forward() lays out its work for a problem's sizes.
struct WorkLayout {
  int heads_per_item;  // packed query heads (fwd_packing.h)
  int splits;          // key parts (fwd_splits.h)
  bool combine;        // the items write the workspace and fwd_combine writes O and the LSE
  int64_t items;
  sm90::FwdWorkspace workspace;
};

// The layout for the sizes of `a` that it reads (batch, heads_q, heads_kv, head dims,
// num_splits), checked first; throws cm::Error naming a broken rule.
WorkLayout work_layout(const desc::Header& h, const DescriptorView& d, const ForwardArgs& a) {
  check.head_dims(a);
  check.require(a.batch >= 1 && a.heads_q >= 1 && a.heads_kv >= 1, "batch and heads must be >= 1");
  check.heads_group(a.heads_q, a.heads_kv);
  check.require(a.num_splits >= 0 && a.num_splits <= sm90::kMaxSplits,
                "num_splits must be 0 (automatic), 1 (keys not split) or up to " +
                    std::to_string(sm90::kMaxSplits));
  WorkLayout w{};
  w.heads_per_item = sm90::heads_per_item(a.heads_q, a.heads_kv, h.heads, h.nq);
  const int64_t units = int64_t{h.num_q_tiles} * a.batch * (a.heads_q / w.heads_per_item);
  w.splits = a.num_splits;
  if (w.splits == 0) {
    const int sms = check.multiprocessors();
    // Only a launch that does not fill the SMs splits; then the longest row bounds the parts.
    int longest = 0;
    for (int i = 0; units < sms && i < h.num_instances; ++i) {
      for (int m = 0; m < h.num_q_tiles; ++m) {
        const desc::TileRow& row = desc::q_tile(d.host, desc::instance(d.host, i), m);
        longest = std::max(longest, desc::listed_tiles(d.host, row));
      }
    }
    w.splits = sm90::auto_num_splits(units, sms, longest);
  }
  w.items = units * w.splits;
  // A CTA's last item index is at most items + gridDim.x - 1 (fwd_loader.cuh's counter), and a
  // grid has at most one CTA per SM, fewer than 2^16.
  check.require(w.items < (int64_t{1} << 31) - (int64_t{1} << 16),
                "too many (batch, head, query tile, key split) work items");
  w.combine = w.splits > 1 || w.heads_per_item > 1;
  const int64_t rows = int64_t{a.batch} * a.heads_q * h.nq;  // of O and the LSE
  check.require(!w.combine || rows < (int64_t{1} << 32),
                "too many output rows (batch * heads_q * nq) to combine split keys");
  w.workspace = sm90::fwd_workspace(w.combine ? w.splits : 0, rows, host::value_head_dim(a));
  return w;
}

template <sm90::ElementKind kElement, bool kOverlap, int kLogitMods>
cudaError_t dispatch_head_dims(sm90::KernelDims dims, const sm90::FwdParams& p,
                               const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                               int grid, cudaStream_t stream) {
  switch (dims.head_dim) {
    case 64:
      return sm90::launch_forward<kElement, 64, 64, kOverlap, kLogitMods>(p, q, k, v, grid, stream);
    case 128:
      return sm90::launch_forward<kElement, 128, 128, kOverlap, kLogitMods>(p, q, k, v, grid,
                                                                            stream);
    case 192:
      return sm90::launch_forward<kElement, 192, 128, kOverlap, kLogitMods>(p, q, k, v, grid,
                                                                            stream);
    default:
      return sm90::launch_forward<kElement, 256, 256, kOverlap, kLogitMods>(p, q, k, v, grid,
                                                                            stream);
  }
}

}  // namespace

DeviceDescriptor::DeviceDescriptor(const void* host_blob) : host_(host_blob) {
  if (host_blob == nullptr) throw Error("cm::cuda::DeviceDescriptor: the blob is null");
  const desc::Header& h = desc::header(host_blob);
  if (h.magic != desc::kMagic) {
    throw Error("cm::cuda::DeviceDescriptor: bad magic number (not a CompileMask descriptor)");
  }
  // The kernels trust every offset and count of the blob, which may come from a file: check
  // them all once here, before anything reaches the device (the launches check only what
  // depends on the problem).
  try {
    verify_descriptor(host_blob, h.total_bytes);
  } catch (const Error& e) {
    throw Error(std::string("cm::cuda::DeviceDescriptor: ") + e.what());
  }
  check.cuda(cudaMalloc(&device_, h.total_bytes), "allocating the device descriptor");
  const cudaError_t copied = cudaMemcpy(device_, host_blob, h.total_bytes, cudaMemcpyHostToDevice);
  if (copied != cudaSuccess) {
    cudaFree(device_);
    check.cuda(copied, "copying the descriptor to the device");
  }
}

DeviceDescriptor::~DeviceDescriptor() {
  cudaFree(device_);
}

int forward_num_splits(const DescriptorView& descriptor, const ForwardArgs& args) {
  return work_layout(check.descriptor(descriptor, kTile), descriptor, args).splits;
}

size_t forward_workspace_bytes(const DescriptorView& descriptor, const ForwardArgs& args) {
  return work_layout(check.descriptor(descriptor, kTile), descriptor, args).workspace.total;
}

void forward(const DescriptorView& descriptor, const ForwardArgs& args, void* workspace,
             size_t workspace_bytes, cudaStream_t stream) {
  validate(descriptor, args);
  const desc::Header& h = desc::header(descriptor.host);
  const WorkLayout work = work_layout(h, descriptor, args);
  check.require(workspace != nullptr && workspace_bytes >= work.workspace.total,
                "workspace must hold forward_workspace_bytes() = " +
                    std::to_string(work.workspace.total) + " bytes");
  check.require(reinterpret_cast<uintptr_t>(workspace) % 16 == 0,
                "workspace must be 16-byte aligned");
  const bool packed = args.q_offsets != nullptr;

  sm90::FwdParams p{};
  static_cast<sm90::ProblemShape&>(p) =
      host::problem_shape(args, descriptor, host::TileTables::kWhereRestarted);
  p.descriptor = descriptor.device;
  p.total_items = static_cast<int32_t>(work.items);
  p.heads_per_item = work.heads_per_item;
  p.rows_per_head = kTile / work.heads_per_item;
  p.num_splits = work.splits;
  p.combine = work.combine;
  auto* bytes = static_cast<unsigned char*>(workspace);
  p.split_lse = reinterpret_cast<float*>(bytes + work.workspace.lse_offset);
  p.split_out = reinterpret_cast<float*>(bytes + work.workspace.out_offset);
  const host::LogitFactors logits = host::logit_factors(args);
  p.scale_log2 = logits.scale_log2;
  p.softcap_scale = logits.softcap_scale;
  p.sinks = args.sinks;
  p.alibi_slopes = args.alibi_slopes;
  p.score_units = logits.score_units;
  p.out = const_cast<void*>(args.out.data);
  p.out_stride_b = packed ? 0 : args.out.stride_b;
  p.out_stride_s = args.out.stride_s;
  p.out_stride_h = args.out.stride_h;
  p.lse = const_cast<float*>(args.lse);
  p.lse_stride_b = packed ? 0 : args.lse_stride_b;
  p.lse_stride_h = args.lse_stride_h;
  p.work_counter = static_cast<int32_t*>(workspace);
  const bool paged = args.paged.page_table != nullptr;
  check.require(!paged || p.k_starts == nullptr,
                "paged K/V needs a plan whose key tiles do not restart at block boundaries "
                "(uniform 128-key tiles), so that no key tile spans two pages");
  p.page_table = args.paged.page_table;
  p.page_table_stride = args.paged.page_table_stride;
  p.page_size = args.paged.page_size;
  p.zero_unseen = packed || paged;

  const int64_t q_rows = packed ? args.total_q : args.nq;
  const int64_t k_rows = packed ? args.total_k : args.nk;
  // With packed heads a box holds the tile's rows_per_head rows of each of its heads.
  const CUtensorMap q =
      host::make_tile_map(check, args.q, args.dtype, args.head_dim, q_rows, args.heads_q,
                          args.batch, packed, p.rows_per_head, p.heads_per_item);
  const sm90::KernelDims kernel_dims = sm90::forward_kernel_dims(args.head_dim, p.head_dim_v);
  const int stage_keys = sm90::forward_keys_per_stage(kernel_dims.head_dim_v);
  // Paged, the maps' rows are a page's and their batches the pages (fwd_paging.h).
  const int64_t kv_rows = paged ? args.paged.page_size : k_rows;
  const int kv_batch = paged ? args.paged.num_pages : args.batch;
  const int box_rows = sm90::kv_box_rows(paged ? args.paged.page_size : 0, stage_keys);
  const CUtensorMap k = host::make_tile_map(check, args.k, args.dtype, args.head_dim, kv_rows,
                                            args.heads_kv, kv_batch, packed, box_rows);
  const CUtensorMap v = host::make_tile_map(check, args.v, args.dtype, p.head_dim_v, kv_rows,
                                            args.heads_kv, kv_batch, packed, box_rows);

  const int sms = check.multiprocessors();
  const int ctas = args.max_ctas > 0 ? std::min(sms, args.max_ctas) : sms;
  const int grid = static_cast<int>(std::min<int64_t>(ctas, p.total_items));

  if (p.total_items > grid) {  // with one item per CTA the counter is never read (fwd_loader.cuh)
    check.cuda(cudaMemsetAsync(workspace, 0, sizeof(int32_t), stream), "zeroing the work counter");
  }
  // Pingpong where O and the scores leave it the registers: O of up to 128 columns.
  const bool pingpong = args.mainloop == Mainloop::kPingpong ||
                        (args.mainloop == Mainloop::kAuto && kernel_dims.head_dim_v <= 128);
  const cudaError_t launched = sm90::with_flags(
      [&]<bool kBFloat16, bool kOverlap, bool kCapped, bool kAlibi>() {
        constexpr auto kElement =
            kBFloat16 ? sm90::ElementKind::kBFloat16 : sm90::ElementKind::kFloat16;
        return dispatch_head_dims<kElement, kOverlap, sm90::logit_mods(kCapped, kAlibi)>(
            kernel_dims, p, q, k, v, grid, stream);
      },
      args.dtype == DType::kBFloat16, pingpong, p.softcap_scale != 0.f, p.alibi_slopes != nullptr);
  check.cuda(launched, "launching the forward kernel");
  if (work.combine) {
    const sm90::ElementKind element =
        args.dtype == DType::kBFloat16 ? sm90::ElementKind::kBFloat16 : sm90::ElementKind::kFloat16;
    check.cuda(sm90::launch_combine(element, p, stream), "launching the split-key combine kernel");
  }
  if (packed) {
    sm90::PackedRowsParams rows{};
    rows.shape = p;
    rows.write_outside = args.write_rows_outside_sequences;
    rows.num_axes = 1;
    const sm90::RowsTensor lse{p.lse, sizeof(float), p.lse_stride_h * int64_t{sizeof(float)},
                               sizeof(float), sm90::kNegInfWord};
    rows.axes[0] = {false, args.heads_q, 2, {host::rows_tensor(args.out, p.head_dim_v), lse}};
    check.cuda(sm90::launch_packed_rows(rows, stream), "launching the packed rows kernel");
  }
}

}  // namespace cm::cuda
