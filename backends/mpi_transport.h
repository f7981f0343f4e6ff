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

#endif
