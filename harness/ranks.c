/* ranks.c — how a failed run ends under MPI (see run.h): said once for the job, and never a rank left waiting.
 *
 * Every rank of `mpirun ... --transport mpi` runs the plan and fails on its own. A failure every rank reaches
 * (a refusal each makes alike, a divergence the summed loss shows them all) is the job's: rank 0 says it. A
 * failure of one rank (its data, its disk, its signal) leaves the others in their next collective, where they
 * would wait forever, and MPI_Finalize at exit waits for them too: that rank ends the job. Single-threaded: the
 * CLI's main thread, after the run.
 */
#include "mpi_transport.h"
#include "run.h"

#include <stdio.h>
#include <string.h>

/* How long a failed rank waits for the others to fail too before it takes the failure for its own: the ranks of a
 * failure they all reach get there within a step of each other (rank 0 writing its row and checkpoint first). A
 * failure known to be every rank's (bench_fail_collective) waits without a limit: rank 0 may wait for the results
 * file's lock first, and aborting then lost its row and said the failure was this rank's alone. */
#define RANKS_MEET_S 5.0

static int fail_collective;

void bench_fail_collective(void) { fail_collective = 1; }

/* Says msg after what, as bench_fail_say and bench_end describe; code 0: a rank that succeeded, which says nothing
 * and waits for the others without a limit, as MPI_Finalize would. */
static void ranks_say(const char *what, const char *msg, int code)
{
    int size;
    const int world = mpi_transport_world();
    if (world <= 1) {
        if (!code || !msg[0]) return;
        /* Not (or not yet) joined: a rank of a launch still says which, as its peers say the same or nothing. */
        const int rank = mpi_transport_launch_rank(&size);
        if (rank >= 0 && size > 1) fprintf(stderr, "bench: rank %d of %d: %s%s\n", rank, size, what, msg);
        else fprintf(stderr, "bench: %s%s\n", what, msg);
        return;
    }
    const int rank = mpi_transport_rank();
    char root[1024];
    const double wait = !code || bench_stop_agreed() || fail_collective ? -1.0 : RANKS_MEET_S;
    fail_collective = 0; /* this failure's: a suite's next line fails (or not) on its own */
    if (!mpi_transport_meet(wait, code ? msg : "", root, sizeof root)) {
        fprintf(stderr, "bench: rank %d of %d: %s%s (this rank alone: ending the job, whose other ranks would wait "
                        "for it)\n", rank, world, what, msg[0] ? msg : "failed");
        fflush(NULL);
        mpi_transport_abort(code);
    }
    if (!code || !msg[0]) return;
    if (rank == 0) fprintf(stderr, "bench: %s%s\n", what, msg);
    else if (strcmp(root, msg) != 0) fprintf(stderr, "bench: rank %d of %d: %s%s\n", rank, world, what, msg);
}

void bench_fail_say(const char *what, const char *msg, int code) { ranks_say(what, msg, code ? code : 1); }

void bench_end(int code, const char *msg) { ranks_say("", msg ? msg : "", code); }
