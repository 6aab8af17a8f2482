// gemm.cu: C = A @ B with fp32 accumulation, fp16/bf16 (matrix units) or any of fp16/bf16/fp32
// (portable path); result rounded once to the input dtype.
//
// Semantics: dsbench.kernels.reference.gemm. FLOPs: 2*M*N*K. A is [M, K] and B is [K, N], each
// either row-major or column-major with any leading dimension (lda, ldb); C is row-major.
//
// Three kernels, one chosen on the host from the device the launch runs on:
//   wmma   NVIDIA tensor cores (sm_80+; nvcuda::wmma 16x16x16 fp16/bf16 fragments): a 128x128
//          block tile, 8 warps of 64x32 (4x2 fragments), K step 32.
//   mfma   AMD matrix cores (gfx908/gfx90a/gfx94x; __builtin_amdgcn_mfma_f32_32x32x8{f16,bf16_1k},
//          wave64): a 128x128 block tile, 4 wavefronts of 64x64 (2x2 MFMA blocks), K step 32.
//   tiled  portable shared-memory SIMT kernel for everything else (fp32, other GPUs): a 64x64
//          block tile, 256 threads each computing 4x4 outputs, K step 16.
// All three stage tiles through shared memory the same way: the next K tile is loaded into
// registers (16-byte loads where the matrix allows, element loads with zero fill at the edges)
// while the current one is multiplied, then stored to shared memory in the matrix's own layout,
// so both row- and column-major operands are read from global memory contiguously. Odd M, N, K
// are bounds-checked; blocks walk the output in grouped order (8 block-rows at a time) for L2
// reuse, as in Triton's matmul tutorial.
#include <type_traits>

#include "dsbench_kernels.h"
#include "dsbench_portability.h"

#if defined(DSB_CUDA) && !defined(DSB_CPU_EMULATION)
#include <mma.h>
#endif

namespace {

// --------------------------------------------------------------------------------------------
// shared pieces

template <typename T>
struct Storage {  // fp16/bf16 tiles are staged as raw 16-bit patterns
    typedef uint16_t R;
    static DSB_DEVICE float to_f(uint16_t r) { return dsb::raw_to_float<T>(r); }
};
template <>
struct Storage<float> {
    typedef float R;
    static DSB_DEVICE float to_f(float r) { return r; }
};

DSB_DEVICE uint4 pack(const float (&e)[4]) {
    return make_uint4(__float_as_uint(e[0]), __float_as_uint(e[1]), __float_as_uint(e[2]),
                      __float_as_uint(e[3]));
}
DSB_DEVICE uint32_t pack2(uint16_t lo, uint16_t hi) {
    return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}
DSB_DEVICE uint4 pack(const uint16_t (&e)[8]) {
    return make_uint4(pack2(e[0], e[1]), pack2(e[2], e[3]), pack2(e[4], e[5]), pack2(e[6], e[7]));
}

// One ROWS x COLS tile of a matrix stored row by row (COLS contiguous, row stride ld): rows
// [r0, r0 + ROWS), cols [c0, c0 + COLS), zero outside [0, rmax) x [0, cmax). load() brings it into
// registers; store() writes it to shared memory as dst[ROWS][kLd].
template <typename R, int ROWS, int COLS, int THREADS>
struct TileLoader {
    static constexpr int kVec = 16 / sizeof(R);
    static constexpr int kVecsPerRow = COLS / kVec;
    static constexpr int kTotal = ROWS * kVecsPerRow;
    static constexpr int kPerThread = (kTotal + THREADS - 1) / THREADS;
    static_assert(COLS % kVec == 0, "tile width must be a multiple of the 16-byte vector");
    static constexpr int kLd = COLS + kVec;  // shared-memory row: +16 bytes against conflicts

    uint4 reg[kPerThread];  // raw 16-byte vectors (no unions: they would live in local memory)

    DSB_DEVICE void load(const R* __restrict__ src, int64_t ld, int64_t r0, int64_t c0,
                         int64_t rmax, int64_t cmax, bool vec_ok) {
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) {
            const int idx = static_cast<int>(threadIdx.x) + i * THREADS;
            if (kTotal % THREADS != 0 && idx >= kTotal) break;
            const int64_t gr = r0 + idx / kVecsPerRow;
            const int64_t gc = c0 + (idx % kVecsPerRow) * kVec;
            if (vec_ok && gr < rmax && gc + kVec <= cmax) {
                reg[i] = *reinterpret_cast<const uint4*>(src + gr * ld + gc);
            } else {
                R e[kVec];
#pragma unroll
                for (int j = 0; j < kVec; ++j)
                    e[j] = (gr < rmax && gc + j < cmax) ? src[gr * ld + gc + j] : R(0);
                reg[i] = pack(e);
            }
        }
    }

