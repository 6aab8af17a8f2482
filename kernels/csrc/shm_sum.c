/* The shm collectives' sum of one segment, with the ZeRO engine's landing fused into it
 * (kernels/shm_sum.py): for every element i, in one pass,
 *
 *     s = slots[0][i] + slots[1][i] + ... + slots[n-1][i]     (fp32, rank order)
 *     s = s / divide_by                                       (when divide_by != 1)
 *     s = out[i] + s                                          (when accumulate)
 *     out[i] = s
 *     *sq += (double)s * s                                    (when sq is given)
 *
 * Each operation is one correctly rounded IEEE fp32 operation, in the order torch's separate
 * passes (torch.add, Tensor.add_, Tensor.div_, Tensor.add_) apply them, so the bits are theirs;
 * build with -ffp-contract=off so that nothing is fused into an FMA. The square-sum is exact per
 * element (a float's square fits a double) and accumulated in fp64 in 16 lanes (lane = i mod 16),
 * added in lane order at the end: the same value for the same data on any build.
 *
 * out must not overlap any slot (the caller checks). */
#include <stdint.h>

enum { BLOCK = 1024, LANES = 16 };

/* One block of two slots, the flags constant at each call so that every loop is one pass. */
static inline __attribute__((always_inline)) void two(float *restrict o, const float *restrict a,
                                                      const float *restrict b, int len, float d,
                                                      int divide, int accumulate) {
    for (int k = 0; k < len; ++k) {
        float s = a[k] + b[k];
        if (divide) s = s / d;
        o[k] = accumulate ? o[k] + s : s;
    }
}

/* One block of any number of slots: summed in rank order into tmp first. */
static void many(float *restrict o, const float *const *slots, int n, int64_t c, int len, float d,
                 int accumulate) {
    float tmp[BLOCK];
    const float *restrict s0 = slots[0] + c;
    for (int k = 0; k < len; ++k) tmp[k] = s0[k];
    for (int j = 1; j < n; ++j) {
        const float *restrict sj = slots[j] + c;
        for (int k = 0; k < len; ++k) tmp[k] = tmp[k] + sj[k];
    }
    if (d != 1.0f)
        for (int k = 0; k < len; ++k) tmp[k] = tmp[k] / d;
    if (accumulate)
        for (int k = 0; k < len; ++k) o[k] = o[k] + tmp[k];
    else
        for (int k = 0; k < len; ++k) o[k] = tmp[k];
}

void dsb_shm_sum_f32(float *out, const float *const *slots, int n, int64_t m, float divide_by,
                     int accumulate, double *sq) {
    double part[LANES] = {0};
    const int divide = divide_by != 1.0f;
    for (int64_t c = 0; c < m; c += BLOCK) {
        const int len = (int)(m - c < BLOCK ? m - c : BLOCK);
        float *restrict o = out + c;
        if (n == 2) {
            const float *a = slots[0] + c, *b = slots[1] + c;
            if (divide && accumulate) two(o, a, b, len, divide_by, 1, 1);
            else if (divide) two(o, a, b, len, divide_by, 1, 0);
            else if (accumulate) two(o, a, b, len, divide_by, 0, 1);
            else two(o, a, b, len, divide_by, 0, 0);
        } else {
            many(o, slots, n, c, len, divide_by, accumulate);
        }
        if (sq) {
            int k = 0;
            for (; k + LANES <= len; k += LANES)
                for (int l = 0; l < LANES; ++l) {
                    const double x = (double)o[k + l];
                    part[l] += x * x;
                }
            for (; k < len; ++k) {
                const double x = (double)o[k];
                part[k % LANES] += x * x;
            }
        }
    }
    if (sq) {
        double total = 0.0;
        for (int l = 0; l < LANES; ++l) total += part[l];
        *sq = total;
    }
}
