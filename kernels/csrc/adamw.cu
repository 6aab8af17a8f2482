// adamw.cu: fused multi-tensor Adam / AdamW step (fp32 params and moments; fp32/fp16/bf16 grads).
//
// Semantics: dsbench.kernels.reference.adamw (Loshchilov & Hutter, "Decoupled Weight Decay
// Regularization", 2019; Kingma & Ba, "Adam", 2015). With t = step + 1:
//   g' = g / grad_scale                         (optional; any non-finite g' skips everything)
//   AdamW: p *= 1 - lr*wd        Adam (L2): g' += wd*p
//   m = lerp(m, g', 1 - b1);     v = b2*v + (1 - b2)*g'^2
//   p -= lr/(1 - b1^t) * m / (sqrt(v)/sqrt(1 - b2^t) + eps);   step = t
// The arithmetic follows torch's foreach/fused AdamW so results agree to rounding.
//
// Memory traffic per parameter (fp32 grads): read p, g, m, v (16 B) + write p, m, v (12 B) =
// 28 B; the grad-scaler check reads g once more (+4 B). Grads are not written back.
//
// Layout of the work: a device table (DsbAdamwEntry) lists every tensor; each tensor is cut
// into chunks of DSB_ADAMW_CHUNK elements, and block b handles chunks b, b + grid, ... found by
// binary search on chunk_begin, so a list of many small tensors is a single launch. A chunk is
// 256 threads x 4 vectors x 4 fp32 = 4096 elements: each thread issues its 4 vector loads of
// p, m, v and g before computing (16 elements per thread). Tensors whose pointers share a
// 16-byte alignment after `head` scalar elements use 16-byte loads; the rest go element by
// element. All indices are 64-bit, so tensors over 2^31 elements work.
#include <math.h>

#include "dsbench_kernels.h"
#include "dsbench_portability.h"

