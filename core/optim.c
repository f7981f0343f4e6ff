/* optim.c — Adam (Keras form), SGD with momentum, RMSProp (TF form), LARS; LR schedules.
 *
 * All element-wise: each thread updates its own contiguous slice, so the result is bitwise
 * independent of nth. Weight decay is L2 added to the gradient, skipped on no_decay segments.
 */
#include "optim.h"

#include "layout.h"
#include "simd.h"

#include <math.h>
#include <string.h>

static const char *const optim_names[] = {"adam", "sgd", "rmsprop", "lars"};

void optim_config_defaults(struct optim_config *c, enum optim_kind kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->schedule = LR_CONSTANT;
    c->power = 1.0f;
    c->decay_rate = 0.97f;
    switch (kind) {
    case OPTIM_ADAM:
        c->lr = 1e-3f, c->beta1 = 0.9f, c->beta2 = 0.999f, c->eps = 1e-7f;
        break;
    case OPTIM_SGD:
        c->lr = 0.01f, c->momentum = 0.9f;
        break;
    case OPTIM_RMSPROP: /* EfficientNet paper: decay 0.9, momentum 0.9, ε 1e-3 */
        c->lr = 0.016f, c->rho = 0.9f, c->momentum = 0.9f, c->eps = 1e-3f;
        break;
    case OPTIM_LARS:
        c->lr = 0.1f, c->momentum = 0.9f, c->lars_eta = 0.001f, c->weight_decay = 1e-5f;
        break;
    }
}

const char *optim_name(enum optim_kind kind) { return optim_names[kind]; }

int optim_parse(const char *name, enum optim_kind *kind)
{
    for (int i = 0; i < (int)(sizeof optim_names / sizeof *optim_names); i++)
        if (strcmp(name, optim_names[i]) == 0) {
            *kind = (enum optim_kind)i;
            return 0;
        }
    return -1;
}

int optim_state_per_param(enum optim_kind kind)
{
    switch (kind) {
    case OPTIM_ADAM: return 2;
    case OPTIM_RMSPROP: return 2;
    case OPTIM_SGD: return 1;
    case OPTIM_LARS: return 1;
    }
    return 0;
}

void optim_state_init(enum optim_kind kind, float *state, size_t n)
{
    memset(state, 0, (size_t)optim_state_per_param(kind) * n * sizeof(float));
    /* RMSProp's mean square starts at 1, as in TF1's RMSPropOptimizer that the EfficientNet reference
     * trains with: from 0, the first steps are lr·g/√(0.1·g²) ≈ 3·lr in every weight at once, whatever
     * the gradient's size (measured: effnet-b0's loss rose over its first 40 steps). */
    if (kind == OPTIM_RMSPROP)
        for (size_t i = 0; i < n; i++) state[i] = 1.0f;
}

float optim_lr_at(const struct optim_config *c, long step)
{
    if (c->warmup_steps > 0 && step <= c->warmup_steps) return c->lr * (float)step / (float)c->warmup_steps;
    long t = step - c->warmup_steps;
    long T = c->total_steps - c->warmup_steps;
    if (T < 1) T = 1;
    if (t > T) t = T;
    double frac = (double)t / (double)T;
    switch (c->schedule) {
    case LR_CONSTANT: return c->lr;
    case LR_EXPONENTIAL: {
        long ds = c->decay_steps > 0 ? c->decay_steps : 1;
        return c->lr * powf(c->decay_rate, (float)t / (float)ds);
    }
    case LR_POLYNOMIAL: return (float)((c->lr - c->final_lr) * pow(1.0 - frac, c->power) + c->final_lr);
    case LR_COSINE: return (float)(c->final_lr + 0.5 * (c->lr - c->final_lr) * (1.0 + cos(M_PI * frac)));
    }
    return c->lr;
}

