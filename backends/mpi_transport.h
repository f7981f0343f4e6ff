/* mpi_transport.h — the mirrored backend's multi-process transport: one MPI rank per replica.
 *
 * Compiled with Open MPI when CMake finds it (TB_HAVE_MPI); otherwise every call reports that MPI is
 * not available. MPI is initialised lazily by mpi_transport_init and finalised at process exit.
 */
#ifndef TB_MPI_TRANSPORT_H
#define TB_MPI_TRANSPORT_H

#include <stddef.h>

/* True when this process was started by mpirun/mpiexec (Open MPI or PMI environment present). */
int mpi_transport_launched(void);
/* Initialises MPI; *rank and *size receive this process's rank and the world size. */
int mpi_transport_init(int *rank, int *size);
/* In-place sum of n floats over all ranks (MPI_Allreduce, MPI_SUM). */
int mpi_transport_allreduce(float *buf, size_t n);
/* In-place sum of n doubles over all ranks. */
int mpi_transport_allreduce_f64(double *buf, size_t n);
/* In-place sum of n longs over all ranks. */
int mpi_transport_allreduce_long(long *buf, size_t n);
/* Rank 0's n bytes at buf into every other rank's buf (MPI_Bcast). */
int mpi_transport_bcast(void *buf, size_t n);
/* Current rank (0 when MPI is not initialised). */
int mpi_transport_rank(void);
/* The world's size once MPI is initialised, else 1. */
int mpi_transport_world(void);
/* This process's rank as its launcher's environment gives it (before or without MPI_Init), and the world's size
 * in *size; -1 (and *size 1) when not started by a launcher. */
int mpi_transport_launch_rank(int *size);
/* A failed rank's way out: waits up to timeout_s (< 0: without a limit) for every rank to call it too. 1 when
 * all did (the failure is the job's; rank 0's n-byte msg is copied into every rank's root), 0 when some rank did
 * not come in time: it waits in a collective this rank will never join, or it finished. 1 without MPI. */
int mpi_transport_meet(double timeout_s, const char *msg, char *root, size_t n);
/* Ends every rank of the job now, exit status `status` (MPI_Abort): a rank that failed alone, else its peers
 * wait in their next collective forever. Returns only without MPI. */
void mpi_transport_abort(int status);

#endif
