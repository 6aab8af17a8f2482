// dsbench_cpu_emulation.h: run the kernels of this folder on a CPU, for tests without a GPU.
//
// Included by dsbench_portability.h when DSB_CPU_EMULATION is defined (never in a GPU build).
// It emulates the subset of CUDA (default) or HIP (DSB_EMULATE_HIP, as on gfx90a) that the
// kernels use: every thread of a block is a std::thread, blocks run one after another (so
// __shared__ becomes a function-local static), __syncthreads and warp/wavefront exchanges are
// barriers, WMMA fragments hold whole 16x16 tiles, and the MFMA builtins follow the documented
// v_mfma_f32_32x32x8 lane layout. The test suite compiles the unmodified kernel sources with a
// host C++20 compiler, after rewriting each `kernel<<<grid, block, smem, stream>>>(args)` into
// dsb_emu::launch(grid, block, smem, stream, [&] { kernel(args); }).
//
// What it checks: indexing, tiling, bounds, heads/tails, alignment rules (WMMA's 32-byte
// fragment pointers, 16-byte vector accesses), barriers, and the arithmetic. What it cannot:
// timing, memory-model subtleties, and the real matrix-unit layouts (WMMA hides them; the MFMA
// layout is emulated from AMD's documentation, so it checks the kernel against that document).
#pragma once

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(DSB_EMULATE_HIP)
#define DSB_HIP 1
#define DSB_EMU_WARP 64
#define __AMDGCN_WAVEFRONT_SIZE 64
#define __gfx90a__ 1
#else
#define DSB_CUDA 1
#define DSB_EMU_WARP 32
#define __CUDA_ARCH__ 800
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static  // one block at a time: a function-local static is the block's memory
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

namespace dsb_emu {

struct Idx {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local Idx thread_idx, block_idx;
inline dim3 block_dim, grid_dim;

struct Block {
    std::unique_ptr<std::barrier<>> sync;                  // __syncthreads
    std::vector<std::unique_ptr<std::barrier<>>> warps;    // warp/wavefront exchanges
    std::vector<uint64_t> lane_slot;                       // shuffles
    std::vector<float> frag_a, frag_b;                     // MFMA operands, 4 per lane
};
inline Block* block = nullptr;
inline int last_error = 0;

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "dsb_emu: %s\n", what);
    std::abort();
}

inline unsigned lane() { return thread_idx.x % DSB_EMU_WARP; }
inline void warp_sync() { block->warps[thread_idx.x / DSB_EMU_WARP]->arrive_and_wait(); }

// Runs body() as a grid of blocks, one block (blockDim.x threads) at a time.
template <class F>
void launch(dim3 grid, dim3 threads, size_t /*smem*/, void* /*stream*/, F&& body) {
    if (threads.x == 0 || threads.x > 1024 || threads.x % DSB_EMU_WARP != 0 || threads.y != 1)
        fail("block size must be a multiple of the warp size, at most 1024, 1-D");
    if (grid.y != 1 || grid.z != 1) fail("the kernels use 1-D grids");
    grid_dim = grid;
    block_dim = threads;
    Block b;
    b.sync = std::make_unique<std::barrier<>>(threads.x);
    for (unsigned w = 0; w < threads.x / DSB_EMU_WARP; ++w)
        b.warps.push_back(std::make_unique<std::barrier<>>(DSB_EMU_WARP));
    b.lane_slot.resize(threads.x);
    b.frag_a.resize(threads.x * 4);
    b.frag_b.resize(threads.x * 4);
    block = &b;
    std::barrier<> end_of_block(threads.x);  // distinct from __syncthreads: divergence hangs
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads.x; ++t)
        pool.emplace_back([&, t] {
            thread_idx = Idx{t, 0, 0};
            for (unsigned g = 0; g < grid.x; ++g) {
                block_idx = Idx{g, 0, 0};
                body();
                end_of_block.arrive_and_wait();
            }
        });
    for (auto& th : pool) th.join();
    block = nullptr;
}