namespace {

constexpr int kThreads = DSB_ADAMW_THREADS;
constexpr int kVec = DSB_ADAMW_VEC;
constexpr int kIlp = DSB_ADAMW_ILP;
constexpr int64_t kChunk = DSB_ADAMW_CHUNK;
static_assert(kVec == 4, "the vector path moves float4s");

struct Hyper {
    float lr;
    float log_beta1, log_beta2;  // log(beta) rounded from double: 1 - b^t = -expm1(t*log b)
    float decay;                 // 1 - lr*wd (AdamW) or 1 (Adam)
    float l2;                 // wd (Adam, L2 mode) or 0
    float lerp_w;             // 1 - beta1
    float beta2_f, one_minus_beta2, eps;
};

struct Coef {
    float step_size;  // lr / (1 - b1^t)
    float bc2_sqrt;   // sqrt(1 - b2^t)
};

// Bias corrections for the new step t. -expm1f(t*log b) keeps 1 - b^t accurate to ~2 ulp even for
// b2 = 0.999 at t = 1 (1 - powf(b, t) in float would lose 4 digits to cancellation), and needs no
// double arithmetic (slow on many GPUs, and register-hungry on AMD).
DSB_DEVICE Coef coefficients(const Hyper& h, const float* step) {
    const float t = *step + 1.0f;
    Coef c;
    c.step_size = h.lr / -expm1f(t * h.log_beta1);
    c.bc2_sqrt = sqrtf(-expm1f(t * h.log_beta2));
    return c;
}

DSB_DEVICE bool finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

DSB_DEVICE void adam_math(float& p, float g, float& m, float& v, const Hyper& h, const Coef& c) {
    p = p * h.decay;                     // exact no-op for Adam (decay = 1)
    if (h.l2 != 0.0f) g = g + h.l2 * p;  // skipped, not multiplied by 0, when wd = 0 (inf * 0)
    // torch.lerp: self + w*(end - self) for w < 0.5, end - (end - self)*(1 - w) otherwise
    m = h.lerp_w < 0.5f ? m + h.lerp_w * (g - m) : g - (g - m) * (1.0f - h.lerp_w);
    v = v * h.beta2_f + h.one_minus_beta2 * (g * g);
    const float denom = sqrtf(v) / c.bc2_sqrt + h.eps;
    p = p + (-c.step_size) * (m / denom);
}

// The tensor holding chunk `chunk`: the last entry whose chunk_begin <= chunk (entries of
// empty tensors own no chunk and are skipped by this rule).
DSB_DEVICE int64_t find_tensor(const DsbAdamwEntry* __restrict__ table, int64_t n, int64_t chunk) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (table[mid].chunk_begin <= chunk)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// [start, end) of chunk `local` of tensor e (the vector body starts after `head` elements).
DSB_DEVICE void chunk_range(const DsbAdamwEntry& e, int64_t local, int64_t& start, int64_t& end) {
    const int64_t head = e.head > 0 ? e.head : 0;
    start = head + local * kChunk;
    end = start + kChunk < e.numel ? start + kChunk : e.numel;
}

template <typename G>
DSB_DEVICE float load_grad(const G* g, int64_t i, float inv_scale) {
    return dsb::to_float(g[i]) * inv_scale;
}

template <typename G>
__global__ void __launch_bounds__(kThreads)
    adamw_update_kernel(const DsbAdamwEntry* __restrict__ table, int64_t n_tensors,
                        int64_t total_chunks, Hyper h, const float* __restrict__ grad_scale,
                        const float* __restrict__ found_inf) {
    if (found_inf != nullptr && *found_inf != 0.0f) return;  // the loss scaler skips this step
    const float inv_scale = grad_scale != nullptr ? 1.0f / *grad_scale : 1.0f;
    for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
        const DsbAdamwEntry e = table[find_tensor(table, n_tensors, chunk)];
        const Coef c = coefficients(h, e.step);
        const int64_t local = chunk - e.chunk_begin;
        int64_t start, end;
        chunk_range(e, local, start, end);
        const G* __restrict__ grad = static_cast<const G*>(e.grad);

        if (local == 0 && static_cast<int>(threadIdx.x) < e.head) {  // unaligned head, < 4 elems
            const int64_t i = threadIdx.x;
            float p = e.param[i], m = e.exp_avg[i], v = e.exp_avg_sq[i];
            adam_math(p, load_grad(grad, i, inv_scale), m, v, h, c);
            e.param[i] = p;
            e.exp_avg[i] = m;
            e.exp_avg_sq[i] = v;
        }

        if (e.head >= 0 && end - start == kChunk) {
            // Full aligned chunk: all 4 vectors of p, m, v, g in flight before any math.
            float4 p[kIlp], m[kIlp], v[kIlp];
            dsb::Vec<G, kVec> g[kIlp];
#pragma unroll
            for (int u = 0; u < kIlp; ++u) {
                const int64_t i = start + static_cast<int64_t>(u * kThreads + threadIdx.x) * kVec;
                p[u] = *reinterpret_cast<const float4*>(e.param + i);
                m[u] = *reinterpret_cast<const float4*>(e.exp_avg + i);
                v[u] = *reinterpret_cast<const float4*>(e.exp_avg_sq + i);
                g[u] = *reinterpret_cast<const dsb::Vec<G, kVec>*>(grad + i);
            }
#pragma unroll
            for (int u = 0; u < kIlp; ++u) {
                adam_math(p[u].x, dsb::to_float(g[u].v[0]) * inv_scale, m[u].x, v[u].x, h, c);
                adam_math(p[u].y, dsb::to_float(g[u].v[1]) * inv_scale, m[u].y, v[u].y, h, c);
                adam_math(p[u].z, dsb::to_float(g[u].v[2]) * inv_scale, m[u].z, v[u].z, h, c);
                adam_math(p[u].w, dsb::to_float(g[u].v[3]) * inv_scale, m[u].w, v[u].w, h, c);
            }
#pragma unroll
            for (int u = 0; u < kIlp; ++u) {
                const int64_t i = start + static_cast<int64_t>(u * kThreads + threadIdx.x) * kVec;
                *reinterpret_cast<float4*>(e.param + i) = p[u];
                *reinterpret_cast<float4*>(e.exp_avg + i) = m[u];
                *reinterpret_cast<float4*>(e.exp_avg_sq + i) = v[u];
            }
        } else {
            // Unaligned tensor or the last, partial chunk: element by element, coalesced.
            for (int64_t i = start + threadIdx.x; i < end; i += kThreads) {
                float p = e.param[i], m = e.exp_avg[i], v = e.exp_avg_sq[i];
                adam_math(p, load_grad(grad, i, inv_scale), m, v, h, c);
                e.param[i] = p;
                e.exp_avg[i] = m;
                e.exp_avg_sq[i] = v;
            }
        }
    }
}

// found_inf = 1 if any grad / grad_scale is inf or NaN (found_inf was zeroed before).
template <typename G>
__global__ void __launch_bounds__(kThreads)
    adamw_check_kernel(const DsbAdamwEntry* __restrict__ table, int64_t n_tensors,
                       int64_t total_chunks, const float* __restrict__ grad_scale,
                       float* __restrict__ found_inf) {
    const float inv_scale = 1.0f / *grad_scale;
    bool bad = false;
    for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
        const DsbAdamwEntry e = table[find_tensor(table, n_tensors, chunk)];
        const int64_t local = chunk - e.chunk_begin;
        int64_t start, end;
        chunk_range(e, local, start, end);
        const G* __restrict__ grad = static_cast<const G*>(e.grad);
        if (local == 0 && static_cast<int>(threadIdx.x) < e.head)
            bad |= !finite(load_grad(grad, threadIdx.x, inv_scale));
        if (e.head >= 0 && end - start == kChunk) {
#pragma unroll
            for (int u = 0; u < kIlp; ++u) {
                const int64_t i = start + static_cast<int64_t>(u * kThreads + threadIdx.x) * kVec;
                const dsb::Vec<G, kVec> g = *reinterpret_cast<const dsb::Vec<G, kVec>*>(grad + i);
#pragma unroll
                for (int j = 0; j < kVec; ++j) bad |= !finite(dsb::to_float(g.v[j]) * inv_scale);
            }
        } else {
            for (int64_t i = start + threadIdx.x; i < end; i += kThreads)
                bad |= !finite(load_grad(grad, i, inv_scale));
        }
    }
    // One store per warp/wavefront that saw a non-finite value (all lanes reach this point).
    if (dsb::warp_any(bad) && dsb::lane_id() == 0) *found_inf = 1.0f;
}

