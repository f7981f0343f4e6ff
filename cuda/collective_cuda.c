/* collective_cuda.c — see collective_cuda.h. */
#include "collective_cuda.h"

#include "cuda_util.h"
#include "executor_cuda.h"
#include "ops_reduce.h"
#include "status.h"

#ifdef TB_HAVE_NCCL
#include <nccl.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The members on one GPU, in rank order; the first (the GPU's leader) holds the GPU's sum. */
struct cu_gpu {
    int gpu;
    int k;
    int *member;        /* (k) indices into g->ex */
    float **d_bufs;     /* device (k): the members' gradient buffers, for the sum kernel */
    cudaEvent_t *ready; /* (k) each member's stream reached the collective */
    cudaEvent_t summed; /* the leader's stream has the group's sum in every member */
};

struct cu_group {
    int n_gpus;
    struct cu_gpu *gpu;
    size_t n;           /* gradient elements */
#ifdef TB_HAVE_NCCL
    ncclComm_t *comm;   /* (n_gpus) when n_gpus > 1 */
#endif
};

static cudaStream_t stream_of(struct executor_group *g, int member)
{
    return (cudaStream_t)executor_cuda_stream(&g->ex[member]);
}

static float *grads_of(struct executor_group *g, int member)
{
    struct executor_buffer b;
    return executor_buffer(&g->ex[member], TF_GRADS, &b) == TB_OK ? b.data : NULL;
}

static void group_release(struct executor_group *g)
{
    struct cu_group *q = g->state;
    if (!q) return;
#ifdef TB_HAVE_NCCL
    for (int j = 0; q->comm && j < q->n_gpus; j++)
        if (q->comm[j]) ncclCommDestroy(q->comm[j]);
    free(q->comm);
#endif
    for (int j = 0; q->gpu && j < q->n_gpus; j++) {
        struct cu_gpu *G = &q->gpu[j];
        cudaSetDevice(G->gpu);
        for (int m = 0; G->ready && m < G->k; m++)
            if (G->ready[m]) cudaEventDestroy(G->ready[m]);
        if (G->summed) cudaEventDestroy(G->summed);
        if (G->d_bufs) cudaFree(G->d_bufs);
        free(G->ready), free(G->member);
    }
    free(q->gpu);
    free(q);
    g->state = NULL;
}

/* One GPU's pointer table and events, on that GPU. */
static int gpu_init(struct executor_group *g, struct cu_gpu *G)
{
    TB_CU(cudaSetDevice(G->gpu));
    float **h = malloc((size_t)G->k * sizeof *h);
    if (!(G->ready = calloc((size_t)G->k, sizeof *G->ready)) || !h) {
        free(h);
        return tb_error_set(TB_ENOMEM, "cuda: out of memory for a group");
    }
    for (int m = 0; m < G->k; m++) h[m] = grads_of(g, G->member[m]);
    cudaError_t e = cudaMalloc((void **)&G->d_bufs, (size_t)G->k * sizeof *h);
    if (e == cudaSuccess) e = cudaMemcpy(G->d_bufs, h, (size_t)G->k * sizeof *h, cudaMemcpyHostToDevice);
    free(h);
    if (e != cudaSuccess) return tb_cuda_fail(e, "cudaMalloc(group pointers)", __FILE__, __LINE__);
    for (int m = 0; m < G->k; m++) TB_CU(cudaEventCreateWithFlags(&G->ready[m], cudaEventDisableTiming));
    TB_CU(cudaEventCreateWithFlags(&G->summed, cudaEventDisableTiming));
    return TB_OK;
}