    DSB_DEVICE void store(R* __restrict__ dst) const {
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) {
            const int idx = static_cast<int>(threadIdx.x) + i * THREADS;
            if (kTotal % THREADS != 0 && idx >= kTotal) break;
            const int r = idx / kVecsPerRow, c = (idx % kVecsPerRow) * kVec;
            *reinterpret_cast<uint4*>(dst + r * kLd + c) = reg[i];
        }
    }
};

// The tile loaders of A and B for one block tile, in each operand's own storage layout:
// A row-major: rows m, cols k (BM x BK); column-major: rows k, cols m (BK x BM).
// B row-major: rows k, cols n (BK x BN); column-major: rows n, cols k (BN x BK).
template <typename R, int BM, int BN, int BK, int THREADS, bool A_ROW, bool B_ROW>
struct Operands {
    typedef TileLoader<R, A_ROW ? BM : BK, A_ROW ? BK : BM, THREADS> LoadA;
    typedef TileLoader<R, B_ROW ? BK : BN, B_ROW ? BN : BK, THREADS> LoadB;
    static constexpr int kLdA = LoadA::kLd;
    static constexpr int kLdB = LoadB::kLd;
    static constexpr int kSmemA = (A_ROW ? BM : BK) * kLdA;  // elements
    static constexpr int kSmemB = (B_ROW ? BK : BN) * kLdB;

    LoadA la;
    LoadB lb;
    const R* a;
    const R* b;
    int64_t lda, ldb, M, N, K, m0, n0;
    bool vec_a, vec_b;

    DSB_DEVICE void load(int64_t k0) {
        if (A_ROW)
            la.load(a, lda, m0, k0, M, K, vec_a);
        else
            la.load(a, lda, k0, m0, K, M, vec_a);
        if (B_ROW)
            lb.load(b, ldb, k0, n0, K, N, vec_b);
        else
            lb.load(b, ldb, n0, k0, N, K, vec_b);
    }
    DSB_DEVICE void store(R* as, R* bs) const {
        la.store(as);
        lb.store(bs);
    }
    // element (m, k) of the A tile and (k, n) of the B tile in shared memory
    static DSB_DEVICE int a_at(int m, int k) { return A_ROW ? m * kLdA + k : k * kLdA + m; }
    static DSB_DEVICE int b_at(int k, int n) { return B_ROW ? k * kLdB + n : n * kLdB + k; }
};

// Block `pid` -> (block row, block col), 8 block rows at a time (grouped order).
DSB_DEVICE void tile_coords(int64_t pid, int64_t grid_m, int64_t grid_n, int64_t& pm,
                            int64_t& pn) {
    const int64_t group = 8;
    const int64_t width = group * grid_n;
    const int64_t first_m = (pid / width) * group;
    const int64_t rows = grid_m - first_m < group ? grid_m - first_m : group;
    pm = first_m + (pid % width) % rows;
    pn = (pid % width) / rows;
}

struct Args {
    const void* a;
    const void* b;
    void* c;
    int64_t M, N, K, lda, ldb, ldc;
    bool vec_a, vec_b;
};

// --------------------------------------------------------------------------------------------
// portable tiled path (any GPU, any dtype)

constexpr int kTiledBM = 64, kTiledBN = 64, kTiledBK = 16, kTiledThreads = 256;

