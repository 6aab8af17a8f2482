/* The CPU memory ceiling with AdamW's access pattern (kernels/cpu_stream.py): for every element
 * i, in one pass over four float32 arrays,
 *
 *     x = g[i];  p[i] += s * x;  m[i] += s * x;  v[i] += s * x;
 *
 * four streams read and three written in place, the traffic of a fused AdamW step (p, g, m, v
 * read; p, m, v written back into lines already read, so no write-allocate), with arithmetic
 * that costs nothing beside it. torch has no one-pass kernel of this shape: its in-place
 * kernels (Tensor.add_, Tensor.addcmul_) write one array, so they measure another ratio of reads
 * to writes, which a memory system serves at another rate.
 *
 * The loop runs on `threads` threads of OpenMP's pool (build with -fopenmp). Loaded into a
 * process that has imported torch, that is torch's own pool: libgomp.so.1 is loaded once, so
 * the kernel's threads are the ones torch's kernels use, which spin a while after each parallel
 * region. Threads of its own would compete with those for the cores. */
#include <stdint.h>

void dsb_stream_update3(float *restrict p, float *restrict m, float *restrict v,
                        const float *restrict g, int64_t n, float s, int threads) {
    if (threads < 1) threads = 1;
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float x = s * g[i];
        p[i] += x;
        m[i] += x;
        v[i] += x;
    }
}