int tb_cuda_group_init(struct executor_group *g)
{
    struct cu_group *q = calloc(1, sizeof *q);
    if (!q || !(q->gpu = calloc((size_t)g->n, sizeof *q->gpu))) {
        free(q);
        return tb_error_set(TB_ENOMEM, "cuda: out of memory for a group");
    }
    g->state = q, g->release = group_release;
    struct executor_buffer b;
    int st = executor_buffer(&g->ex[0], TF_GRADS, &b);
    if (st != TB_OK) return st;
    q->n = b.n;
    /* Members by GPU, GPUs in the order their first member appears, members in rank order. */
    for (int r = 0; r < g->n; r++) {
        const int gpu = executor_cuda_gpu(&g->ex[r]);
        int j = 0;
        while (j < q->n_gpus && q->gpu[j].gpu != gpu) j++;
        struct cu_gpu *G = &q->gpu[j];
        if (j == q->n_gpus) {
            q->n_gpus++, G->gpu = gpu;
            if (!(G->member = malloc((size_t)g->n * sizeof *G->member)))
                return tb_error_set(TB_ENOMEM, "cuda: out of memory for a group");
        }
        G->member[G->k++] = r;
    }
#ifndef TB_HAVE_NCCL
    if (q->n_gpus > 1)
        return tb_error_set(TB_EUNSUPPORTED, "cuda: built without NCCL, %d GPUs cannot sum on the devices",
                            q->n_gpus);
#endif
    for (int j = 0; j < q->n_gpus; j++)
        if ((st = gpu_init(g, &q->gpu[j])) != TB_OK) return st;
    if (q->n_gpus == 1) {
        snprintf(g->how, sizeof g->how, "on 1 GPU (a stream each): gradients summed on the GPU in the ring's order");
        return TB_OK;
    }
#ifdef TB_HAVE_NCCL
    int *dev = malloc((size_t)q->n_gpus * sizeof *dev);
    if (!dev || !(q->comm = calloc((size_t)q->n_gpus, sizeof *q->comm))) {
        free(dev);
        return tb_error_set(TB_ENOMEM, "cuda: out of memory for a group");
    }
    for (int j = 0; j < q->n_gpus; j++) dev[j] = q->gpu[j].gpu;
    const ncclResult_t e = ncclCommInitAll(q->comm, q->n_gpus, dev);
    free(dev);
    if (e != ncclSuccess) {
        memset(q->comm, 0, (size_t)q->n_gpus * sizeof *q->comm);
        return tb_error_set(TB_EIO, "cuda: ncclCommInitAll over %d GPUs failed: %s", q->n_gpus, ncclGetErrorString(e));
    }
    int most = 1;
    for (int j = 0; j < q->n_gpus; j++) most = q->gpu[j].k > most ? q->gpu[j].k : most;
    if (most > 1)
        snprintf(g->how, sizeof g->how, "on %d GPUs: each GPU's replicas summed in the ring's order, then NCCL "
                 "all-reduce between GPUs", q->n_gpus);
    else
        snprintf(g->how, sizeof g->how, "on %d GPUs: NCCL all-reduce", q->n_gpus);
#endif
    return TB_OK;
}

/* One GPU's members summed into its leader (all of them when write_all), after every member's work. */
static int gpu_sum(struct executor_group *g, struct cu_gpu *G, size_t n, int write_all)
{
    TB_CU(cudaSetDevice(G->gpu));
    const cudaStream_t lead = stream_of(g, G->member[0]);
    for (int m = 1; m < G->k; m++) {
        TB_CU(cudaEventRecord(G->ready[m], stream_of(g, G->member[m])));
        TB_CU(cudaStreamWaitEvent(lead, G->ready[m], 0));
    }
    tb_cuda_sum_ring_order(G->d_bufs, G->k, n, write_all, lead);
    TB_CU_LAUNCHED("tb_cuda_sum_ring_order");
    return TB_OK;
}

/* The other members of a GPU wait for the leader's sum (copying it first when it is the leader's alone). */
static int gpu_share(struct executor_group *g, struct cu_gpu *G, size_t n, int copy)
{
    TB_CU(cudaSetDevice(G->gpu));
    const cudaStream_t lead = stream_of(g, G->member[0]);
    float *src = grads_of(g, G->member[0]);
    for (int m = 1; copy && m < G->k; m++)
        TB_CU(cudaMemcpyAsync(grads_of(g, G->member[m]), src, n * sizeof(float), cudaMemcpyDeviceToDevice, lead));
    TB_CU(cudaEventRecord(G->summed, lead));
    for (int m = 1; m < G->k; m++) TB_CU(cudaStreamWaitEvent(stream_of(g, G->member[m]), G->summed, 0));
    return TB_OK;
}

int tb_cuda_group_allreduce(struct executor_group *g)
{
    struct cu_group *q = g->state;
    const int one = q->n_gpus == 1;
    int st;
    for (int j = 0; j < q->n_gpus; j++)
        if (q->gpu[j].k > 1 && (st = gpu_sum(g, &q->gpu[j], q->n, one)) != TB_OK) return st;
#ifdef TB_HAVE_NCCL
    if (!one) {
        /* One thread drives every GPU's rank: the calls go inside a group (nccl.h). */
        ncclResult_t e = ncclGroupStart();
        for (int j = 0; j < q->n_gpus && e == ncclSuccess; j++) {
            float *buf = grads_of(g, q->gpu[j].member[0]);
            e = ncclAllReduce(buf, buf, q->n, ncclFloat, ncclSum, q->comm[j], stream_of(g, q->gpu[j].member[0]));
        }
        const ncclResult_t e2 = ncclGroupEnd();
        if (e == ncclSuccess) e = e2;
        if (e != ncclSuccess) return tb_error_set(TB_EIO, "cuda: ncclAllReduce failed: %s", ncclGetErrorString(e));
    }
#endif
    for (int j = 0; j < q->n_gpus; j++)
        if (q->gpu[j].k > 1 && (st = gpu_share(g, &q->gpu[j], q->n, !one)) != TB_OK) return st;
    return TB_OK;
}
