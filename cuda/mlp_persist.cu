// mlp_persist.cu — the batch-1 dense chain's runs of steps in one cooperative kernel (mlp_persist.h).
// A block keeps its rows of every layer it holds a chunk of — weights, Adam's m and v, and the rows' inputs —
// in shared memory for the whole run; what crosses blocks goes through global memory, read with __ldcg (L2,
// never a stale L1 line), after a grid barrier.
#include "mlp_persist.h"

#include "cuda_util.h"

#include "softmax_ce_row.h"

#include <cooperative_groups.h>
#include <stdio.h>
#include <stdlib.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr size_t kReplicateFloats = 16384; // a replicated last layer's shared memory in every block, at most (64 KiB)

// Rows [*r0, *r0 + return) of chunk c of `chunks` over `in` rows (balanced, contiguous).
__host__ __device__ inline int chunk_rows(int in, int chunks, int c, int *r0)
{
    const int q = in / chunks, r = in % chunks;
    *r0 = c * q + (c < r ? c : r);
    return q + (c < r ? 1 : 0);
}

// The chunk of layer L that block b of G holds, or -1.
__host__ __device__ inline int chunk_of(const tb_cuda_mlp_layer &L, int b, int G)
{
    const int c = ((b - L.first) % G + G) % G;
    return c < L.chunks ? c : -1;
}

// Shared-memory floats block b of G holds of layer L: its chunk's weights, m and v, and the rows' inputs (0: none).
__host__ __device__ inline size_t chunk_floats(const tb_cuda_mlp_layer &L, int b, int G)
{
    const int c = chunk_of(L, b, G);
    int r0;
    const size_t nr = c < 0 ? 0 : (size_t)chunk_rows(L.in, L.chunks, c, &r0);
    return 3 * nr * L.out + nr;
}

// optim_cuda.cu's Adam element, the same expression (so the same bits from the same inputs).
__device__ inline void adam(float &p, float &m, float &v, float g, float d, float b1, float b2, float eps, float alpha)
{
    g = fmaf(d, p, g);
    const float mi = fmaf(g - m, 1.0f - b1, m);
    const float vi = fmaf(fmaf(g, g, -v), 1.0f - b2, v);
    m = mi, v = vi;
    p -= alpha * mi / (sqrtf(vi) + eps);
}

