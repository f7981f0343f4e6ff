/* prefetch_cuda.c — see prefetch_cuda.h. */
#include "prefetch_cuda.h"

#include "cuda_util.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

struct pf_slot {
    uint8_t *h;                  /* pinned: pixels, then labels at h + lab_off */
    uint8_t *dx;                 /* device pixels */
    int32_t *dy;                 /* device labels */
    cudaEvent_t uploaded, taken; /* on the copy stream; on the taking stream */
    int full;                    /* holds a pass not taken yet */
    const uint8_t *x;            /* the pass it holds: the caller's pointers, count and step */
    const int32_t *y;
    int n;
    long step;
};

struct tb_cuda_prefetch {
    cudaStream_t copy;
    struct pf_slot *slot;
    int n_slots, next, n_max;
    size_t per_in, lab_off;
};

void tb_cuda_prefetch_destroy(struct tb_cuda_prefetch *pf)
{
    if (!pf) return;
    if (pf->copy) cudaStreamSynchronize(pf->copy);
    for (int k = 0; pf->slot && k < pf->n_slots; k++) {
        struct pf_slot *s = &pf->slot[k];
        if (s->taken) cudaEventSynchronize(s->taken);
        if (s->h) cudaFreeHost(s->h);
        if (s->dx) cudaFree(s->dx);
        if (s->dy) cudaFree(s->dy);
        if (s->uploaded) cudaEventDestroy(s->uploaded);
        if (s->taken) cudaEventDestroy(s->taken);
    }
    free(pf->slot);
    if (pf->copy) cudaStreamDestroy(pf->copy);
    free(pf);
}

/* Everything a slot needs, allocated once. */
static int slot_init(struct tb_cuda_prefetch *pf, struct pf_slot *s)
{
    const size_t bx = (size_t)pf->n_max * pf->per_in, by = (size_t)pf->n_max * sizeof(int32_t);
    TB_CU(cudaMallocHost((void **)&s->h, pf->lab_off + by));
    TB_CU(cudaMalloc((void **)&s->dx, bx ? bx : 1));
    TB_CU(cudaMalloc((void **)&s->dy, by));
    TB_CU(cudaEventCreateWithFlags(&s->uploaded, cudaEventDisableTiming));
    TB_CU(cudaEventCreateWithFlags(&s->taken, cudaEventDisableTiming));
    return TB_OK;
}

int tb_cuda_prefetch_create(struct tb_cuda_prefetch **out, int slots, int n_max, size_t per_in)
{
    *out = NULL;
    struct tb_cuda_prefetch *pf = calloc(1, sizeof *pf);
    if (!pf || !(pf->slot = calloc((size_t)slots, sizeof *pf->slot))) {
        free(pf);
        return tb_error_set(TB_ENOMEM, "cuda: out of memory for --prefetch");
    }
    pf->n_slots = slots, pf->n_max = n_max, pf->per_in = per_in;
    pf->lab_off = ((size_t)n_max * per_in + 15) / 16 * 16;
    int st = TB_OK;
    const cudaError_t e = cudaStreamCreateWithFlags(&pf->copy, cudaStreamNonBlocking);
    if (e != cudaSuccess) st = tb_cuda_fail(e, "cudaStreamCreate(copy stream)", __FILE__, __LINE__);
    for (int k = 0; k < slots && st == TB_OK; k++) st = slot_init(pf, &pf->slot[k]);
    if (st != TB_OK) {
        tb_cuda_prefetch_destroy(pf);
        return st;
    }
    *out = pf;
    return TB_OK;
}

int tb_cuda_prefetch_put(struct tb_cuda_prefetch *pf, const uint8_t *x, const int32_t *y, int n, long step)
{
    TB_ASSERT(n >= 1 && n <= pf->n_max);
    struct pf_slot *s = &pf->slot[pf->next];
    pf->next = (pf->next + 1) % pf->n_slots;
    /* The oldest slot: its pinned bytes are free once its upload is done (an event never recorded
     * counts as done), its device bytes once the compute stream has taken them. */
    TB_CU(cudaEventSynchronize(s->uploaded));
    TB_CU(cudaStreamWaitEvent(pf->copy, s->taken, 0));
    s->full = 0;
    const size_t bx = (size_t)n * pf->per_in, by = (size_t)n * sizeof(int32_t);
    if (x) {
        memcpy(s->h, x, bx);
        TB_CU(cudaMemcpyAsync(s->dx, s->h, bx, cudaMemcpyHostToDevice, pf->copy));
    }
    if (y) {
        memcpy(s->h + pf->lab_off, y, by);
        TB_CU(cudaMemcpyAsync(s->dy, s->h + pf->lab_off, by, cudaMemcpyHostToDevice, pf->copy));
    }
    TB_CU(cudaEventRecord(s->uploaded, pf->copy));
    s->x = x, s->y = y, s->n = n, s->step = step, s->full = 1;
    return TB_OK;
}

int tb_cuda_prefetch_take(struct tb_cuda_prefetch *pf, const uint8_t *x, const int32_t *y, int n, long step,
                          uint8_t *dx, int32_t *dy, cudaStream_t st)
{
    for (int k = 0; k < pf->n_slots; k++) {
        struct pf_slot *s = &pf->slot[k];
        if (!s->full || s->x != x || s->y != y || s->n != n || s->step != step) continue;
        s->full = 0;
        TB_CU(cudaStreamWaitEvent(st, s->uploaded, 0));
        if (x) TB_CU(cudaMemcpyAsync(dx, s->dx, (size_t)n * pf->per_in, cudaMemcpyDeviceToDevice, st));
        if (y) TB_CU(cudaMemcpyAsync(dy, s->dy, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToDevice, st));
        TB_CU(cudaEventRecord(s->taken, st));
        return 1;
    }
    return 0;
}
