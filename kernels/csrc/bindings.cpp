// bindings.cpp: the torch side of dsbench's CUDA/HIP kernels (the only file with torch headers).
//
// Validates tensors (device, dtype, contiguity, shapes), with errors that name the kernel and the
// constraint, then calls the plain-C launchers of dsbench_kernels.h on the current stream. The
// Python wrappers with the reference signatures live in dsbench/kernels/cuda/ops.py. On ROCm
// builds of torch this file is hipified like the .cu sources (CUDA stream and guard names map to
// their HIP "masquerading" equivalents).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dsbench_kernels.h"

namespace {

int dtype_code(at::ScalarType t) {
    switch (t) {
        case at::kFloat:
            return DSB_DTYPE_FLOAT32;
        case at::kHalf:
            return DSB_DTYPE_FLOAT16;
        case at::kBFloat16:
            return DSB_DTYPE_BFLOAT16;
        default:
            return -1;
    }
}

std::string where(const char* name, size_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; }

void check_on(const at::Tensor& t, const char* kernel, const std::string& what,
              const at::Device& device) {
    TORCH_CHECK(t.is_cuda(), "dsbench cuda ", kernel, ": ", what,
                " must be a CUDA/ROCm tensor (got device ", t.device(), ")");
    TORCH_CHECK(t.device() == device, "dsbench cuda ", kernel, ": ", what, " is on ", t.device(),
                " but the other tensors are on ", device);
}

void check_scalar_f32(const at::Tensor& t, const char* kernel, const char* what,
                      const at::Device& device) {
    check_on(t, kernel, what, device);
    TORCH_CHECK(t.scalar_type() == at::kFloat && t.numel() == 1, "dsbench cuda ", kernel, ": ",
                what, " must be a float32 tensor with one element (got ", t.scalar_type(), ", ",
                t.numel(), " elements)");
}

void* current_stream(const at::Device& device) {
    return static_cast<void*>(c10::cuda::getCurrentCUDAStream(device.index()).stream());
}

void check_launch(const char* kernel, const char* err) {
    TORCH_CHECK(err == nullptr, "dsbench cuda ", kernel, ": ", err ? err : "");
}

// ---------------------------------------------------------------------------------------------
// adamw

// Validates one list of tensors for dsb_adamw_launch and builds its device table.
// Returns (table, total_chunks, grad dtype code); the table holds raw pointers, so it is valid
// for as long as these tensors keep their storage (ops.py caches it keyed by those pointers).
std::tuple<at::Tensor, int64_t, int64_t> adamw_table(const std::vector<at::Tensor>& params,
                                                     const std::vector<at::Tensor>& grads,
                                                     const std::vector<at::Tensor>& exp_avgs,
                                                     const std::vector<at::Tensor>& exp_avg_sqs,
                                                     const std::vector<at::Tensor>& steps) {
    const size_t n = params.size();
    TORCH_CHECK(n > 0, "dsbench cuda adamw: params is empty");
    TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n &&
                    steps.size() == n,
                "dsbench cuda adamw: params, grads, exp_avgs, exp_avg_sqs and steps must have the "
                "same length (got ",
                n, ", ", grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size(), ", ",
                steps.size(), ")");
    const at::Device device = params[0].device();
    const at::ScalarType gtype = grads[0].scalar_type();
    const int gcode = dtype_code(gtype);
    TORCH_CHECK(gcode >= 0, "dsbench cuda adamw: grads must be float32, float16 or bfloat16 (got ",
                gtype, ")");
    const size_t gsize = gtype == at::kFloat ? 4 : 2;