// Σ_c part[c·stride + r] over c < chunks by one warp (lane = this thread's lane): lane k sums chunks k, k+32,
// ..., then a fixed butterfly; every lane returns the total (the same bits each run, and from global memory
// (kGlobal: read through L2) or a copy in shared memory alike).
template <bool kGlobal = true>
__device__ inline float warp_chunk_sum(const float *part, int chunks, int stride, int r, int lane)
{
    float s = 0.0f;
    for (int c = lane; c < chunks; c += 32) s += kGlobal ? __ldcg(&part[(size_t)c * stride + r]) : part[(size_t)c * stride + r];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

// Shared-memory floats every block holds of the last layer L when it is replicated (tb_cuda_mlp_plan's
// replicate_last): its whole weights, m and v, its inputs, the layer below's (P's) chunk sums staged, the
// chunks' partial products, and δ for the layer below.
__host__ __device__ inline size_t replicated_floats(const tb_cuda_mlp_layer &L, const tb_cuda_mlp_layer &P)
{
    return 3 * (size_t)L.in * L.out + L.in + (size_t)P.chunks * P.out + (size_t)L.chunks * L.out + L.in;
}

// The step's barrier: the cluster's (one cluster holds every block) or the cooperative grid's.
__device__ inline void step_barrier(const tb_cuda_mlp_plan &p, cg::grid_group &grid)
{
    if (p.cluster) cg::this_cluster().sync();
    else grid.sync();
}

__global__ void __launch_bounds__(kThreads) mlp_persist_k(tb_cuda_mlp_plan p, tb_cuda_loop_dev d, long long k0,
                                                          long long n)
{
    extern __shared__ float sm[];
    __shared__ float sd[TB_CUDA_MLP_MAX_WIDTH], z[TB_CUDA_MLP_MAX_WIDTH];
    __shared__ sce_row row;
    cg::grid_group grid = cg::this_grid();
    const int b = blockIdx.x, G = gridDim.x, t = threadIdx.x, D = p.n_layers, X = p.replicate_last ? D - 1 : D;
    // This block's chunks: rows, and where their weights, moments and inputs sit in shared memory. Layer X (the
    // last, when replicated; none otherwise) is every block's whole: all its rows.
    float *W[TB_CUDA_MLP_MAX_LAYERS], *M[TB_CUDA_MLP_MAX_LAYERS], *V[TB_CUDA_MLP_MAX_LAYERS], *A[TB_CUDA_MLP_MAX_LAYERS];
    int C[TB_CUDA_MLP_MAX_LAYERS], R0[TB_CUDA_MLP_MAX_LAYERS], NR[TB_CUDA_MLP_MAX_LAYERS];
    float *q = sm;
    for (int l = 0; l < D; l++) {
        const tb_cuda_mlp_layer &L = p.L[l];
        C[l] = chunk_of(L, b, G), NR[l] = 0, R0[l] = 0;
        W[l] = M[l] = V[l] = A[l] = q;
        if (l == X) C[l] = 0;
        if (C[l] < 0) continue;
        NR[l] = l == X ? L.in : chunk_rows(L.in, L.chunks, C[l], &R0[l]);
        const size_t e = (size_t)NR[l] * L.out, o = (size_t)R0[l] * L.out;
        W[l] = q, M[l] = q + e, V[l] = q + 2 * e, A[l] = q + 3 * e;
        q += 3 * e + NR[l];
        for (size_t i = t; i < e; i += kThreads) W[l][i] = L.w[o + i], M[l][i] = L.mw[o + i], V[l][i] = L.vw[o + i];
    }
    // The replicated layer's scratch: the layer below's chunk sums, its own chunks' partial products, δ below.
    float *stage = q, *pp = q, *dn = q;
    if (X < D) stage = q, pp = stage + (size_t)p.L[X - 1].chunks * p.L[X - 1].out, dn = pp + (size_t)p.L[X].chunks * p.L[X].out;
    __syncthreads();
    for (long long k = k0; k < k0 + n; k++) {
        const long long kk = k < d.steps ? k : d.steps - 1; // as loop_gather_k: past the table repeats its last
        const uint8_t *x = d.x_all + (size_t)kk * p.L[0].in;
        const int y = d.y_all[kk];
        const float alpha = d.alpha_all[kk];
        // Forward: each chunk's input rows (the pixels' affine, or the previous layer's chunk sums + bias and
        // ReLU), then its partial product for every output.
        for (int l = 0; l < D; l++) {
            const tb_cuda_mlp_layer &L = p.L[l];
            if (l == X) { // every block: all the inputs, then each chunk's partial product as its owner's would be
                const tb_cuda_mlp_layer &P = p.L[l - 1];
                for (int i = t; i < P.chunks * P.out; i += kThreads) stage[i] = __ldcg(&P.part[i]); // all in flight
                __syncthreads();
                for (int i = t >> 5; i < L.in; i += kWarps) {
                    const float s = warp_chunk_sum<false>(stage, P.chunks, P.out, i, t & 31) + __ldcg(&P.b[i]);
                    if ((t & 31) == 0) A[l][i] = P.relu ? (s > 0.0f ? s : 0.0f) : s;
                }
                __syncthreads();
                for (int cj = t; cj < L.chunks * L.out; cj += kThreads) {
                    const int c = cj / L.out, j = cj % L.out;
                    int r0;
                    const int nr = chunk_rows(L.in, L.chunks, c, &r0);
                    float acc = 0.0f;
                    for (int i = 0; i < nr; i++) acc = fmaf(A[l][r0 + i], W[l][(size_t)(r0 + i) * L.out + j], acc);
                    pp[cj] = acc;
                }
                __syncthreads(); // no grid barrier: the logits' parts are the block's own
                continue;
            }
            if (NR[l]) {
                if (l == 0) {
                    for (int i = t; i < NR[l]; i += kThreads) A[l][i] = (float)x[R0[l] + i] * p.scale + p.shift;
                } else { // a warp a row: its lanes load the chunk sums at once (one L2 round trip, not one a chunk)
                    const tb_cuda_mlp_layer &P = p.L[l - 1];
                    for (int i = t >> 5; i < NR[l]; i += kWarps) {
                        const int r = R0[l] + i;
                        const float s = warp_chunk_sum(P.part, P.chunks, P.out, r, t & 31) + __ldcg(&P.b[r]);
                        if ((t & 31) == 0) A[l][i] = P.relu ? (s > 0.0f ? s : 0.0f) : s;
                    }
                }
                __syncthreads();
                for (int j = t; j < L.out; j += kThreads) {
                    float acc = 0.0f;
                    for (int i = 0; i < NR[l]; i++) acc = fmaf(A[l][i], W[l][(size_t)i * L.out + j], acc);
                    L.part[(size_t)C[l] * L.out + j] = acc;
                }
            }
            step_barrier(p, grid);
        }
        // Backward, last layer first: δ of the layer's outputs (the loss's gradient, or what the layer above
        // wrote), then per row: (old w)·δ for the layer below, masked by its ReLU, and the row's Adam update.
        for (int l = D - 1; l >= 0; l--) {
            const tb_cuda_mlp_layer &L = p.L[l];
            if (l == D - 1) { // every block forms the logits and the loss's gradient itself
                for (int j = t >> 5; j < L.out; j += kWarps) {
                    const float s = (l == X ? warp_chunk_sum<false>(pp, L.chunks, L.out, j, t & 31)
                                            : warp_chunk_sum(L.part, L.chunks, L.out, j, t & 31)) +
                                    __ldcg(&L.b[j]);
                    if ((t & 31) == 0) z[j] = s;
                }
                __syncthreads();
                if (t == 0) {
                    row = sce_row_stats(z, L.out);
                    if (b == 0 && k < d.steps) d.loss_all[k] = (double)sce_loss(z, L.out, y, p.smoothing, &row);
                }
                __syncthreads();
                for (int j = t; j < L.out; j += kThreads) {
                    sd[j] = sce_grad(z[j], j == y, p.smoothing, L.out, 1.0f, &row);
                    if (b == 0) L.delta[j] = sd[j]; // for the bias update
                }
            } else if (l + 1 == X) { // δ the replicated layer above left in this block
                for (int j = t; j < L.out; j += kThreads) sd[j] = dn[j];
            } else {
                for (int j = t; j < L.out; j += kThreads) sd[j] = __ldcg(&L.delta[j]);
            }
            __syncthreads();
            const int warp = t >> 5, lane = t & 31;
            for (int i = warp; i < NR[l]; i += kWarps) { // warp-uniform: the shuffles below see every lane
                float *w = W[l] + (size_t)i * L.out, *m = M[l] + (size_t)i * L.out, *v = V[l] + (size_t)i * L.out;
                const float ai = A[l][i];
                float s = 0.0f;
                for (int j = lane; j < L.out; j += 32) {
                    float wj = w[j], mj = m[j], vj = v[j];
                    s = fmaf(wj, sd[j], s);
                    adam(wj, mj, vj, ai * sd[j], L.wd, p.b1, p.b2, p.eps, alpha);
                    w[j] = wj, m[j] = mj, v[j] = vj;
                }
                if (l > 0) {
                    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                    const float dv = p.L[l - 1].relu && !(ai > 0.0f) ? 0.0f : s;
                    if (lane == 0 && l == X) dn[i] = dv;
                    if (lane == 0 && (l != X || b == 0)) p.L[l - 1].delta[R0[l] + i] = dv; // X: for the biases
                }
            }
            if (l == X) __syncthreads(); // the layer below reads dn, this block's own
            else if (l > 0) step_barrier(p, grid);
        }
        // The biases (their gradient is δ itself), once every δ is written: one element a thread over the
        // grid, layer after layer, so all their loads are in flight at once.
        for (int q = b * kThreads + t, l = 0, base = 0; l < D; base += p.L[l].out, l++)
            for (; q - base < p.L[l].out; q += G * kThreads) {
                const tb_cuda_mlp_layer &L = p.L[l];
                const int j = q - base;
                float pb = __ldcg(&L.b[j]), mb = __ldcg(&L.mb[j]), vb = __ldcg(&L.vb[j]);
                adam(pb, mb, vb, __ldcg(&L.delta[j]), 0.0f, p.b1, p.b2, p.eps, alpha);
                L.b[j] = pb, L.mb[j] = mb, L.vb[j] = vb;
            }
        __syncthreads(); // the next step's first layer rewrites A[0] and reads the updated rows
    }
    for (int l = 0; l < D; l++) {
        if (!NR[l] || (l == X && b != 0)) continue; // the replicated layer: every block holds the same values
        const tb_cuda_mlp_layer &L = p.L[l];
        const size_t e = (size_t)NR[l] * L.out, o = (size_t)R0[l] * L.out;
        for (size_t i = t; i < e; i += kThreads) L.w[o + i] = W[l][i], L.mw[o + i] = M[l][i], L.vw[o + i] = V[l][i];
    }
}

} // namespace

