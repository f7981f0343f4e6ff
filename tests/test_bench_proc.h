/* test_bench_proc.h — runs `bench` (TB_BENCH_EXE) to completion as a child process and collects what it left:
 * its exit status, its peak memory, its stdout and its stderr (test_cli.c, test_row_threads.c).
 *
 * The child is started by rb_start (test_reliability_util.h), the one place the suites fork and exec bench;
 * this adds the wait with the child's own getrusage and, where asked, a CPU affinity narrower than the test's.
 * Not a test framework: every helper fails the calling test through Criterion's assertions. Static functions
 * only. Threading: none; Criterion runs each test in its own process.
 */
#ifndef TB_TEST_BENCH_PROC_H
#define TB_TEST_BENCH_PROC_H

#include "test_reliability_util.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>

/* What a finished child left: its exit status and its output. */
struct proc {
    int code;       /* exit status, or -1 if it did not exit normally */
    long maxrss_kb; /* the child's peak resident memory (getrusage through wait4) */
    char *out;      /* stdout */
    char *err;      /* stderr */
};

static __attribute__((unused)) void proc_free(struct proc *p)
{
    free(p->out), free(p->err);
}

/* Runs TB_BENCH_EXE with args (NULL-terminated) in dir, on CPU `cpu` alone when cpu >= 0, and collects its
 * output into *p (free it with proc_free); its stdout and stderr stay in dir as bench.out and bench.err. */
static __attribute__((unused)) void run_bench_in(const char *dir, const char *const *args, int cpu, struct proc *p)
{
    cpu_set_t mine;
    if (cpu >= 0) {
        /* The child inherits the forking thread's affinity: narrowed for the fork, restored after it. */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        cr_assert_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
        cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0, "cannot run on CPU %d alone", cpu);
    }
    const pid_t pid = rb_start(dir, "bench", args, NULL);
    if (cpu >= 0) cr_assert_eq(sched_setaffinity(0, sizeof mine, &mine), 0);
    int status;
    struct rusage ru;
    cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
    p->maxrss_kb = ru.ru_maxrss;
    p->code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    char *out_path = rb_path(dir, "bench.out"), *err_path = rb_path(dir, "bench.err");
    p->out = tu_read_file(out_path, NULL);
    p->err = tu_read_file(err_path, NULL);
    cr_assert(p->out && p->err, "cannot read the child's output");
    cr_assert_neq(p->code, 127, "could not run %s (is the bench target built?)", TB_BENCH_EXE);
    free(out_path), free(err_path);
}

/* run_bench_in a fresh temp directory, removed after, so a stray default results file cannot land in the tree. */
static __attribute__((unused)) void run_bench(const char *const *args, struct proc *p)
{
    char *dir = tu_mkdtemp("bench");
    run_bench_in(dir, args, -1, p);
    tu_rm_rf(dir);
    free(dir);
}

#endif
