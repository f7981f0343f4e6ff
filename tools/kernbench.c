/* kernbench.c — single-thread GFLOP/s of gemm_rows (y = x·b) and gemm_rows_atb (c += aᵀ·b), the skinny
 * 1×1 convolution kernels, on EfficientNet-B0's 1×1 shapes they take (gemm_rows_fits: C·OC ≤ 10,240; 224×224
 * batch 16 rows), in the 256-row pieces
 * the fused backward feeds them. Best of REPEATS timed passes of each, after one untimed: a kernel's
 * figure for A/B runs of two builds (alternate them: the machine is shared).
 *
 *   make kernbench            (or build/kernbench [REPEATS])
 */
#include "gemm_rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { PIECE = 256 };

int main(int argc, char **argv)
{
    const int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1) {
        fprintf(stderr, "usage: kernbench [REPEATS ≥ 1]\n");
        return 2;
    }
    /* rows (N·H·W at batch 16), C (the input channels: a's and x's columns), OC */
    static const int shapes[][3] = {{200704, 32, 16}, {200704, 16, 96}, {50176, 96, 24},  {50176, 24, 144},
                                    {50176, 144, 24}, {12544, 144, 40}, {12544, 40, 240}, {12544, 240, 40}};
    printf("%-22s %12s %12s %12s\n", "rows x C x OC", "fwd y=x.w", "data dx=dy.wT", "params aT.b");
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        const size_t M = (size_t)shapes[q][0];
        const int C = shapes[q][1], OC = shapes[q][2];
        float *x = malloc(M * C * sizeof(float)), *y = malloc(M * OC * sizeof(float));
        float *w = malloc((size_t)C * OC * sizeof(float)), *wt = malloc((size_t)C * OC * sizeof(float));
        float *dx = malloc(M * C * sizeof(float)), *pk = calloc((size_t)C * OC, sizeof(float));
        if (!x || !y || !w || !wt || !dx || !pk) {
            fprintf(stderr, "kernbench: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < M * C; i++) x[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < M * OC; i++) y[i] = (float)(i % 7) * 0.01f;
        for (size_t i = 0; i < (size_t)C * OC; i++) w[i] = wt[i] = 0.01f * (float)(i % 5);
        double best[3] = {1e30, 1e30, 1e30};
        for (int r = 0; r <= repeats; r++) {
            double t0 = now_s();
            for (size_t p = 0; p < M; p += PIECE) {
                const size_t m = M - p < PIECE ? M - p : PIECE;
                gemm_rows(y + p * OC, (size_t)OC, x + p * C, (size_t)C, w, (size_t)OC, m, C, OC, 0, 0, NULL, NULL);
            }
            double t1 = now_s();
            for (size_t p = 0; p < M; p += PIECE) {
                const size_t m = M - p < PIECE ? M - p : PIECE;
                gemm_rows(dx + p * C, (size_t)C, y + p * OC, (size_t)OC, wt, (size_t)C, m, OC, C, 0, 0, NULL, NULL);
            }
            double t2 = now_s();
            for (size_t p = 0; p < M; p += PIECE) {
                const size_t m = M - p < PIECE ? M - p : PIECE;
                gemm_rows_atb(pk, (size_t)OC, x + p * C, (size_t)C, y + p * OC, (size_t)OC, m, C, OC);
            }
            double t3 = now_s();
            if (r == 0) continue; /* untimed: first touch, caches */
            const double t[3] = {t1 - t0, t2 - t1, t3 - t2};
            for (int k = 0; k < 3; k++)
                if (t[k] < best[k]) best[k] = t[k];
        }
        const double gf = 2.0 * (double)M * C * OC * 1e-9;
        char name[32];
        snprintf(name, sizeof name, "%zu x %d x %d", M, C, OC);
        printf("%-22s %12.1f %12.1f %12.1f   GFLOP/s (checksum %g)\n", name, gf / best[0], gf / best[1], gf / best[2],
               (double)pk[OC + 1]);
        free(x), free(y), free(w), free(wt), free(dx), free(pk);
    }
    return 0;
}