extern "C" size_t tb_cuda_mlp_prepare(struct tb_cuda_mlp_plan *p, const char **why)
{
    *why = NULL;
    int dev = 0, sms = 0, coop = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        *why = "the device's attributes could not be read";
        return 0;
    }
    if (!coop) {
        *why = "the device has no cooperative launch";
        return 0;
    }
    if (p->n_layers < 2 || p->n_layers > TB_CUDA_MLP_MAX_LAYERS) {
        *why = "not 2 to 8 dense layers";
        return 0;
    }
    // Rows a chunk: TB_CUDA_MLP_ROWS by default; the environment's TB_CUDA_MLP_ROWS (1..1024) for a sweep
    // (fewer, larger chunks: fewer blocks at each grid barrier, more work and shared memory a block).
    int rows = TB_CUDA_MLP_ROWS;
    const char *env = getenv("TB_CUDA_MLP_ROWS");
    const int env_rows = env ? atoi(env) : 0, cluster = tb_cuda_env_is("TB_CUDA_MLP_SYNC", "cluster");
    if (cluster) { /* at most 16 chunks a layer: one cluster of blocks */
        int widest = 1;
        for (int l = 0; l < p->n_layers; l++) widest = p->L[l].in > widest ? p->L[l].in : widest;
        rows = (widest + 15) / 16;
    }
    if (env_rows >= 1 && env_rows <= 1024) rows = env_rows;
    int G = 1;
    for (int l = 0; l < p->n_layers; l++) {
        tb_cuda_mlp_layer *L = &p->L[l];
        if (L->out > TB_CUDA_MLP_MAX_WIDTH || L->in < 1 || L->out < 1) {
            *why = "a layer wider than the kernel's 1024 outputs";
            return 0;
        }
        const int c = (L->in + rows - 1) / rows;
        L->chunks = c < sms ? c : sms;
        G = L->chunks > G ? L->chunks : G;
    }
    // Where each layer's chunks start: layer by layer, the offset that keeps the fullest block's shared memory
    // least (the blocks' floats so far in load[]), so the narrow layers land on different blocks. Placement
    // changes which block holds a chunk, never the order chunks are summed in: the same bits either way.
    size_t scratch = 0, smem = 0, load[1024] = {0};
    if (G > 1024) {
        *why = "more chunks than the kernel places";
        return 0;
    }
    // The last layer in every block (unless TB_CUDA_MLP_LAST=apart), where it is small: its forward and its
    // backward then need no grid barrier of their own (mnist-mlp's 128x10: 7 barriers a step become 5). Three
    // layers at least: block 0 writes the two last δ the biases' update reads, and only the layer below's
    // backward barrier orders them before it (with two layers none is left).
    const int D = p->n_layers;
    const size_t rep = replicated_floats(p->L[D - 1], p->L[D - 2]);
    p->replicate_last = D >= 3 && !tb_cuda_env_is("TB_CUDA_MLP_LAST", "apart") && rep <= kReplicateFloats;
    for (int l = 0; l < p->n_layers; l++) {
        tb_cuda_mlp_layer *L = &p->L[l];
        if (p->replicate_last && l == D - 1) {
            L->first = 0;
            for (int b = 0; b < G; b++) load[b] += rep, smem = load[b] > smem ? load[b] : smem;
            scratch += (size_t)L->chunks * L->out + L->out;
            continue;
        }
        size_t best = (size_t)-1;
        int best_first = 0;
        for (int first = 0; first < G; first++) {
            size_t worst = 0;
            L->first = first;
            for (int b = 0; b < G; b++) {
                const size_t f = load[b] + chunk_floats(*L, b, G);
                worst = f > worst ? f : worst;
            }
            if (worst < best) best = worst, best_first = first;
        }
        L->first = best_first;
        smem = best;
        for (int b = 0; b < G; b++) load[b] += chunk_floats(*L, b, G);
        scratch += (size_t)L->chunks * L->out + L->out;
    }
    smem *= sizeof(float);
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, mlp_persist_k) != cudaSuccess || smem + fa.sharedSizeBytes > (size_t)optin ||
        cudaFuncSetAttribute(mlp_persist_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) {
        (void)cudaGetLastError();
        *why = "its weights do not fit the blocks' shared memory";
        return 0;
    }
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mlp_persist_k, kThreads, smem) != cudaSuccess ||
        per_sm * sms < G) {
        (void)cudaGetLastError();
        *why = "its blocks cannot all be resident at once";
        return 0;
    }
    p->blocks = G;
    p->smem = smem;
    p->cluster = 0;
    if (cluster) {
        const char *no = NULL;
        int nc = 0;
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)G, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)G), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem;
        cfg.attrs = attr, cfg.numAttrs = 1;
        if (G > 16) no = "more than 16 blocks";
        else if (G > 8 && cudaFuncSetAttribute(mlp_persist_k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
                              cudaSuccess)
            no = "no cluster above 8 blocks on this device";
        else if (cudaOccupancyMaxActiveClusters(&nc, (const void *)mlp_persist_k, &cfg) != cudaSuccess || nc < 1)
            no = "the cluster does not fit the device";
        (void)cudaGetLastError();
        if (no) fprintf(stderr, "cuda: TB_CUDA_MLP_SYNC=cluster: %s: %d blocks with grid barriers instead\n", no, G);
        else p->cluster = 1;
    }
    return scratch;
}