template <typename T, bool A_ROW, bool B_ROW>
__global__ void __launch_bounds__(kTiledThreads, 2) gemm_tiled_kernel(Args args) {
    typedef typename Storage<T>::R R;
    typedef Operands<R, kTiledBM, kTiledBN, kTiledBK, kTiledThreads, A_ROW, B_ROW> Ops;
    __shared__ __align__(16) R as[Ops::kSmemA];
    __shared__ __align__(16) R bs[Ops::kSmemB];

    const int64_t grid_m = (args.M + kTiledBM - 1) / kTiledBM;
    const int64_t grid_n = (args.N + kTiledBN - 1) / kTiledBN;
    int64_t pm, pn;
    tile_coords(blockIdx.x, grid_m, grid_n, pm, pn);
    Ops ops;
    ops.a = static_cast<const R*>(args.a);
    ops.b = static_cast<const R*>(args.b);
    ops.lda = args.lda;
    ops.ldb = args.ldb;
    ops.M = args.M;
    ops.N = args.N;
    ops.K = args.K;
    ops.m0 = pm * kTiledBM;
    ops.n0 = pn * kTiledBN;
    ops.vec_a = args.vec_a;
    ops.vec_b = args.vec_b;

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // outputs (ty + 16i, tx + 16j)
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    ops.load(0);
    for (int64_t k0 = 0; k0 < args.K; k0 += kTiledBK) {
        ops.store(as, bs);
        __syncthreads();
        if (k0 + kTiledBK < args.K) ops.load(k0 + kTiledBK);  // in flight during the math
#pragma unroll
        for (int kk = 0; kk < kTiledBK; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = Storage<T>::to_f(as[Ops::a_at(ty + 16 * i, kk)]);
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Storage<T>::to_f(bs[Ops::b_at(kk, tx + 16 * j)]);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    T* c = static_cast<T*>(args.c);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int64_t gm = ops.m0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int64_t gn = ops.n0 + tx + 16 * j;
            if (gm < args.M && gn < args.N) c[gm * args.ldc + gn] = dsb::from_float<T>(acc[i][j]);
        }
    }
}

// --------------------------------------------------------------------------------------------
// NVIDIA tensor cores (WMMA), sm_80+

constexpr int kMmaBM = 128, kMmaBN = 128, kMmaBK = 32, kMmaThreads = 256;

#if defined(DSB_CUDA)
template <typename T, bool A_ROW, bool B_ROW>
__global__ void __launch_bounds__(kMmaThreads, 1) gemm_wmma_kernel(Args args) {
#if defined(DSB_HAS_MMA_SYNC_BF16)
    using namespace nvcuda;
    typedef uint16_t R;
    typedef Operands<R, kMmaBM, kMmaBN, kMmaBK, kMmaThreads, A_ROW, B_ROW> Ops;
    typedef typename std::conditional<A_ROW, wmma::row_major, wmma::col_major>::type LayoutA;
    typedef typename std::conditional<B_ROW, wmma::row_major, wmma::col_major>::type LayoutB;
    // WMMA wants 32-byte aligned fragment pointers: every offset used below is a multiple of 16
    // elements, and both tile sizes are multiples of 16 elements.
    static_assert(Ops::kSmemA % 16 == 0 && Ops::kLdA % 8 == 0 && Ops::kLdB % 8 == 0, "wmma ldm");
    __shared__ __align__(128) R smem[Ops::kSmemA + Ops::kSmemB];
    __shared__ __align__(128) float stage[kMmaThreads / 32][16 * 16];  // epilogue, per warp
    R* as = smem;
    R* bs = smem + Ops::kSmemA;

    const int64_t grid_m = (args.M + kMmaBM - 1) / kMmaBM;
    const int64_t grid_n = (args.N + kMmaBN - 1) / kMmaBN;
    int64_t pm, pn;
    tile_coords(blockIdx.x, grid_m, grid_n, pm, pn);
    Ops ops;
    ops.a = static_cast<const R*>(args.a);
    ops.b = static_cast<const R*>(args.b);
    ops.lda = args.lda;
    ops.ldb = args.ldb;
    ops.M = args.M;
    ops.N = args.N;
    ops.K = args.K;
    ops.m0 = pm * kMmaBM;
    ops.n0 = pn * kMmaBN;
    ops.vec_a = args.vec_a;
    ops.vec_b = args.vec_b;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // this warp's 64x32 corner
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    ops.load(0);
    for (int64_t k0 = 0; k0 < args.K; k0 += kMmaBK) {
        ops.store(as, bs);
        __syncthreads();
        if (k0 + kMmaBK < args.K) ops.load(k0 + kMmaBK);
#pragma unroll
        for (int kk = 0; kk < kMmaBK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb[2];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                wmma::load_matrix_sync(fa[i], reinterpret_cast<const T*>(as + Ops::a_at(wm + 16 * i, kk)),
                                       Ops::kLdA);
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::load_matrix_sync(fb[j], reinterpret_cast<const T*>(bs + Ops::b_at(kk, wn + 16 * j)),
                                       Ops::kLdB);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }

    T* c = static_cast<T*>(args.c);
    float* st = stage[warp];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const int64_t m_base = ops.m0 + wm + 16 * i, n_base = ops.n0 + wn + 16 * j;
#pragma unroll
            for (int e = lane; e < 256; e += 32) {
                const int64_t gm = m_base + e / 16, gn = n_base + e % 16;
                if (gm < args.M && gn < args.N) c[gm * args.ldc + gn] = dsb::from_float<T>(st[e]);
            }
            __syncwarp();
        }
    }