__global__ void adamw_steps_kernel(const DsbAdamwEntry* __restrict__ table, int64_t n_tensors,
                                   const float* __restrict__ found_inf) {
    if (found_inf != nullptr && *found_inf != 0.0f) return;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_tensors;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        atomicAdd(table[i].step, 1.0f);  // atomic: one step tensor may serve several params
}

template <typename G>
const char* launch(const DsbAdamwEntry* table, int64_t n_tensors, int64_t total_chunks,
                   const Hyper& h, const float* grad_scale, float* found_inf,
                   dsbStream_t stream) {
    const int64_t max_blocks = int64_t(1) << 20;  // each block loops over the remaining chunks
    const unsigned blocks =
        static_cast<unsigned>(total_chunks < max_blocks ? total_chunks : max_blocks);
    const float* inf_in = grad_scale != nullptr ? found_inf : nullptr;
    // (each launch stays on one line: torch's hipify rewrites launches line by line)
    if (grad_scale != nullptr) {
        DSB_RETURN_IF_ERROR(dsbMemsetAsync(found_inf, 0, sizeof(float), stream));
        if (blocks > 0) {
            adamw_check_kernel<G><<<blocks, kThreads, 0, stream>>>(table, n_tensors, total_chunks, grad_scale, found_inf);
            DSB_LAUNCH_CHECK();
        }
    }
    if (blocks > 0) {
        adamw_update_kernel<G><<<blocks, kThreads, 0, stream>>>(table, n_tensors, total_chunks, h, grad_scale, inf_in);
        DSB_LAUNCH_CHECK();
    }
    const int64_t step_blocks = (n_tensors + 255) / 256;
    const unsigned sblocks = static_cast<unsigned>(step_blocks < 1024 ? step_blocks : 1024);
    adamw_steps_kernel<<<sblocks, 256, 0, stream>>>(table, n_tensors, inf_in);
    DSB_LAUNCH_CHECK();
    return nullptr;
}

}  // namespace

extern "C" const char* dsb_adamw_launch(const DsbAdamwEntry* table, int64_t n_tensors,
                                        int64_t total_chunks, int grad_dtype, double lr,
                                        double beta1, double beta2, double eps,
                                        double weight_decay, int adamw_mode,
                                        const float* grad_scale, float* found_inf,
                                        void* stream) {
    if (n_tensors <= 0) return nullptr;
    if (grad_scale != nullptr && found_inf == nullptr)
        return "dsb_adamw_launch: grad_scale needs a found_inf buffer";
    Hyper h;
    if (!(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0))
        return "dsb_adamw_launch: beta1 and beta2 must be in [0, 1)";
    h.lr = static_cast<float>(lr);
    h.log_beta1 = static_cast<float>(log(beta1));  // -inf for beta = 0: 1 - 0^t = 1
    h.log_beta2 = static_cast<float>(log(beta2));
    // As torch computes them: Python-double scalars rounded once to float.
    h.decay = adamw_mode ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
    h.l2 = adamw_mode ? 0.0f : static_cast<float>(weight_decay);
    h.lerp_w = static_cast<float>(1.0 - beta1);
    h.beta2_f = static_cast<float>(beta2);
    h.one_minus_beta2 = static_cast<float>(1.0 - beta2);
    h.eps = static_cast<float>(eps);
    dsbStream_t s = static_cast<dsbStream_t>(stream);
    switch (grad_dtype) {
        case DSB_DTYPE_FLOAT32:
            return launch<float>(table, n_tensors, total_chunks, h, grad_scale, found_inf, s);
        case DSB_DTYPE_FLOAT16:
            return launch<dsb::half>(table, n_tensors, total_chunks, h, grad_scale, found_inf, s);
        case DSB_DTYPE_BFLOAT16:
            return launch<dsb::bf16>(table, n_tensors, total_chunks, h, grad_scale, found_inf, s);
        default:
            return "dsb_adamw_launch: grad dtype must be float32, float16 or bfloat16";
    }
}
