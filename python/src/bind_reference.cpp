// Bindings of the CPU reference attention (include/compilemask/reference.h) on float32 numpy
// arrays in [batch, heads, rows, head_dim] order. Outputs are new arrays.
#include <compilemask/compilemask.h>
#include <compilemask/reference.h>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

#include <string>

#include "numpy_out.h"

#include "bindings.h"

namespace nb = nanobind;

namespace cm::python {
namespace {

using Input = nb::ndarray<const float, nb::ndim<4>, nb::c_contig, nb::device::cpu>;
using RowInput = nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using HeadInput = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using PerHead = std::optional<HeadInput>;  // one value per query head, or none
using Output = nb::ndarray<nb::numpy, float>;

int32_t dim(const Input& a, size_t axis) {
  return static_cast<int32_t>(a.shape(axis));
}

size_t sz(int32_t v) {
  return static_cast<size_t>(v);
}

// Reads the shape from q [B, Hq, Nq, D], k [B, Hkv, Nk, D] and v [B, Hkv, Nk, Dv]; the C++
// reference checks it against the descriptor. out/dout must be [B, Hq, Nq, Dv].
AttentionShape shape_of(const Input& q, const Input& k, const Input& v) {
  for (size_t axis = 0; axis < 3; ++axis) {
    if (v.shape(axis) != k.shape(axis))
      throw Error("v must have the shape of k but for its head dim");
  }
  if (q.shape(0) != k.shape(0)) throw Error("q and k must have the same batch size");
  if (q.shape(3) != k.shape(3)) throw Error("q and k must have the same head dim");
  return {dim(q, 0), dim(q, 1), dim(k, 1), dim(q, 2), dim(k, 2), dim(q, 3), dim(v, 3)};
}

// out and dout: [B, Hq, Nq, Dv].
void require_output_shape(const Input& a, const AttentionShape& s, const char* name) {
  if (dim(a, 0) != s.batch || dim(a, 1) != s.heads_q || dim(a, 2) != s.nq ||
      dim(a, 3) != s.head_dim_v) {
    throw Error(std::string(name) + " must have the shape of q with v's head dim");
  }
}

// x (the argument `name`, one `what` per query head of q), if given, has q's head count; its
// data or null.
const float* per_head(const PerHead& x, const Input& q, const char* name, const char* what) {
  if (!x) return nullptr;
  if (x->shape(0) != q.shape(1)) {
    throw Error(std::string(name) + " must hold one " + what + " per query head: shape [" +
                std::to_string(q.shape(1)) + "], got [" + std::to_string(x->shape(0)) + "]");
  }
  return x->data();
}

ReferenceOptions options(const Input& q, float scale, float softcap, const PerHead& sinks,
                         const PerHead& alibi_slopes, bool float64) {
  ReferenceOptions o;
  o.scale = scale;
  o.softcap = softcap;
  o.sinks = per_head(sinks, q, "sinks", "logit");
  o.alibi_slopes = per_head(alibi_slopes, q, "alibi_slopes", "slope");
  o.accumulate = float64 ? Accumulate::kFloat64 : Accumulate::kFloat32;
  return o;
}

std::tuple<Output, Output> forward(const Plan& plan, const Input& q, const Input& k, const Input& v,
                                   float scale, float softcap, const PerHead& sinks,
                                   const PerHead& alibi_slopes, bool float64) {
  const AttentionShape s = shape_of(q, k, v);
  const ReferenceOptions o = options(q, scale, softcap, sinks, alibi_slopes, float64);
  std::vector<float> out(sz(s.batch) * sz(s.heads_q) * sz(s.nq) * sz(s.head_dim_v)),
      lse(sz(s.batch) * sz(s.heads_q) * sz(s.nq));
  {
    nb::gil_scoped_release unlocked;
    reference_forward(plan.blob(), s, q.data(), k.data(), v.data(), out.data(), lse.data(), o);
  }
  return {to_numpy(std::move(out), {sz(s.batch), sz(s.heads_q), sz(s.nq), sz(s.head_dim_v)}),
          to_numpy(std::move(lse), {sz(s.batch), sz(s.heads_q), sz(s.nq)})};
}

// A per-row array [batch, heads, nq] of q.
void require_rows_of(const RowInput& a, const Input& q, const char* name) {
  if (a.shape(0) != q.shape(0) || a.shape(1) != q.shape(1) || a.shape(2) != q.shape(2)) {
    throw Error(std::string(name) + " must have the shape [batch, heads, nq] of q");
  }
}

// dq, dk, dv, and with sinks the sinks' gradient [heads_q] (else None).
std::tuple<Output, Output, Output, std::optional<Output>> backward(
    const Plan& plan, const Input& q, const Input& k, const Input& v, const Input& out,
    const Input& dout, const RowInput& lse, const std::optional<RowInput>& dlse, float scale,
    float softcap, const PerHead& sinks, const PerHead& alibi_slopes, bool float64) {
  const AttentionShape s = shape_of(q, k, v);
  require_output_shape(out, s, "out");
  require_output_shape(dout, s, "dout");
  require_rows_of(lse, q, "lse");
  if (dlse) require_rows_of(*dlse, q, "the LSE's gradient");
  const ReferenceOptions o = options(q, scale, softcap, sinks, alibi_slopes, float64);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), dsinks(sinks ? q.shape(1) : 0);
  {
    nb::gil_scoped_release unlocked;
    reference_backward(plan.blob(), s, q.data(), k.data(), v.data(), out.data(), dout.data(),
                       lse.data(), dlse ? dlse->data() : nullptr, dq.data(), dk.data(), dv.data(),
                       sinks ? dsinks.data() : nullptr, o);
  }
  std::optional<Output> dsinks_out;
  if (sinks) dsinks_out = to_numpy(std::move(dsinks), {sz(s.heads_q)});
  return {to_numpy(std::move(dq), {sz(s.batch), sz(s.heads_q), sz(s.nq), sz(s.head_dim)}),
          to_numpy(std::move(dk), {sz(s.batch), sz(s.heads_kv), sz(s.nk), sz(s.head_dim)}),
          to_numpy(std::move(dv), {sz(s.batch), sz(s.heads_kv), sz(s.nk), sz(s.head_dim_v)}),
          std::move(dsinks_out)};
}

}  // namespace

void bind_reference(nb::module_& m) {
  m.def("reference_forward", &forward, nb::arg("plan"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
        nb::arg("scale"), nb::arg("softcap"), nb::arg("sinks").none(),
        nb::arg("alibi_slopes").none(), nb::arg("float64"));
  m.def("reference_backward", &backward, nb::arg("plan"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
        nb::arg("out"), nb::arg("dout"), nb::arg("lse"), nb::arg("dlse").none(), nb::arg("scale"),
        nb::arg("softcap"), nb::arg("sinks").none(), nb::arg("alibi_slopes").none(),
        nb::arg("float64"));
}

}  // namespace cm::python
