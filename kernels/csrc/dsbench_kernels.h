// dsbench_kernels.h: the host launchers of dsbench's CUDA/HIP kernels, in plain C types.
//
// Included by each kernel source (which defines its launchers) and by bindings.cpp (which
// validates torch tensors and calls them). No CUDA, HIP or torch header here, so the bindings
// compile with the host compiler and the kernels without torch.
//
// Every launcher takes raw device pointers, sizes, dtype codes and a stream (cudaStream_t or
// hipStream_t, passed as void*), launches asynchronously, and returns nullptr on success or the
// runtime's error string.
#pragma once

#include <stddef.h>
#include <stdint.h>

// dtype codes (dsb::Dtype in dsbench_portability.h)
#define DSB_DTYPE_FLOAT32 0
#define DSB_DTYPE_FLOAT16 1
#define DSB_DTYPE_BFLOAT16 2

// ---------------------------------------------------------------------------------------------
// AdamW / Adam (adamw.cu)
//
// The multi-tensor path: a device table with one entry per tensor; the grid walks chunks of
// DSB_ADAMW_CHUNK elements over all tensors, so a whole list is one launch.

#define DSB_ADAMW_THREADS 256  // threads per block
#define DSB_ADAMW_VEC 4        // fp32 elements per 16-byte vector
#define DSB_ADAMW_ILP 4        // vectors in flight per thread
#define DSB_ADAMW_CHUNK (DSB_ADAMW_THREADS * DSB_ADAMW_VEC * DSB_ADAMW_ILP)  // elements per block

struct DsbAdamwEntry {  // 64 bytes
    float* param;
    const void* grad;  // fp32, fp16 or bf16 (one dtype per launch)
    float* exp_avg;
    float* exp_avg_sq;
    float* step;          // float32 scalar, incremented when the step is applied
    int64_t numel;
    int64_t chunk_begin;  // index of this tensor's first chunk in the launch
    int32_t head;         // scalar elements before the 16-byte-aligned body; -1: scalar only
    int32_t reserved;
};

// Elements to process one by one before param, exp_avg, exp_avg_sq and grad are all aligned for
// 16-byte (grad: 4-element) vector access, or -1 when no common offset aligns them all.
static inline int32_t dsb_adamw_head(const void* param, const void* grad, const void* exp_avg,
                                     const void* exp_avg_sq, size_t grad_elem_size,
                                     int64_t numel) {
    const uintptr_t p = (uintptr_t)param;
    if (p % 4 != 0) return -1;
    const int64_t head = (int64_t)(((16 - p % 16) % 16) / 4);
    const uintptr_t gvec = (uintptr_t)(grad_elem_size * DSB_ADAMW_VEC);
    if (((uintptr_t)exp_avg + 4 * head) % 16 != 0 || ((uintptr_t)exp_avg_sq + 4 * head) % 16 != 0 ||
        ((uintptr_t)grad + grad_elem_size * head) % gvec != 0)
        return -1;
    return (int32_t)(head < numel ? head : numel);
}

// Chunks (blocks of work) for one tensor with this head.
static inline int64_t dsb_adamw_chunks(int64_t numel, int32_t head) {
    if (numel <= 0) return 0;
    const int64_t body = numel - (head > 0 ? head : 0);
    const int64_t chunks = (body + DSB_ADAMW_CHUNK - 1) / DSB_ADAMW_CHUNK;
    return chunks > 0 ? chunks : 1;
}

#ifdef __cplusplus
extern "C" {
#endif

// One Adam/AdamW step over every tensor in `table` (a device array of n_tensors entries),
// semantics of dsbench.kernels.reference.adamw. With grad_scale (device float32 scalar): grads
// are multiplied by 1/grad_scale, found_inf (device float32 scalar, required then) is set to 0 or
// 1, and a 1 skips the update and the step increment. Launches: [memset + check] + update + steps.
const char* dsb_adamw_launch(const DsbAdamwEntry* table, int64_t n_tensors, int64_t total_chunks,
                             int grad_dtype, double lr, double beta1, double beta2, double eps,
                             double weight_decay, int adamw_mode, const float* grad_scale,
                             float* found_inf, void* stream);

// ---------------------------------------------------------------------------------------------
// GEMM (gemm.cu): C[m][n] = sum_k A[m][k] B[k][n], fp32 accumulation, C row-major (ldc).
// a_row: A[m][k] = a[m*lda + k], else a[k*lda + m]; b_row: B[k][n] = b[k*ldb + n], else
// b[n*ldb + k]. dtype: one of DSB_DTYPE_* for A, B and C.

#define DSB_GEMM_PATH_AUTO 0   // the best path this device and dtype have
#define DSB_GEMM_PATH_TILED 1  // force the portable shared-memory path

const char* dsb_gemm_launch(const void* a, const void* b, void* c, int64_t m, int64_t n,
                            int64_t k, int64_t lda, int a_row, int64_t ldb, int b_row,
                            int64_t ldc, int dtype, int path, void* stream);

// Which kernel dsb_gemm_launch runs on the current device: "wmma" (NVIDIA tensor cores),
// "mfma" (AMD matrix cores) or "tiled" (portable), or an error string starting with "error:".
const char* dsb_gemm_path_name(int dtype, int path);

// ---------------------------------------------------------------------------------------------
// reduce_add (reduce.cu): acc[i] = round(float(acc[i]) + float(x[i])), i < n.

const char* dsb_reduce_add_launch(void* acc, int acc_dtype, const void* x, int x_dtype,
                                  int64_t n, void* stream);

#ifdef __cplusplus
}
#endif
