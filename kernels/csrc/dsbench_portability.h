// dsbench_portability.h: what differs between CUDA (nvcc) and HIP (hipcc -x hip), in one place.
//
// Every kernel source includes this header and nothing vendor-specific, so one .cu file compiles
// with `nvcc` and with `hipcc -x hip`, and also after torch's hipify pass (ROCm builds of torch
// rewrite CUDA names in the CUDA branch below; the HIP branch is what gets compiled there).
//
//   DSB_HIP / DSB_CUDA          which toolchain is compiling
//   DSB_WARP_SIZE               32 on NVIDIA, 64 on CDNA (wave64); compile-time on the device
//   DSB_FULL_MASK, dsb::shfl_xor, dsb::warp_reduce_max / warp_any
//                               HIP's *_sync shuffles need 64-bit masks (and only exist from
//                               ROCm 6.2); HIP 5.x has only the mask-less __shfl_xor
//   dsb::half / dsb::bf16       __half / __nv_bfloat16 (CUDA); __half / __hip_bfloat16 or
//                               hip_bfloat16 (HIP 5.2 has only the latter)
//   dsb::to_float / dsb::from_float<T>
//                               explicit conversions (torch builds with
//                               __CUDA_NO_HALF_CONVERSIONS__ / __HIP_NO_HALF_CONVERSIONS__)
//   dsbStream_t, dsbError_t, DSB_LAUNCH_CHECK()
//                               stream / error types and a launch check that returns the error
//                               string from a launcher (launchers return nullptr on success)
//   DSB_HAS_MMA_SYNC_BF16       NVIDIA tensor cores with bf16 WMMA (sm_80+), device pass only
//   DSB_HAS_MFMA / DSB_HAS_MFMA_BF16_1K
//                               AMD matrix cores (gfx908/gfx90a/gfx94x), device pass only
//
// Nothing torch lives here; bindings.cpp is the only file that includes torch headers.
// With DSB_CPU_EMULATION (tests only), dsbench_cpu_emulation.h stands in for the vendor headers.
#pragma once

#include <stdint.h>

#if defined(DSB_CPU_EMULATION)
// Tests only: a CPU emulation of the CUDA or HIP subset used here (threads as std::threads);
// it defines DSB_CUDA or DSB_HIP and provides the runtime, types and intrinsics.
#include "dsbench_cpu_emulation.h"
#elif defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#define DSB_HIP 1
#else
#define DSB_CUDA 1
#endif

// --------------------------------------------------------------------------------------------
// runtime, types
#if defined(DSB_CPU_EMULATION)
// provided by the emulation
#elif defined(DSB_HIP)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
#define DSB_HIP_NEW_BF16 1
#else
#include <hip/hip_bfloat16.h>
#endif
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

#if defined(DSB_HIP)
typedef hipStream_t dsbStream_t;
typedef hipError_t dsbError_t;
#define dsbSuccess hipSuccess
#define dsbGetLastError hipGetLastError
#define dsbGetErrorString hipGetErrorString
#define dsbMemsetAsync hipMemsetAsync
#define dsbGetDevice hipGetDevice
#else
typedef cudaStream_t dsbStream_t;
typedef cudaError_t dsbError_t;
#define dsbSuccess cudaSuccess
#define dsbGetLastError cudaGetLastError
#define dsbGetErrorString cudaGetErrorString
#define dsbMemsetAsync cudaMemsetAsync
#define dsbGetDevice cudaGetDevice
#endif

// Launchers return `const char*`: nullptr on success, the runtime's error string otherwise.
#define DSB_LAUNCH_CHECK()                                        \
    do {                                                          \
        dsbError_t dsb_err_ = dsbGetLastError();                  \
        if (dsb_err_ != dsbSuccess) return dsbGetErrorString(dsb_err_); \
    } while (0)
#define DSB_RETURN_IF_ERROR(expr)                                 \
    do {                                                          \
        dsbError_t dsb_err_ = (expr);                             \
        if (dsb_err_ != dsbSuccess) return dsbGetErrorString(dsb_err_); \
    } while (0)

// --------------------------------------------------------------------------------------------
// warp / wavefront
#if defined(DSB_HIP)
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define DSB_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define DSB_WARP_SIZE 64  // host pass, or a compiler that no longer defines it: CDNA is wave64
#endif
#define DSB_FULL_MASK 0xffffffffffffffffull
typedef unsigned long long dsb_lane_mask_t;
#else
#define DSB_WARP_SIZE 32
#define DSB_FULL_MASK 0xffffffffu
typedef unsigned int dsb_lane_mask_t;
#endif

