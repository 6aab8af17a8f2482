// reduce.cu: acc += x elementwise, summed in fp32 and rounded once to acc's dtype.
//
// Semantics: dsbench.kernels.reference.reduce_add (the local reduction of the ring collectives).
// acc and x may each be fp32, fp16 or bf16. Bytes moved: n * (2*sizeof(acc) + sizeof(x)).
//
// Vector path: N = 16 / max(sizeof(acc), sizeof(x)) elements per access (fp32 with anything: 4,
// one 16-byte load of the fp32 side; fp16/bf16 with fp16/bf16: 8, 16 bytes each side). When acc
// and x reach vector alignment after the same number `head` (< N) of elements, the head is done
// element by element and the body with vectors, ILP vectors in flight per thread; the tail after
// the last whole vector goes element by element. Otherwise everything goes element by element.
// Grid-stride loops with 64-bit indices.
#include "dsbench_kernels.h"
#include "dsbench_portability.h"

namespace {

constexpr int kThreads = 256;
constexpr int kIlp = 4;

template <typename A, typename X>
struct VecWidth {
    static constexpr int bytes = sizeof(A) > sizeof(X) ? sizeof(A) : sizeof(X);
    static constexpr int n = 16 / bytes;
};

template <typename A, typename X>
DSB_DEVICE void add_one(A* acc, const X* x, int64_t i) {
    acc[i] = dsb::from_float<A>(dsb::to_float(acc[i]) + dsb::to_float(x[i]));
}

template <typename A, typename X>
__global__ void __launch_bounds__(kThreads)
    reduce_add_vec_kernel(A* __restrict__ acc, const X* __restrict__ x, int64_t n, int64_t head) {
    constexpr int N = VecWidth<A, X>::n;
    using VA = dsb::Vec<A, N>;
    using VX = dsb::Vec<X, N>;
    const int64_t tid = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
    if (tid < head) add_one(acc, x, tid);

    A* __restrict__ acc_body = acc + head;
    const X* __restrict__ x_body = x + head;
    const int64_t n_vec = (n - head) / N;
    VA* __restrict__ va = reinterpret_cast<VA*>(acc_body);
    const VX* __restrict__ vx = reinterpret_cast<const VX*>(x_body);
    for (int64_t base = blockIdx.x * static_cast<int64_t>(kThreads) * kIlp + threadIdx.x;
         base < n_vec; base += stride * kIlp) {
        VA a[kIlp];
        VX b[kIlp];
#pragma unroll
        for (int u = 0; u < kIlp; ++u) {
            const int64_t j = base + static_cast<int64_t>(u) * kThreads;
            if (j < n_vec) {
                a[u] = va[j];
                b[u] = vx[j];
            }
        }
#pragma unroll
        for (int u = 0; u < kIlp; ++u) {
            const int64_t j = base + static_cast<int64_t>(u) * kThreads;
            if (j < n_vec) {
#pragma unroll
                for (int e = 0; e < N; ++e)
                    a[u].v[e] = dsb::from_float<A>(dsb::to_float(a[u].v[e]) +
                                                   dsb::to_float(b[u].v[e]));
                va[j] = a[u];
            }
        }
    }
    for (int64_t i = head + n_vec * N + tid; i < n; i += stride) add_one(acc, x, i);
}

template <typename A, typename X>
__global__ void __launch_bounds__(kThreads)
    reduce_add_scalar_kernel(A* __restrict__ acc, const X* __restrict__ x, int64_t n) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
         i += stride)
        add_one(acc, x, i);
}

unsigned grid_for(int64_t work_items) {
    const int64_t max_blocks = int64_t(1) << 16;  // grid-stride loops cover the rest
    int64_t blocks = (work_items + kThreads - 1) / kThreads;
    if (blocks < 1) blocks = 1;
    return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

template <typename A, typename X>
const char* launch(void* acc_, const void* x_, int64_t n, dsbStream_t stream) {
    A* acc = static_cast<A*>(acc_);
    const X* x = static_cast<const X*>(x_);
    if (n <= 0) return nullptr;
    constexpr int N = VecWidth<A, X>::n;
    // The fewest leading elements after which both acc and x are aligned for N-element vectors
    // (-1: no such offset, e.g. acc and x misaligned differently).
    int64_t head = -1;
    for (int h = 0; h < N && head < 0; ++h)
        if (dsb::is_aligned(acc + h, sizeof(A) * N) && dsb::is_aligned(x + h, sizeof(X) * N)) head = h;
    if (head >= 0 && n - head >= N) {
        const unsigned blocks = grid_for(((n - head) / N + kIlp - 1) / kIlp);
        reduce_add_vec_kernel<A, X><<<blocks, kThreads, 0, stream>>>(acc, x, n, head);
    } else {
        reduce_add_scalar_kernel<A, X><<<grid_for(n), kThreads, 0, stream>>>(acc, x, n);
    }
    DSB_LAUNCH_CHECK();
    return nullptr;
}

template <typename A>
const char* dispatch_x(void* acc, const void* x, int x_dtype, int64_t n, dsbStream_t stream) {
    switch (x_dtype) {
        case DSB_DTYPE_FLOAT32:
            return launch<A, float>(acc, x, n, stream);
        case DSB_DTYPE_FLOAT16:
            return launch<A, dsb::half>(acc, x, n, stream);
        case DSB_DTYPE_BFLOAT16:
            return launch<A, dsb::bf16>(acc, x, n, stream);
        default:
            return "dsb_reduce_add_launch: x dtype must be float32, float16 or bfloat16";
    }
}

}  // namespace

extern "C" const char* dsb_reduce_add_launch(void* acc, int acc_dtype, const void* x,
                                             int x_dtype, int64_t n, void* stream) {
    dsbStream_t s = static_cast<dsbStream_t>(stream);
    switch (acc_dtype) {
        case DSB_DTYPE_FLOAT32:
            return dispatch_x<float>(acc, x, x_dtype, n, s);
        case DSB_DTYPE_FLOAT16:
            return dispatch_x<dsb::half>(acc, x, x_dtype, n, s);
        case DSB_DTYPE_BFLOAT16:
            return dispatch_x<dsb::bf16>(acc, x, x_dtype, n, s);
        default:
            return "dsb_reduce_add_launch: acc dtype must be float32, float16 or bfloat16";
    }
}