#else
    __trap();  // compiled for a GPU without bf16 tensor cores: the host never launches this
#endif
}
#endif  // DSB_CUDA

// --------------------------------------------------------------------------------------------
// AMD matrix cores (MFMA), CDNA wave64

#if defined(DSB_HIP)
typedef _Float16 dsb_half4 __attribute__((ext_vector_type(4)));
typedef short dsb_short4 __attribute__((ext_vector_type(4)));
typedef float dsb_float16v __attribute__((ext_vector_type(16)));

union MfmaFrag {  // 4 consecutive-k values of one row of A (or one column of B)
    dsb_short4 s;
    dsb_half4 h;
    uint16_t u[4];
};

template <typename T>
DSB_DEVICE dsb_float16v mfma_32x32x8(const MfmaFrag& a, const MfmaFrag& b, dsb_float16v c);

#if defined(DSB_HAS_MFMA)
template <>
DSB_DEVICE dsb_float16v mfma_32x32x8<dsb::half>(const MfmaFrag& a, const MfmaFrag& b,
                                                dsb_float16v c) {
    return __builtin_amdgcn_mfma_f32_32x32x8f16(a.h, b.h, c, 0, 0, 0);
}
#endif
#if defined(DSB_HAS_MFMA_BF16_1K)
template <>
DSB_DEVICE dsb_float16v mfma_32x32x8<dsb::bf16>(const MfmaFrag& a, const MfmaFrag& b,
                                                dsb_float16v c) {
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a.s, b.s, c, 0, 0, 0);
}
#endif

// The MFMA kernel exists for the data type on this target (device pass).
template <typename T>
struct HasMfma {
    static constexpr bool value = false;
};
#if defined(DSB_HAS_MFMA)
template <>
struct HasMfma<dsb::half> {
    static constexpr bool value = true;
};
#endif
#if defined(DSB_HAS_MFMA_BF16_1K)
template <>
struct HasMfma<dsb::bf16> {
    static constexpr bool value = true;
};
#endif

// v_mfma_f32_32x32x8 operand layout (wave64): lane l holds A[l % 32][4*(l/32) + 0..3] and
// B[4*(l/32) + 0..3][l % 32]; result register r of lane l is D[8*(r/4) + 4*(l/32) + r%4][l % 32].
template <typename T, bool A_ROW, bool B_ROW>
__global__ void __launch_bounds__(kMmaThreads) gemm_mfma_kernel(Args args) {
    if constexpr (HasMfma<T>::value) {
        typedef uint16_t R;
        typedef Operands<R, kMmaBM, kMmaBN, kMmaBK, kMmaThreads, A_ROW, B_ROW> Ops;
        __shared__ __align__(16) R smem[Ops::kSmemA + Ops::kSmemB];
        R* as = smem;
        R* bs = smem + Ops::kSmemA;

        const int64_t grid_m = (args.M + kMmaBM - 1) / kMmaBM;
        const int64_t grid_n = (args.N + kMmaBN - 1) / kMmaBN;
        int64_t pm, pn;
        tile_coords(blockIdx.x, grid_m, grid_n, pm, pn);
        Ops ops;
        ops.a = static_cast<const R*>(args.a);
        ops.b = static_cast<const R*>(args.b);
        ops.lda = args.lda;
        ops.ldb = args.ldb;
        ops.M = args.M;
        ops.N = args.N;
        ops.K = args.K;
        ops.m0 = pm * kMmaBM;
        ops.n0 = pn * kMmaBN;
        ops.vec_a = args.vec_a;
        ops.vec_b = args.vec_b;

        const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
        const int wm = (wave / 2) * 64, wn = (wave % 2) * 64;  // this wave's 64x64 corner
        const int row = lane % 32, kq = 4 * (lane / 32);
        dsb_float16v acc[2][2];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int r = 0; r < 16; ++r) acc[i][j][r] = 0.0f;

        ops.load(0);
        for (int64_t k0 = 0; k0 < args.K; k0 += kMmaBK) {
            ops.store(as, bs);
            __syncthreads();
            if (k0 + kMmaBK < args.K) ops.load(k0 + kMmaBK);
#pragma unroll
            for (int kk = 0; kk < kMmaBK; kk += 8) {
                MfmaFrag fa[2], fb[2];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int m = wm + 32 * i + row;
                    if (A_ROW) {  // 4 consecutive k: one 8-byte LDS read
                        fa[i].s = *reinterpret_cast<const dsb_short4*>(as + Ops::a_at(m, kk + kq));
                    } else {
#pragma unroll
                        for (int q = 0; q < 4; ++q) fa[i].u[q] = as[Ops::a_at(m, kk + kq + q)];
                    }
                }
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int n = wn + 32 * j + row;
                    if (!B_ROW) {
                        fb[j].s = *reinterpret_cast<const dsb_short4*>(bs + Ops::b_at(kk + kq, n));
                    } else {
#pragma unroll
                        for (int q = 0; q < 4; ++q) fb[j].u[q] = bs[Ops::b_at(kk + kq + q, n)];
                    }
                }
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 2; ++j) acc[i][j] = mfma_32x32x8<T>(fa[i], fb[j], acc[i][j]);
            }
            __syncthreads();
        }

        T* c = static_cast<T*>(args.c);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int r = 0; r < 16; ++r) {
                    const int64_t gm = ops.m0 + wm + 32 * i + 8 * (r / 4) + 4 * (lane / 32) + r % 4;
                    const int64_t gn = ops.n0 + wn + 32 * j + lane % 32;
                    if (gm < args.M && gn < args.N)
                        c[gm * args.ldc + gn] = dsb::from_float<T>(acc[i][j][r]);
                }
    } else {
        __builtin_trap();  // no matrix cores for T on this target: the host never launches this
    }
}
#endif  // DSB_HIP

