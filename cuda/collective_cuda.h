/* collective_cuda.h — the cuda device's gradient collective (executor_i.group_init / allreduce_grads),
 * over the members of an executor_group: replicas of one GPU are summed by tb_cuda_sum_ring_order (the
 * host ring's bits), GPUs by NCCL (ncclCommInitAll over the GPUs in one process, one rank a GPU; NCCL
 * cannot put two ranks on one device). Several replicas a GPU on several GPUs: each GPU's replicas
 * summed into its first, NCCL across those, then copied back to the others.
 *
 * One thread calls allreduce_grads once every member's backward has been issued; the work is enqueued
 * on the members' streams, ordered after their earlier work by events, and each member's stream waits
 * for its sum before its later work. Built without NCCL, a group on several GPUs is refused at
 * group_init (TB_EUNSUPPORTED: the schedule then sums host copies). The one-GPU sum ran on an H200
 * (test_cuda_mirrored); NCCL across GPUs has not run yet (one GPU lent).
 */
#ifndef TB_CUDA_COLLECTIVE_H
#define TB_CUDA_COLLECTIVE_H

#include "executor.h"

/* executor_i.group_init for cuda executors: plans the group and fills g->how, g->state, g->release. */
int tb_cuda_group_init(struct executor_group *g);
/* executor_i.allreduce_grads for cuda executors. */
int tb_cuda_group_allreduce(struct executor_group *g);

#endif