    at::Tensor host = at::empty({static_cast<int64_t>(n * sizeof(DsbAdamwEntry))},
                                at::TensorOptions().dtype(at::kByte));
    auto* table = reinterpret_cast<DsbAdamwEntry*>(host.data_ptr<uint8_t>());
    int64_t chunks = 0;
    for (size_t i = 0; i < n; ++i) {
        const at::Tensor& p = params[i];
        const at::Tensor& g = grads[i];
        const at::Tensor& m = exp_avgs[i];
        const at::Tensor& v = exp_avg_sqs[i];
        const at::Tensor& s = steps[i];
        check_on(p, "adamw", where("params", i), device);
        check_on(g, "adamw", where("grads", i), device);
        check_on(m, "adamw", where("exp_avgs", i), device);
        check_on(v, "adamw", where("exp_avg_sqs", i), device);
        check_scalar_f32(s, "adamw", where("steps", i).c_str(), device);
        TORCH_CHECK(p.scalar_type() == at::kFloat && m.scalar_type() == at::kFloat &&
                        v.scalar_type() == at::kFloat,
                    "dsbench cuda adamw: params, exp_avgs and exp_avg_sqs must be float32 (entry ",
                    i, ": ", p.scalar_type(), ", ", m.scalar_type(), ", ", v.scalar_type(), ")");
        TORCH_CHECK(g.scalar_type() == gtype, "dsbench cuda adamw: all grads must have one dtype (",
                    where("grads", i), " is ", g.scalar_type(), ", grads[0] is ", gtype, ")");
        TORCH_CHECK(g.numel() == p.numel() && m.numel() == p.numel() && v.numel() == p.numel(),
                    "dsbench cuda adamw: entry ", i,
                    ": param, grad, exp_avg and exp_avg_sq must have the same number of elements "
                    "(got ",
                    p.numel(), ", ", g.numel(), ", ", m.numel(), ", ", v.numel(), ")");
        TORCH_CHECK(p.is_contiguous() && g.is_contiguous() && m.is_contiguous() &&
                        v.is_contiguous(),
                    "dsbench cuda adamw: entry ", i,
                    ": param, grad, exp_avg and exp_avg_sq must be contiguous (they are updated "
                    "in place as flat arrays)");
        DsbAdamwEntry& e = table[i];
        e.param = p.data_ptr<float>();
        e.grad = g.data_ptr();
        e.exp_avg = m.data_ptr<float>();
        e.exp_avg_sq = v.data_ptr<float>();
        e.step = s.data_ptr<float>();
        e.numel = p.numel();
        e.head = dsb_adamw_head(e.param, e.grad, e.exp_avg, e.exp_avg_sq, gsize, e.numel);
        e.chunk_begin = chunks;
        e.reserved = 0;
        chunks += dsb_adamw_chunks(e.numel, e.head);
    }
    return std::make_tuple(host.to(device), chunks, static_cast<int64_t>(gcode));
}

void adamw_step(const at::Tensor& table, int64_t n_tensors, int64_t total_chunks,
                int64_t grad_dtype, double lr, double beta1, double beta2, double eps,
                double weight_decay, bool adamw_mode, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
    const at::Device device = table.device();
    TORCH_CHECK(table.is_cuda() && table.scalar_type() == at::kByte &&
                    table.numel() == n_tensors * static_cast<int64_t>(sizeof(DsbAdamwEntry)),
                "dsbench cuda adamw: the table must come from adamw_table for these tensors");
    TORCH_CHECK(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0,
                "dsbench cuda adamw: beta1 and beta2 must be in [0, 1) (got ", beta1, ", ", beta2,
                ")");
    const c10::cuda::CUDAGuard guard(device);
    const float* scale = nullptr;
    float* inf = nullptr;
    at::Tensor scratch;
    if (grad_scale.has_value()) {
        check_scalar_f32(*grad_scale, "adamw", "grad_scale", device);
        scale = grad_scale->data_ptr<float>();
        if (found_inf.has_value()) {
            check_scalar_f32(*found_inf, "adamw", "found_inf", device);
            inf = found_inf->data_ptr<float>();
        } else {
            scratch = at::empty({1}, table.options().dtype(at::kFloat));
            inf = scratch.data_ptr<float>();
        }
    }
    check_launch("adamw", dsb_adamw_launch(reinterpret_cast<const DsbAdamwEntry*>(table.data_ptr()),
                                           n_tensors, total_chunks, static_cast<int>(grad_dtype),
                                           lr, beta1, beta2, eps, weight_decay, adamw_mode ? 1 : 0,
                                           scale, inf, current_stream(device)));
}

// ---------------------------------------------------------------------------------------------
// gemm

// Row-major (stride(1) == 1) or column-major (stride(0) == 1) with any leading dimension is
// used in place; anything else is copied to row-major first.
at::Tensor as_matrix(const at::Tensor& t, bool& row, int64_t& ld) {
    if (t.stride(1) == 1) {
        row = true;
        ld = t.stride(0);
        return t;
    }
    if (t.stride(0) == 1) {
        row = false;
        ld = t.stride(1);
        return t;
    }
    at::Tensor c = t.contiguous();
    row = true;
    ld = c.size(1);
    return c;
}

void check_gemm(const at::Tensor& a, const at::Tensor& b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "dsbench cuda gemm: a and b must be 2-D (got ",
                a.dim(), "-D and ", b.dim(), "-D)");
    TORCH_CHECK(a.scalar_type() == b.scalar_type(),
                "dsbench cuda gemm: a and b must have one dtype (got ", a.scalar_type(), " and ",
                b.scalar_type(), ")");
    TORCH_CHECK(dtype_code(a.scalar_type()) >= 0,
                "dsbench cuda gemm: dtype must be float16, bfloat16 or float32 (got ",
                a.scalar_type(), ")");
    TORCH_CHECK(a.size(1) == b.size(0), "dsbench cuda gemm: a is ", a.size(0), "x", a.size(1),
                " and b is ", b.size(0), "x", b.size(1), ": a's columns must equal b's rows");
    check_on(a, "gemm", "a", a.device());
    check_on(b, "gemm", "b", a.device());
}