// --------------------------------------------------------------------------------------------
// host: choose a path, launch

enum Path { kTiled = 0, kWmma = 1, kMfma = 2 };

const char* path_name(Path p) { return p == kWmma ? "wmma" : p == kMfma ? "mfma" : "tiled"; }

constexpr int kMaxDevices = 64;

#if defined(DSB_CUDA)
// Whether this device runs a tensor-core build of the WMMA kernel (compiled for sm_80+), which
// also covers PTX compiled for an older virtual architecture and JIT-compiled for this one.
const char* device_has_wmma(bool& yes) {
    static int cache[kMaxDevices] = {0};  // 0 unknown, 1 yes, 2 no
    int dev = 0;
    DSB_RETURN_IF_ERROR(dsbGetDevice(&dev));
    if (dev >= 0 && dev < kMaxDevices && cache[dev] != 0) {
        yes = cache[dev] == 1;
        return nullptr;
    }
    cudaFuncAttributes attr;
    DSB_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, gemm_wmma_kernel<dsb::half, true, true>));
    yes = (attr.ptxVersion > 0 ? attr.ptxVersion : attr.binaryVersion) >= 80;
    if (dev >= 0 && dev < kMaxDevices) cache[dev] = yes ? 1 : 2;
    return nullptr;
}
#else
// gfx arch of the current device: 1 = MFMA fp16 only (gfx908), 2 = fp16 and bf16_1k
// (gfx90a, gfx94x, gfx950), 3 = none.
const char* device_mfma_level(int& level) {
    static int cache[kMaxDevices] = {0};
    int dev = 0;
    DSB_RETURN_IF_ERROR(dsbGetDevice(&dev));
    if (dev >= 0 && dev < kMaxDevices && cache[dev] != 0) {
        level = cache[dev];
        return nullptr;
    }
    hipDeviceProp_t prop;
    DSB_RETURN_IF_ERROR(hipGetDeviceProperties(&prop, dev));
    const char* arch = prop.gcnArchName;  // e.g. "gfx90a:sramecc+:xnack-"
    auto starts = [arch](const char* p) {
        int i = 0;
        for (; p[i] != '\0'; ++i)
            if (arch[i] != p[i]) return false;
        return arch[i] == '\0' || arch[i] == ':';
    };
    if (starts("gfx908"))
        level = 1;
    else if (starts("gfx90a") || starts("gfx940") || starts("gfx941") || starts("gfx942") ||
             starts("gfx950"))
        level = 2;
    else
        level = 3;
    if (dev >= 0 && dev < kMaxDevices) cache[dev] = level;
    return nullptr;
}
#endif

