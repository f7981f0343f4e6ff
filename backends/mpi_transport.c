/* mpi_transport.c — MPI_Allreduce transport for the mirrored backend, or stubs without MPI. */
#include "mpi_transport.h"

#include "status.h"

#include <stdlib.h>

int mpi_transport_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

#ifdef TB_HAVE_MPI
#include <mpi.h>

static int g_rank, g_inited;

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
    g_inited = 1;
    return TB_OK;
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

#endif