template <class T>
T shfl_xor(T v, int mask) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    const unsigned base = thread_idx.x - lane();
    block->lane_slot[thread_idx.x] = bits;
    warp_sync();
    bits = block->lane_slot[base + (lane() ^ static_cast<unsigned>(mask))];
    warp_sync();
    std::memcpy(&v, &bits, sizeof(T));
    return v;
}

inline std::mutex& atomic_mutex() {
    static std::mutex m;
    return m;
}

// round to nearest even, NaN kept quiet (as torch's c10::BFloat16 and the vendor intrinsics)
inline uint16_t float_to_bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}
inline float bf16_bits_to_float(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
inline float half_bits_to_float(uint16_t b) {
    _Float16 h;
    std::memcpy(&h, &b, 2);
    return static_cast<float>(h);
}
inline uint16_t float_to_half_bits(float f) {
    const _Float16 h = static_cast<_Float16>(f);  // round to nearest even
    uint16_t b;
    std::memcpy(&b, &h, 2);
    return b;
}

}  // namespace dsb_emu

#define threadIdx dsb_emu::thread_idx
#define blockIdx dsb_emu::block_idx
#define blockDim dsb_emu::block_dim
#define gridDim dsb_emu::grid_dim

inline void __syncthreads() { dsb_emu::block->sync->arrive_and_wait(); }
inline float atomicAdd(float* p, float v) {
    std::lock_guard<std::mutex> lock(dsb_emu::atomic_mutex());
    const float old = *p;
    *p = old + v;
    return old;
}

struct __half {
    uint16_t x;
};
inline float __half2float(__half h) { return dsb_emu::half_bits_to_float(h.x); }
inline __half __float2half_rn(float f) { return __half{dsb_emu::float_to_half_bits(f)}; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }

// --------------------------------------------------------------------------------------------
#if defined(DSB_CUDA)

typedef void* cudaStream_t;
typedef int cudaError_t;
constexpr cudaError_t cudaSuccess = 0;
inline cudaError_t cudaGetLastError() {
    const cudaError_t e = dsb_emu::last_error;
    dsb_emu::last_error = 0;
    return e;
}
inline const char* cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) {
    std::memset(p, v, n);
    return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
    *d = 0;
    return cudaSuccess;
}
struct cudaFuncAttributes {
    int ptxVersion = 0, binaryVersion = 0;
};
template <class F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F*) {
    a->ptxVersion = a->binaryVersion = 80;  // the emulation stands for an sm_80 build
    return cudaSuccess;
}
[[noreturn]] inline void __trap() { dsb_emu::fail("__trap()"); }
inline void __syncwarp(unsigned = 0xffffffffu) { dsb_emu::warp_sync(); }
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int = DSB_EMU_WARP) {
    return dsb_emu::shfl_xor(v, mask);
}

struct __nv_bfloat16 {
    uint16_t x;
};
inline float __bfloat162float(__nv_bfloat16 b) { return dsb_emu::bf16_bits_to_float(b.x); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16{dsb_emu::float_to_bf16_bits(f)}; }

namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

// Every lane holds the whole 16x16 tile (row-major floats); the arithmetic is done per lane.
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    float v[256];
};

inline float to_float(__half h) { return __half2float(h); }
inline float to_float(__nv_bfloat16 b) { return __bfloat162float(b); }

inline void check_pointer(const void* p, unsigned ldm) {
    if (reinterpret_cast<uintptr_t>(p) % 32 != 0) dsb_emu::fail("wmma pointer not 32-byte aligned");
    if (ldm % 8 != 0) dsb_emu::fail("wmma ldm not a multiple of 8 elements");
}