const char* choose_path(int dtype, int requested, Path& path) {
    path = kTiled;
    if (requested == DSB_GEMM_PATH_TILED || dtype == DSB_DTYPE_FLOAT32) return nullptr;
#if defined(DSB_CUDA)
    bool wmma = false;
    const char* err = device_has_wmma(wmma);
    if (err) return err;
    if (wmma) path = kWmma;
#else
    int level = 3;
    const char* err = device_mfma_level(level);
    if (err) return err;
    if (level == 2 || (level == 1 && dtype == DSB_DTYPE_FLOAT16)) path = kMfma;
#endif
    return nullptr;
}

template <typename T, bool A_ROW, bool B_ROW>
void launch_path(Path path, const Args& args, dsbStream_t stream) {
    const int64_t bm = path == kTiled ? kTiledBM : kMmaBM;
    const int64_t bn = path == kTiled ? kTiledBN : kMmaBN;
    const unsigned blocks =
        static_cast<unsigned>(((args.M + bm - 1) / bm) * ((args.N + bn - 1) / bn));
#if defined(DSB_CUDA)
    if (path == kWmma) {
        if constexpr (!std::is_same<T, float>::value)
            gemm_wmma_kernel<T, A_ROW, B_ROW><<<blocks, kMmaThreads, 0, stream>>>(args);
        return;
    }
#else
    if (path == kMfma) {
        if constexpr (!std::is_same<T, float>::value)
            gemm_mfma_kernel<T, A_ROW, B_ROW><<<blocks, kMmaThreads, 0, stream>>>(args);
        return;
    }
#endif
    gemm_tiled_kernel<T, A_ROW, B_ROW><<<blocks, kTiledThreads, 0, stream>>>(args);
}

template <typename T>
void launch_layout(Path path, const Args& args, bool a_row, bool b_row, dsbStream_t stream) {
    if (a_row && b_row)
        launch_path<T, true, true>(path, args, stream);
    else if (a_row)
        launch_path<T, true, false>(path, args, stream);
    else if (b_row)
        launch_path<T, false, true>(path, args, stream);
    else
        launch_path<T, false, false>(path, args, stream);
}

}  // namespace

extern "C" const char* dsb_gemm_path_name(int dtype, int path) {
    Path p;
    const char* err = choose_path(dtype, path, p);
    return err ? "error: device query failed" : path_name(p);
}

extern "C" const char* dsb_gemm_launch(const void* a, const void* b, void* c, int64_t m,
                                       int64_t n, int64_t k, int64_t lda, int a_row, int64_t ldb,
                                       int b_row, int64_t ldc, int dtype, int path,
                                       void* stream) {
    if (m <= 0 || n <= 0) return nullptr;
    if (k <= 0) return "dsb_gemm_launch: K must be positive (the caller zero-fills C for K = 0)";
    Path p;
    const char* err = choose_path(dtype, path, p);
    if (err) return err;
    const int64_t bm = p == kTiled ? kTiledBM : kMmaBM, bn = p == kTiled ? kTiledBN : kMmaBN;
    if (((m + bm - 1) / bm) * ((n + bn - 1) / bn) > 0x7fffffffLL)
        return "dsb_gemm_launch: M x N needs more than 2^31 - 1 blocks";
    const int esize = dtype == DSB_DTYPE_FLOAT32 ? 4 : 2;
    const int64_t vec = 16 / esize;  // elements per 16-byte load
    Args args;
    args.a = a;
    args.b = b;
    args.c = c;
    args.M = m;
    args.N = n;
    args.K = k;
    args.lda = lda;
    args.ldb = ldb;
    args.ldc = ldc;
    args.vec_a = dsb::is_aligned(a, 16) && lda % vec == 0;
    args.vec_b = dsb::is_aligned(b, 16) && ldb % vec == 0;
    dsbStream_t s = static_cast<dsbStream_t>(stream);
    switch (dtype) {
        case DSB_DTYPE_FLOAT32:
            launch_layout<float>(p, args, a_row != 0, b_row != 0, s);
            break;
        case DSB_DTYPE_FLOAT16:
            launch_layout<dsb::half>(p, args, a_row != 0, b_row != 0, s);
            break;
        case DSB_DTYPE_BFLOAT16:
            launch_layout<dsb::bf16>(p, args, a_row != 0, b_row != 0, s);
            break;
        default:
            return "dsb_gemm_launch: dtype must be float32, float16 or bfloat16";
    }
    DSB_LAUNCH_CHECK();
    return nullptr;
}