/* Finds the segment holding element i (segments are sorted by offset). */
static int seg_find(const struct optim_segment *segs, int n_segs, size_t i)
{
    int lo = 0, hi = n_segs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (segs[mid].off <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Runs the body (given as the variadic argument, so commas inside it are fine) for each piece
 * [p_lo,p_hi) of [lo,hi) cut at segment boundaries, with p_nd (no_decay) and p_seg (segment index). */
#define FOR_EACH_PIECE(segs, n_segs, lo, hi, ...)                                      \
    do {                                                                                \
        if ((segs) == NULL || (n_segs) == 0) {                                          \
            size_t p_lo = (lo), p_hi = (hi);                                            \
            int p_nd = 0, p_seg = -1;                                                   \
            (void)p_seg;                                                                \
            __VA_ARGS__;                                                                     \
        } else {                                                                        \
            for (int p_seg = seg_find(segs, n_segs, lo); p_seg < (n_segs); p_seg++) {   \
                size_t s0 = (segs)[p_seg].off, s1 = s0 + (segs)[p_seg].n;               \
                size_t p_lo = s0 > (lo) ? s0 : (lo), p_hi = s1 < (hi) ? s1 : (hi);      \
                if (p_lo >= (hi)) break;                                                \
                if (p_lo >= p_hi) continue;                                             \
                int p_nd = (segs)[p_seg].no_decay;                                      \
                __VA_ARGS__;                                                                 \
            }                                                                           \
        }                                                                               \
    } while (0)

#ifdef TB_SIMD_AVX2
/* Adam's constants in 8 lanes. */
struct adam_v8c {
    __m256 d, c1, c2, alpha, eps;
    int decay; /* d != 0: without weight decay the gradient is used as it is (one FMA less) */
};

static inline struct adam_v8c adam_v8c(float d, float b1, float b2, float alpha, float eps)
{
    return (struct adam_v8c){_mm256_set1_ps(d), _mm256_set1_ps(1.0f - b1), _mm256_set1_ps(1.0f - b2),
                             _mm256_set1_ps(alpha), _mm256_set1_ps(eps), d != 0.0f};
}

/* One Adam step of 8 elements, the one instruction sequence every Adam kernel runs (so fused and
 * unfused updates stay bitwise equal). The step α·m/(√v + ε) multiplies by a reciprocal from rcpps and
 * one Newton step (within ~2 ulp) instead of dividing: vsqrtps and vdivps share the divider, which made
 * the update compute-bound at ~8 cycles per 8 elements (update of 84k weights in L3: 27.7 → 22.5 µs on
 * this machine; a rsqrtps square root as well was slower, 29 µs: it moves the work onto the FMA pipes). */
static inline __attribute__((always_inline)) __m256 adam_v8(const struct adam_v8c *k, __m256 p, __m256 g,
                                                             __m256 *m, __m256 *v)
{
    if (k->decay) g = _mm256_fmadd_ps(k->d, p, g);
    *m = _mm256_fmadd_ps(_mm256_sub_ps(g, *m), k->c1, *m);
    *v = _mm256_fmadd_ps(_mm256_fmsub_ps(g, g, *v), k->c2, *v);
    const __m256 den = _mm256_add_ps(_mm256_sqrt_ps(*v), k->eps);
    __m256 r = _mm256_rcp_ps(den);
    r = _mm256_mul_ps(r, _mm256_fnmadd_ps(den, r, _mm256_set1_ps(2.0f)));
    return _mm256_fnmadd_ps(_mm256_mul_ps(k->alpha, *m), r, p);
}
#endif

/* Adam on [lo,hi): every element goes through the same instructions (masked vector tail), so the
 * result is bitwise independent of where a thread's slice starts or ends. */
static void adam_span(float *restrict p, const float *restrict g_, float *restrict m, float *restrict v, size_t lo,
                      size_t hi, float d, float b1, float b2, float alpha, float eps)
{
#ifdef TB_SIMD_AVX2
    /* Full vectors use plain loads/stores (vmaskmov is microcoded on Zen); the tail goes through the
     * same arithmetic on masked loads, so every element sees identical instructions. */
    const struct adam_v8c k8 = adam_v8c(d, b1, b2, alpha, eps);
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m256 pi = _mm256_loadu_ps(p + i), gi = _mm256_loadu_ps(g_ + i);
        __m256 mi = _mm256_loadu_ps(m + i), vi = _mm256_loadu_ps(v + i);
        pi = adam_v8(&k8, pi, gi, &mi, &vi);
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(p + i, pi);
    }
    if (i < hi) {
        const __m256i k = simd_tail_mask((int)(hi - i));
        __m256 pi = _mm256_maskload_ps(p + i, k), gi = _mm256_maskload_ps(g_ + i, k);
        __m256 mi = _mm256_maskload_ps(m + i, k), vi = _mm256_maskload_ps(v + i, k);
        pi = adam_v8(&k8, pi, gi, &mi, &vi);
        _mm256_maskstore_ps(m + i, k, mi);
        _mm256_maskstore_ps(v + i, k, vi);
        _mm256_maskstore_ps(p + i, k, pi);
    }
#else
    for (size_t i = lo; i < hi; i++) {
        float g = fmaf(d, p[i], g_[i]);
        float mi = fmaf(g - m[i], 1.0f - b1, m[i]);
        float vi = fmaf(fmaf(g, g, -v[i]), 1.0f - b2, v[i]);
        m[i] = mi, v[i] = vi;
        p[i] -= alpha * mi / (sqrtf(vi) + eps);
    }
#endif
}

static double sumsq(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

void optim_lars_trust(const struct optim_config *c, const float *params, const float *grads,
                      const struct optim_segment *segs, int n_segs, float *trust, int ith, int nth)
{
    size_t lo, hi;
    tb_slice((size_t)n_segs, ith, nth, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
        const struct optim_segment *sg = &segs[k];
        trust[k] = 1.0f;
        if (sg->no_decay) continue;
        double wn = sqrt(sumsq(params + sg->off, sg->n)), gn = sqrt(sumsq(grads + sg->off, sg->n));
        if (wn > 0.0 && gn > 0.0) trust[k] = (float)(c->lars_eta * wn / (gn + c->weight_decay * wn));
    }
}

void optim_update(const struct optim_config *c, float *params, const float *grads, float *state, size_t n,
                  const struct optim_segment *segs, int n_segs, const float *trust_per_seg, long step, int ith,
                  int nth)
{
    size_t lo, hi;
    tb_slice(n, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const float lr = optim_lr_at(c, step);
    const float wd = c->weight_decay;
    switch (c->kind) {
    case OPTIM_ADAM: {
        const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
        const float alpha = optim_adam_alpha(c, step);
        float *m = state, *v = state + n;
        FOR_EACH_PIECE(segs, n_segs, lo, hi, {
            adam_span(params, grads, m, v, p_lo, p_hi, p_nd ? 0.0f : wd, b1, b2, alpha, eps);
        });
        break;
    }
    case OPTIM_SGD: { /* PyTorch form: buf = μ·buf + g; p -= lr·buf */
        const float mu = c->momentum;
        float *buf = state;
        FOR_EACH_PIECE(segs, n_segs, lo, hi, {
            const float d = p_nd ? 0.0f : wd;
            for (size_t i = p_lo; i < p_hi; i++) {
                float g = grads[i] + d * params[i];
                buf[i] = mu * buf[i] + g;
                params[i] -= lr * buf[i];
            }
        });
        break;
    }
    case OPTIM_RMSPROP: { /* TF form: ms = ρ·ms + (1−ρ)g²; mom = μ·mom + lr·g/√(ms+ε); p −= mom */
        const float rho = c->rho, mu = c->momentum, eps = c->eps;
        float *ms = state, *mom = state + n;
        FOR_EACH_PIECE(segs, n_segs, lo, hi, {
            const float d = p_nd ? 0.0f : wd;
            for (size_t i = p_lo; i < p_hi; i++) {
                float g = grads[i] + d * params[i];
                ms[i] = rho * ms[i] + (1.0f - rho) * g * g;
                mom[i] = mu * mom[i] + lr * g / sqrtf(ms[i] + eps);
                params[i] -= mom[i];
            }
        });
        break;
    }
    case OPTIM_LARS: { /* trust per tensor from optim_lars_trust (computed before any update) */
        const float mu = c->momentum;
        float *buf = state;
        FOR_EACH_PIECE(segs, n_segs, lo, hi, {
            const float trust = (p_nd || p_seg < 0 || !trust_per_seg) ? 1.0f : trust_per_seg[p_seg];
            const float d = p_nd ? 0.0f : wd;
            for (size_t i = p_lo; i < p_hi; i++) {
                float g = grads[i] + d * params[i];
                buf[i] = mu * buf[i] + lr * trust * g;
                params[i] -= buf[i];
            }
        });
        break;
    }
    }
}

#ifdef TB_SIMD_AVX2
/* Row r of optim_adam_outer over the thread's columns (n of them, from pointer offset 0), y += a·w_new
 * when fwd. A constant fwd after inlining: rows the next forward skips pay nothing for it. */
static inline __attribute__((always_inline)) void adam_outer_row(const struct adam_v8c *k8, float *pr, float *mr,
                                                                 float *vr, const float *dy, float xr_s, int n,
                                                                 __m256i tail, const int fwd, float a, float *y)
{
    const __m256 xr = _mm256_set1_ps(xr_s), av = _mm256_set1_ps(a);
    int o = 0;
    for (; o + 8 <= n; o += 8) {
        __m256 pi = _mm256_loadu_ps(pr + o), mi = _mm256_loadu_ps(mr + o), vi = _mm256_loadu_ps(vr + o);
        pi = adam_v8(k8, pi, _mm256_mul_ps(xr, _mm256_loadu_ps(dy + o)), &mi, &vi);
        _mm256_storeu_ps(mr + o, mi);
        _mm256_storeu_ps(vr + o, vi);
        _mm256_storeu_ps(pr + o, pi);
        if (fwd) _mm256_storeu_ps(y + o, _mm256_fmadd_ps(av, pi, _mm256_loadu_ps(y + o)));
    }
    if (o < n) {
        __m256 pi = _mm256_maskload_ps(pr + o, tail), mi = _mm256_maskload_ps(mr + o, tail);
        __m256 vi = _mm256_maskload_ps(vr + o, tail);
        pi = adam_v8(k8, pi, _mm256_mul_ps(xr, _mm256_maskload_ps(dy + o, tail)), &mi, &vi);
        _mm256_maskstore_ps(mr + o, tail, mi);
        _mm256_maskstore_ps(vr + o, tail, vi);
        _mm256_maskstore_ps(pr + o, tail, pi);
        if (fwd) _mm256_maskstore_ps(y + o, tail, _mm256_fmadd_ps(av, pi, _mm256_maskload_ps(y + o, tail)));
    }
}

/* optim_adam_outer over whole rows of at most 16 columns (the 10-class layer), 16 rows at a time: the
 * outer-product gradient written out flat, then adam_span over the rows as one span and the forward
 * from the updated rows. Row by row, two vectors a row with masked tails ran at 34 cycles a vector
 * against 7 for full ones (2 µs for 64 rows × 10). Same arithmetic per element: g = x·dy, one rounding. */
static void adam_outer_narrow(float *w, float *m, float *v, const float *x, const float *dy, int rows, int cols,
                              float d, float b1, float b2, float alpha, float eps, const float *xn, float *y)
{
    enum { R = 16 };
    float g[R * 16];
    for (int r0 = 0; r0 < rows; r0 += R) {
        const int nr = rows - r0 < R ? rows - r0 : R;
        for (int r = 0; r < nr; r++)
            for (int o = 0; o < cols; o++) g[r * cols + o] = x[r0 + r] * dy[o];
        const size_t off = (size_t)r0 * (size_t)cols;
        float *pw = w + off;
        adam_span(pw, g, m + off, v + off, 0, (size_t)(nr * cols), d, b1, b2, alpha, eps);
        if (xn)
            for (int r = 0; r < nr; r++)
                if (xn[r0 + r] != 0.0f)
                    for (int o = 0; o < cols; o++) y[o] = fmaf(xn[r0 + r], pw[r * cols + o], y[o]);
    }
}
#endif

float optim_adam_alpha(const struct optim_config *c, long step)
{
    const float lr = optim_lr_at(c, step);
    return (float)(lr * sqrt(1.0 - pow(c->beta2, (double)step)) / (1.0 - pow(c->beta1, (double)step)));
}

void optim_adam_outer(const struct optim_config *c, float alpha, float *w, float *m, float *v, const float *x,
                      const float *dy, int rows, int cols, int c0, int c1, float wd, const float *xn, float *y)
{
    if (c0 >= c1) return;
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
#ifdef TB_SIMD_AVX2
    const int n = c1 - c0;
    /* Same instruction sequence per element as adam_span after dense_backward_params, whose gradient is
     * fma(x, dy, 0) = x·dy exactly: the fused step is bitwise the unfused one; and the forward's
     * fma(xn, w, y) per element is simd_axpy's, which dense_forward runs for a batch of one. */
    if (n == cols && cols <= 16) {
        adam_outer_narrow(w, m, v, x, dy, rows, cols, wd, b1, b2, alpha, eps, xn, y);
        return;
    }
    const struct adam_v8c k8 = adam_v8c(wd, b1, b2, alpha, eps);
    const __m256i tail = simd_tail_mask(n % 8);
    for (int r = 0; r < rows; r++) {
        const size_t off = (size_t)r * (size_t)cols + (size_t)c0;
        const float a = xn ? xn[r] : 0.0f;
        if (a != 0.0f) adam_outer_row(&k8, w + off, m + off, v + off, dy + c0, x[r], n, tail, 1, a, y + c0);
        else adam_outer_row(&k8, w + off, m + off, v + off, dy + c0, x[r], n, tail, 0, 0.0f, NULL);
    }
#else
    for (int r = 0; r < rows; r++)
        for (int o = c0; o < c1; o++) {
            size_t i = (size_t)r * (size_t)cols + (size_t)o;
            float g = fmaf(wd, w[i], x[r] * dy[o]);
            float mi = fmaf(g - m[i], 1.0f - b1, m[i]);
            float vi = fmaf(fmaf(g, g, -v[i]), 1.0f - b2, v[i]);
            m[i] = mi, v[i] = vi;
            w[i] -= alpha * mi / (sqrtf(vi) + eps);
            if (xn && xn[r] != 0.0f) y[o] = fmaf(xn[r], w[i], y[o]);
        }
#endif
}
