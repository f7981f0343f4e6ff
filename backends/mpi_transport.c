/* mpi_transport.c — MPI_Allreduce transport for the mirrored backend, or stubs without MPI. */
#include "mpi_transport.h"

#include "status.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int mpi_transport_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

int mpi_transport_launch_rank(int *size)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK"), *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!r || !n) r = getenv("PMI_RANK"), n = getenv("PMI_SIZE");
    *size = 1;
    if (!r || !n || !*r || !*n) return -1;
    *size = atoi(n) > 0 ? atoi(n) : 1;
    return atoi(r);
}

#ifdef TB_HAVE_MPI
#include <mpi.h>

static int g_rank, g_world = 1, g_inited;
/* A copy of MPI_COMM_WORLD for mpi_transport_meet alone: its barrier can never match a collective of the run. */
static MPI_Comm g_end_comm = MPI_COMM_NULL;

static void finalize_at_exit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

int mpi_transport_init(int *rank, int *size)
{
    if (!mpi_transport_launched())
        return tb_error_set(TB_EINVAL, "--transport mpi needs an MPI launcher: run it as `mpirun -np N bench "
                                       "--backend mirrored --transport mpi ...` (as root add --allow-run-as-root)");
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return tb_error_set(TB_EIO, "MPI_Init_thread failed");
        atexit(finalize_at_exit);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    *rank = g_rank;
    g_world = *size;
    if (!g_inited && MPI_Comm_dup(MPI_COMM_WORLD, &g_end_comm) != MPI_SUCCESS)
        return tb_error_set(TB_EIO, "MPI_Comm_dup failed");
    g_inited = 1;
    return TB_OK;
}

int mpi_transport_world(void) { return g_inited ? g_world : 1; }

int mpi_transport_meet(double timeout_s, const char *msg, char *root, size_t n)
{
    snprintf(root, n, "%s", msg);
    if (!g_inited || g_world == 1) return 1;
    MPI_Request req;
    if (MPI_Ibarrier(g_end_comm, &req) != MPI_SUCCESS) return 0;
    int done = 0;
    struct timespec t0, now, nap = {0, 2000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
        if (done) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (timeout_s >= 0 && (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > timeout_s)
            return 0; /* the request stays pending: the caller aborts */
        nanosleep(&nap, NULL);
    }
    /* Every rank is here: none is in a collective, so rank 0's message can go to all. */
    return MPI_Bcast(root, (int)n, MPI_CHAR, 0, g_end_comm) == MPI_SUCCESS;
}

void mpi_transport_abort(int status)
{
    if (g_inited) MPI_Abort(MPI_COMM_WORLD, status);
}

int mpi_transport_allreduce(float *buf, size_t n)
{
    /* Large buffers go in pieces: MPI counts are int. */
    for (size_t off = 0; off < n;) {
        int k = n - off > (1u << 30) ? (1 << 30) : (int)(n - off);
        if (MPI_Allreduce(MPI_IN_PLACE, buf + off, k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            return tb_error_set(TB_EIO, "MPI_Allreduce failed");
        off += (size_t)k;
    }
    return TB_OK;
}

int mpi_transport_allreduce_f64(double *buf, size_t n)
{
    return MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS
               ? TB_OK
               : tb_error_set(TB_EIO, "MPI_Allreduce failed");
}

int mpi_transport_allreduce_long(long *buf, size_t n)
{
    return MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS
               ? TB_OK
               : tb_error_set(TB_EIO, "MPI_Allreduce failed");
}

int mpi_transport_bcast(void *buf, size_t n)
{
    return MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? TB_OK
                                                                             : tb_error_set(TB_EIO, "MPI_Bcast failed");
}

int mpi_transport_rank(void) { return g_inited ? g_rank : 0; }

#else

int mpi_transport_init(int *rank, int *size)
{
    *rank = 0, *size = 1;
    return tb_error_set(TB_EUNSUPPORTED, "this build has no MPI (install libopenmpi-dev and rebuild)");
}
int mpi_transport_allreduce(float *buf, size_t n) { (void)buf, (void)n; return TB_EUNSUPPORTED; }
int mpi_transport_allreduce_f64(double *buf, size_t n) { (void)buf, (void)n; return TB_EUNSUPPORTED; }
int mpi_transport_allreduce_long(long *buf, size_t n) { (void)buf, (void)n; return TB_EUNSUPPORTED; }
int mpi_transport_bcast(void *buf, size_t n) { (void)buf, (void)n; return TB_EUNSUPPORTED; }
int mpi_transport_rank(void) { return 0; }
int mpi_transport_world(void) { return 1; }
int mpi_transport_meet(double timeout_s, const char *msg, char *root, size_t n)
{
    (void)timeout_s;
    snprintf(root, n, "%s", msg);
    return 1;
}
void mpi_transport_abort(int status) { (void)status; }

#endif