extern "C" void tb_cuda_mlp_bind(struct tb_cuda_mlp_plan *p, float *scratch)
{
    for (int l = 0; l < p->n_layers; l++) {
        p->L[l].part = scratch, scratch += (size_t)p->L[l].chunks * p->L[l].out;
        p->L[l].delta = scratch, scratch += p->L[l].out;
    }
}

extern "C" cudaError_t tb_cuda_mlp_run(const struct tb_cuda_mlp_plan *p, struct tb_cuda_loop_dev d, long long k0,
                                       long long n, cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    tb_cuda_mlp_plan pv = *p;
    /* The shared-memory limit is the kernel function's, for the whole process: another plan (another executor)
     * may have set it lower since this one was made. */
    const cudaError_t set = cudaFuncSetAttribute(mlp_persist_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p->smem);
    if (set != cudaSuccess) return set;
    if (p->cluster) { /* one cluster of every block: no cooperative launch needed */
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)p->blocks, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)p->blocks), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = p->smem;
        cfg.stream = s, cfg.attrs = attr, cfg.numAttrs = 1;
        return cudaLaunchKernelEx(&cfg, mlp_persist_k, pv, d, k0, n);
    }
    void *args[] = {&pv, &d, &k0, &n};
    return cudaLaunchCooperativeKernel((const void *)mlp_persist_k, dim3((unsigned)p->blocks), dim3(kThreads), args,
                                       p->smem, s);
}