at::Tensor gemm(const at::Tensor& a_in, const at::Tensor& b_in, bool force_tiled) {
    check_gemm(a_in, b_in);
    const int64_t m = a_in.size(0), k = a_in.size(1), n = b_in.size(1);
    const c10::cuda::CUDAGuard guard(a_in.device());
    if (m == 0 || n == 0 || k == 0) return at::zeros({m, n}, a_in.options());
    bool a_row = true, b_row = true;
    int64_t lda = 0, ldb = 0;
    const at::Tensor a = as_matrix(a_in, a_row, lda);
    const at::Tensor b = as_matrix(b_in, b_row, ldb);
    at::Tensor c = at::empty({m, n}, a.options());
    check_launch("gemm", dsb_gemm_launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, lda,
                                         a_row, ldb, b_row, n, dtype_code(a.scalar_type()),
                                         force_tiled ? DSB_GEMM_PATH_TILED : DSB_GEMM_PATH_AUTO,
                                         current_stream(a.device())));
    return c;
}

// Which kernel gemm() runs for tensors like `a` on a's device: "wmma", "mfma" or "tiled".
std::string gemm_path(const at::Tensor& a, bool force_tiled) {
    const int code = dtype_code(a.scalar_type());
    TORCH_CHECK(code >= 0, "dsbench cuda gemm: dtype must be float16, bfloat16 or float32 (got ",
                a.scalar_type(), ")");
    TORCH_CHECK(a.is_cuda(), "dsbench cuda gemm: a must be a CUDA/ROCm tensor");
    const c10::cuda::CUDAGuard guard(a.device());
    return dsb_gemm_path_name(code, force_tiled ? DSB_GEMM_PATH_TILED : DSB_GEMM_PATH_AUTO);
}

// ---------------------------------------------------------------------------------------------
// reduce_add

at::Tensor reduce_add(at::Tensor acc, const at::Tensor& x_in) {
    const at::Device device = acc.device();
    check_on(acc, "reduce_add", "acc", device);
    check_on(x_in, "reduce_add", "x", device);
    TORCH_CHECK(dtype_code(acc.scalar_type()) >= 0 && dtype_code(x_in.scalar_type()) >= 0,
                "dsbench cuda reduce_add: acc and x must be float32, float16 or bfloat16 (got ",
                acc.scalar_type(), " and ", x_in.scalar_type(), ")");
    TORCH_CHECK(acc.numel() == x_in.numel(), "dsbench cuda reduce_add: acc has ", acc.numel(),
                " elements and x has ", x_in.numel(), "; they must match");
    TORCH_CHECK(acc.is_contiguous(),
                "dsbench cuda reduce_add: acc must be contiguous (it is updated in place)");
    const at::Tensor x = x_in.contiguous();
    const c10::cuda::CUDAGuard guard(device);
    check_launch("reduce_add",
                 dsb_reduce_add_launch(acc.data_ptr(), dtype_code(acc.scalar_type()), x.data_ptr(),
                                       dtype_code(x.scalar_type()), acc.numel(),
                                       current_stream(device)));
    return acc;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "dsbench CUDA/HIP kernels (see dsbench.kernels.cuda.ops for the Python API)";
    m.def("adamw_table", &adamw_table, "validate AdamW tensor lists and build the device table");
    m.def("adamw_step", &adamw_step, "one fused Adam/AdamW step over a table", py::arg("table"),
          py::arg("n_tensors"), py::arg("total_chunks"), py::arg("grad_dtype"), py::arg("lr"),
          py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"),
          py::arg("adamw_mode"), py::arg("grad_scale") = py::none(),
          py::arg("found_inf") = py::none());
    m.def("gemm", &gemm, "C = A @ B, fp32 accumulation", py::arg("a"), py::arg("b"),
          py::arg("force_tiled") = false);
    m.def("gemm_path", &gemm_path, "which GEMM kernel runs for a's dtype on a's device",
          py::arg("a"), py::arg("force_tiled") = false);
    m.def("reduce_add", &reduce_add, "acc += x in fp32, in place", py::arg("acc"), py::arg("x"));
    m.attr("adamw_chunk") = py::int_(DSB_ADAMW_CHUNK);
}