template <class F>
void fill_fragment(F& f, float x) {
    for (float& e : f.v) e = x;
}
// (r, c) of a 16x16 operand: row-major at p[r*ldm + c], column-major at p[c*ldm + r]
template <class Use, class T, class L>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, L>& f, const T* p, unsigned ldm) {
    check_pointer(p, ldm);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
            f.v[r * 16 + c] =
                to_float(std::is_same<L, row_major>::value ? p[r * ldm + c] : p[c * ldm + r]);
}
template <class T, class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
    float out[256];
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
            float s = c.v[i * 16 + j];
            for (int k = 0; k < 16; ++k) s = std::fma(a.v[i * 16 + k], b.v[k * 16 + j], s);
            out[i * 16 + j] = s;
        }
    std::memcpy(d.v, out, sizeof(out));
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
    check_pointer(p, ldm);
    dsb_emu::warp_sync();  // every lane arrives before lane 0 writes: a warp-wide operation
    if (dsb_emu::lane() == 0)
        for (int r = 0; r < 16; ++r)
            for (int c = 0; c < 16; ++c)
                p[layout == mem_row_major ? r * ldm + c : c * ldm + r] = f.v[r * 16 + c];
}
}  // namespace wmma
}  // namespace nvcuda

// --------------------------------------------------------------------------------------------
#else  // DSB_HIP

typedef void* hipStream_t;
typedef int hipError_t;
constexpr hipError_t hipSuccess = 0;
inline hipError_t hipGetLastError() {
    const hipError_t e = dsb_emu::last_error;
    dsb_emu::last_error = 0;
    return e;
}
inline const char* hipGetErrorString(hipError_t e) { return e ? "emulated error" : "no error"; }
inline hipError_t hipMemsetAsync(void* p, int v, size_t n, hipStream_t) {
    std::memset(p, v, n);
    return hipSuccess;
}
inline hipError_t hipGetDevice(int* d) {
    *d = 0;
    return hipSuccess;
}
struct hipDeviceProp_t {
    char gcnArchName[256];
};
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int) {
    std::snprintf(p->gcnArchName, sizeof(p->gcnArchName), "gfx90a:sramecc+:xnack-");
    return hipSuccess;
}
template <class T>
T __shfl_xor(T v, int mask, int = DSB_EMU_WARP) {
    return dsb_emu::shfl_xor(v, mask);
}

// HIP 5.2's bfloat16 class (explicit conversions, round to nearest even)
struct hip_bfloat16 {
    uint16_t data;
    hip_bfloat16() = default;
    explicit hip_bfloat16(float f) : data(dsb_emu::float_to_bf16_bits(f)) {}
    explicit operator float() const { return dsb_emu::bf16_bits_to_float(data); }
};

namespace dsb_emu {
// v_mfma_f32_32x32x8{f16,bf16_1k} on one wavefront: lane l supplies A[l%32][4*(l/32) + q] and
// B[4*(l/32) + q][l%32] (q < 4) and receives D[8*(r/4) + 4*(l/32) + r%4][l%32] in register r.
template <class V, class C>
C mfma_32x32x8(V a, V b, C c, bool bf16) {
    const unsigned t = thread_idx.x, base = t - lane(), l = lane();
    for (int q = 0; q < 4; ++q) {
        if (bf16) {
            block->frag_a[t * 4 + q] = bf16_bits_to_float(static_cast<uint16_t>(a[q]));
            block->frag_b[t * 4 + q] = bf16_bits_to_float(static_cast<uint16_t>(b[q]));
        } else {
            block->frag_a[t * 4 + q] = static_cast<float>(a[q]);
            block->frag_b[t * 4 + q] = static_cast<float>(b[q]);
        }
    }
    warp_sync();
    C d = c;
    for (int r = 0; r < 16; ++r) {
        const unsigned i = 8 * (r / 4) + 4 * (l / 32) + r % 4, j = l % 32;
        float s = c[r];
        for (unsigned k = 0; k < 8; ++k)
            s = std::fma(block->frag_a[(base + i + 32 * (k / 4)) * 4 + k % 4],
                         block->frag_b[(base + j + 32 * (k / 4)) * 4 + k % 4], s);
        d[r] = s;
    }
    warp_sync();
    return d;
}
}  // namespace dsb_emu

#define __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, cbsz, abid, blgp) \
    dsb_emu::mfma_32x32x8(a, b, c, false)
#define __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, cbsz, abid, blgp) \
    dsb_emu::mfma_32x32x8(a, b, c, true)

#endif