// --------------------------------------------------------------------------------------------
// matrix units (device pass only; the host chooses a kernel from the device it runs on)
#if defined(DSB_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DSB_HAS_MMA_SYNC_BF16 1
#endif
#if defined(DSB_HIP) && (defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
                         defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__))
#define DSB_HAS_MFMA 1
#endif
#if defined(DSB_HIP) && (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
                         defined(__gfx942__) || defined(__gfx950__))
#define DSB_HAS_MFMA_BF16_1K 1
#endif

#define DSB_HOST_DEVICE __host__ __device__ __forceinline__
#define DSB_DEVICE __device__ __forceinline__

namespace dsb {

typedef __half half;
#if defined(DSB_CUDA)
typedef __nv_bfloat16 bf16;
#elif defined(DSB_HIP_NEW_BF16)
typedef __hip_bfloat16 bf16;
#else
typedef hip_bfloat16 bf16;
#endif
static_assert(sizeof(half) == 2 && sizeof(bf16) == 2, "16-bit float types must be 2 bytes");

// Dtype codes shared with bindings.cpp (dsbench_kernels.h).
enum Dtype : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

DSB_DEVICE float to_float(float x) { return x; }
DSB_DEVICE float to_float(half x) { return __half2float(x); }
#if defined(DSB_CUDA) || defined(DSB_HIP_NEW_BF16)
DSB_DEVICE float to_float(bf16 x) { return __bfloat162float(x); }
#else
DSB_DEVICE float to_float(bf16 x) { return static_cast<float>(x); }
#endif

template <typename T>
DSB_DEVICE T from_float(float x);
template <>
DSB_DEVICE float from_float<float>(float x) { return x; }
template <>
DSB_DEVICE half from_float<half>(float x) { return __float2half_rn(x); }
#if defined(DSB_CUDA) || defined(DSB_HIP_NEW_BF16)
template <>
DSB_DEVICE bf16 from_float<bf16>(float x) { return __float2bfloat16(x); }  // round to nearest even
#else
template <>
DSB_DEVICE bf16 from_float<bf16>(float x) { return bf16(x); }  // round to nearest even
#endif

// Raw 16-bit patterns -> float, for tiles staged in shared memory as raw bits.
template <typename T>
DSB_DEVICE float raw_to_float(uint16_t bits);
template <>
DSB_DEVICE float raw_to_float<half>(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
template <>
DSB_DEVICE float raw_to_float<bf16>(uint16_t bits) {
    return __uint_as_float(static_cast<uint32_t>(bits) << 16);  // bf16 is fp32's top half: exact
}

// --------------------------------------------------------------------------------------------
// lane exchange
DSB_DEVICE float shfl_xor(float v, int lane_mask) {
#if defined(DSB_HIP)
    return __shfl_xor(v, lane_mask, DSB_WARP_SIZE);
#else
    return __shfl_xor_sync(DSB_FULL_MASK, v, lane_mask, DSB_WARP_SIZE);
#endif
}
DSB_DEVICE int shfl_xor(int v, int lane_mask) {
#if defined(DSB_HIP)
    return __shfl_xor(v, lane_mask, DSB_WARP_SIZE);
#else
    return __shfl_xor_sync(DSB_FULL_MASK, v, lane_mask, DSB_WARP_SIZE);
#endif
}

// Butterfly max over the whole warp/wavefront; every lane must call it (no divergence).
template <typename V>
DSB_DEVICE V warp_reduce_max(V v) {
#pragma unroll
    for (int offset = DSB_WARP_SIZE / 2; offset > 0; offset /= 2) {
        V other = shfl_xor(v, offset);
        v = other > v ? other : v;
    }
    return v;
}

DSB_DEVICE bool warp_any(bool pred) { return warp_reduce_max(pred ? 1 : 0) != 0; }

DSB_DEVICE int lane_id() { return static_cast<int>(threadIdx.x) % DSB_WARP_SIZE; }

// --------------------------------------------------------------------------------------------
// aligned vectors: one 16-byte (or smaller) load/store of N elements
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

DSB_HOST_DEVICE bool is_aligned(const void* p, int bytes) {
    return (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes)) == 0;
}

}  // namespace dsb
