/* test_killrun.c — kill -9 safety: `bench` runs with --checkpoint-dir, --checkpoint-every 1 and --out
 * are killed with SIGKILL at random moments (30 ms to 1 s after start) 20 times, each run resuming the
 * previous one's directory; then everything on disk must read back:
 *   - the results file parses with results_read_rows, at most one torn line skipped;
 *   - every checkpoint that is not a temporary file loads (params, buffers, optimizer state) and its
 *     metadata names its own step;
 *   - a chain of killed and resumed runs, once finished, holds bitwise the parameters and optimizer
 *     state of one uninterrupted run (cpu).
 * The random delays come from a seed printed with any failure, so a failing sequence can be replayed
 * with TB_KILLRUN_SEED=<seed>. Whole test: about 10–20 s.
 * Also the stop signals outside the train plan: a suite stops after the run a SIGINT/SIGTERM lands in
 * (that run writes its interrupted row and checkpoint, no later run starts, one line counts them,
 * exit 130/143), and the throughput, scaling and inference plans write an interrupted row, exit 130;
 * the evaluate plan stops between its evaluation batches the same way (exit 130/143, no logits file).
 * And a scaling sweep whose point cannot run ends with one line naming it (exit 1, the other rows kept).
 */
#include "test_reliability_util.h"

#include "results.h"
#include "rng.h"

#define KR_STEPS "400"
#define KR_KILLS 20

TestSuite(killrun, .timeout = 180);

struct row_count {
    int rows, ok_rows;
};

static int count_row(const struct json_value *row, long line_no, void *ctx)
{
    struct row_count *c = ctx;
    (void)line_no;
    c->rows++;
    c->ok_rows += strcmp(json_get_str(row, "status", ""), "ok") == 0;
    return TB_OK;
}

/* Lines of a file that hold something (a torn last line included). */
static int nonempty_lines(const char *path)
{
    char *s = tu_read_file(path, NULL);
    int n = 0, content = 0;
    for (const char *c = s; c && *c; c++) {
        if (*c == '\n') n += content, content = 0;
        else if (*c != ' ') content = 1;
    }
    n += content;
    free(s);
    return n;
}

/* Checks every complete checkpoint of dir loads with its optimizer state and names its own step;
 * returns how many there were. */
static int check_dir(const char *dir, unsigned long long seed)
{
    long steps[64];
    int n = 0;
    cr_assert_eq(checkpoint_dir_list(dir, steps, 64, &n), TB_OK, "seed %llu: %s", seed, tb_error_get());
    struct rb_model r;
    rb_model_init(&r);
    for (int i = 0; i < n; i++) {
        char p[600], v[32];
        checkpoint_dir_path(dir, steps[i], p, sizeof p);
        cr_assert_eq(checkpoint_load_state(p, &r.m, r.p, r.b, r.o, r.spp), TB_OK, "seed %llu: %s", seed, tb_error_get());
        cr_assert_eq(checkpoint_read_meta(p, "step", v, sizeof v), TB_OK, "seed %llu: %s", seed, tb_error_get());
        cr_assert_eq(strtol(v, NULL, 10), steps[i], "seed %llu: %s says step %s", seed, p, v);
    }
    rb_model_free(&r);
    return n;
}

Test(killrun, sigkill_at_random_moments_leaves_readable_files_and_resumes_bitwise)
{
    unsigned long long seed = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
    if (getenv("TB_KILLRUN_SEED")) seed = strtoull(getenv("TB_KILLRUN_SEED"), NULL, 10);
    cr_log_info("killrun seed %llu (TB_KILLRUN_SEED=%llu replays it)", seed, seed);
    char *dir = tu_mkdtemp("killrun");

    /* The reference: one uninterrupted run, its final state in ref/. */
    cr_assert_eq(rb_run(dir, "ref", RB_ARGS(RB_BASE), RB_ARGS("--steps", KR_STEPS, "--checkpoint-dir", "ref")), 0,
                 "the reference run failed");
    char ref[600];
    char *refdir = rb_path(dir, "ref");
    checkpoint_dir_path(refdir, atol(KR_STEPS), ref, sizeof ref);

    int chain = 0, killed = 0, finished = 0;
    long progress = 0;
    char name[32], *cdir = NULL;
    for (int k = 0; k < KR_KILLS; k++) {
        snprintf(name, sizeof name, "c%d", chain);
        free(cdir);
        cdir = rb_path(dir, name);
        const long before = rb_newest(cdir);
        const char *mode = before >= 0 ? "--resume" : "--checkpoint-dir";
        pid_t pid = rb_start(dir, "run", RB_ARGS(RB_BASE),
                             RB_ARGS("--steps", KR_STEPS, "--checkpoint-every", "1", mode, name));
        const double delay_ms = 30.0 + 970.0 * rng_uniform(seed, 7, (uint64_t)k);
        int status = 0, exited = 0;
        for (double t = 0.0; t < delay_ms && !exited; t += 1.0) {
            if (waitpid(pid, &status, WNOHANG) == pid) exited = 1;
            else rb_sleep_ms(1.0);
        }
        if (!exited) {
            cr_assert_eq(kill(pid, SIGKILL), 0);
            cr_assert_eq(waitpid(pid, &status, 0), pid);
            /* It may have finished in the last instant. */
            exited = WIFEXITED(status);
        }
        if (exited) {
            char *err = rb_stderr(dir, "run");
            cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "seed %llu, run %d: exit status %d: %s", seed, k,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
            free(err);
            char fin[600];
            checkpoint_dir_path(cdir, atol(KR_STEPS), fin, sizeof fin);
            rb_assert_same_tensors(ref, fin, 1);
            finished++, chain++;
            progress += atol(KR_STEPS) - (before > 0 ? before : 0);
        } else {
            cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "seed %llu, run %d: not killed", seed, k);
            killed++;
            const long after = rb_newest(cdir);
            if (after > before) progress += after - (before > 0 ? before : 0);
        }
    }
    cr_log_info("killrun: %d runs killed, %d finished, %ld steps checkpointed", killed, finished, progress);
    cr_assert_gt(progress, 0, "seed %llu: no run got as far as a checkpoint: the test tested nothing", seed);

    /* Finish the last chain without interruption: the killed runs must add up to the straight run. */
    snprintf(name, sizeof name, "c%d", chain);
    free(cdir);
    cdir = rb_path(dir, name);
    const int code = rb_run(dir, "last", RB_ARGS(RB_BASE),
                            RB_ARGS("--steps", KR_STEPS, rb_newest(cdir) >= 0 ? "--resume" : "--checkpoint-dir", name));
    char *err = rb_stderr(dir, "last");
    cr_assert_eq(code, 0, "seed %llu: the final resume failed (%d): %s", seed, code, err);
    free(err);
    char fin[600];
    checkpoint_dir_path(cdir, atol(KR_STEPS), fin, sizeof fin);
    rb_assert_same_tensors(ref, fin, 1);

    /* Everything on disk reads back. */
    int n_ckpt = check_dir(refdir, seed);
    for (int j = 0; j <= chain; j++) {
        snprintf(name, sizeof name, "c%d", j);
        char *d = rb_path(dir, name);
        if (access(d, F_OK) == 0) n_ckpt += check_dir(d, seed);
        free(d);
    }
    char *res = rb_path(dir, "results.jsonl");
    struct row_count rc = {0, 0};
    cr_assert_eq(results_read_rows(res, count_row, &rc), TB_OK, "seed %llu: %s", seed, tb_error_get());
    const int lines = nonempty_lines(res);
    cr_assert(rc.rows >= lines - 1, "seed %llu: %d of %d lines of %s parse (at most one torn line may be skipped)", seed,
              rc.rows, lines, res);
    /* The reference, every finished chain and the final resume each wrote one "ok" row. */
    cr_assert_geq(rc.ok_rows, finished + 2, "seed %llu: %d ok rows for %d finished runs", seed, rc.ok_rows, finished + 2);
    cr_log_info("killrun: %d checkpoints and %d result rows read back", n_ckpt, rc.rows);
    free(res), free(cdir), free(refdir);
    tu_rm_rf(dir);
    free(dir);
}

/* The training line every suite test interrupts: long enough to be caught mid-run, checkpointing. The signal
 * follows its first checkpoint (step 100), so it never runs to its end and its length costs nothing; with 3000
 * steps the rest took 0.4 s here, all the delay a loaded machine needed to let it finish first. */
#define KR_LONG "plan=train steps=100000 no-eval checkpoint-dir=ck checkpoint-every=100"

/* Starts a suite in a fresh directory, waits for its checkpointing run's first checkpoint, sends sig;
 * returns the exit status (the directory in *dir). */
static int interrupt_suite(const char *text, int sig, char **dir)
{
    *dir = tu_mkdtemp("killsuite");
    rb_write(*dir, "s.suite", text);
    pid_t pid = rb_start(*dir, "suite", RB_ARGS(RB_BASE), RB_ARGS("--suite", "s.suite"));
    char *ck = rb_path(*dir, "ck");
    int exited = 0;
    const long seen = rb_wait_checkpoint(pid, ck, 0, &exited);
    char *err = rb_stderr(*dir, "suite");
    cr_assert_geq(seen, 0, "the suite ended (status %d) before it could be interrupted: %s", exited, err);
    free(err);
    free(ck);
    cr_assert_eq(kill(pid, sig), 0);
    return rb_wait(pid);
}

Test(killrun, sigint_stops_a_suite_after_the_current_run)
{
    char *dir;
    const int code = interrupt_suite(KR_LONG " run-id=first\n"
                                     "plan=train steps=5 run-id=second\n"
                                     "plan=throughput steps=5 warmup=0 run-id=third\n"
                                     "plan=tta max-epochs=1 eval-every=50 run-id=fourth\n",
                                     SIGINT, &dir);
    char *err = rb_stderr(dir, "suite");
    cr_assert_eq(code, 130, "exit status %d after SIGINT, want 130: %s", code, err);
    /* The interrupted run's row and checkpoint, and nothing from the lines after it. */
    struct json_value *rows[8];
    const int n = rb_rows(dir, rows, 8);
    cr_assert_eq(n, 1, "%d rows: the suite went on after the signal: %s", n, err);
    cr_assert_str_eq(json_get_str(rows[0], "run_id", ""), "first");
    cr_assert_str_eq(json_get_str(rows[0], "status", ""), "interrupted");
    cr_assert_str_eq(json_get_str(rows[0], "figures.stopped_by", ""), "SIGINT");
    const long done = (long)json_get_number(rows[0], "figures.completed_steps", -1);
    char *ck = rb_path(dir, "ck");
    cr_assert_eq(rb_newest(ck), done, "the newest checkpoint is not the stop's (step %ld)", done);
    json_value_free(rows[0]);
    /* One line counts what ran; the run's own line says how to resume it. */
    cr_assert(strstr(err, "stopped by SIGINT: 1 of 4 runs done (0 completed, 1 interrupted, 0 failed), 3 not started"),
              "no summary line: %s", err);
    cr_assert(strstr(err, "s.suite:1: run 1 stopped") && strstr(err, "--resume ck"), "%s", err);
    cr_assert_null(strstr(err, "failed:"), "a later run was started and failed: %s", err);
    free(err), free(ck);
    tu_rm_rf(dir);
    free(dir);
}

Test(killrun, sigterm_in_a_later_run_keeps_the_rows_before_it)
{
    char *dir;
    const int code = interrupt_suite("plan=train steps=5 no-eval run-id=a\n" KR_LONG " run-id=b\n"
                                     "plan=train steps=5 run-id=c\n",
                                     SIGTERM, &dir);
    char *err = rb_stderr(dir, "suite");
    cr_assert_eq(code, 143, "exit status %d after SIGTERM, want 143: %s", code, err);
    struct json_value *rows[8];
    const int n = rb_rows(dir, rows, 8);
    cr_assert_eq(n, 2, "%d rows, want the first run's and the interrupted one's: %s", n, err);
    cr_assert(!strcmp(json_get_str(rows[0], "run_id", ""), "a") && !strcmp(json_get_str(rows[0], "status", ""), "ok"));
    cr_assert(!strcmp(json_get_str(rows[1], "run_id", ""), "b") &&
              !strcmp(json_get_str(rows[1], "status", ""), "interrupted"));
    cr_assert(strstr(err, "stopped by SIGTERM: 2 of 3 runs done (1 completed, 1 interrupted, 0 failed), 1 not started"),
              "no summary line: %s", err);
    for (int i = 0; i < n; i++) json_value_free(rows[i]);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* A measuring plan stopped mid-run (once it handles SIGINT, and 0.3 s more): exit 130, one row marked
 * interrupted and partial with no rate, every line of the file whole. Returns the row. */
static struct json_value *interrupt_plan(const char *dir, const char *const *extra)
{
    pid_t pid = rb_start(dir, "plan", RB_ARGS("--data", "synthetic", "--synthetic-samples", "1000,200", "--mllog", "none",
                                              "--out", "results.jsonl", "--quiet"),
                         extra);
    int exited = 0;
    const int caught = rb_wait_handler(pid, SIGINT, &exited);
    char *err = rb_stderr(dir, "plan");
    cr_assert(caught, "the run ended (status %d) before it could be interrupted: %s", exited, err);
    free(err);
    rb_sleep_ms(300.0);
    cr_assert_eq(kill(pid, SIGINT), 0);
    const int code = rb_wait(pid);
    err = rb_stderr(dir, "plan");
    cr_assert_eq(code, 130, "exit status %d after SIGINT, want 130: %s", code, err);
    cr_assert(strstr(err, "not resumable"), "the message does not say the measurement is lost: %s", err);
    free(err);
    struct json_value *rows[4];
    cr_assert_eq(rb_rows(dir, rows, 4), 1);
    struct json_value *r = rows[0];
    cr_assert_str_eq(json_get_str(r, "status", ""), "interrupted");
    cr_assert_eq(json_get_bool(r, "figures.partial", 0), 1);
    cr_assert_str_eq(json_get_str(r, "figures.stopped_by", ""), "SIGINT");
    cr_assert_null(json_get(r, "figures.images_per_s"), "an interrupted row must not carry a headline rate");
    cr_assert_null(json_get(r, "figures.images_per_s_median"));
    /* Usually mid-run; on a slow (sanitizer) build the signal may land before the first step, which must
     * give the same kind of row. */
    cr_assert_geq(json_get_number(r, "figures.completed_steps", -1), 0);
    return r;
}

Test(killrun, sigint_stops_throughput_scaling_and_inference_with_an_interrupted_row)
{
    char *dir = tu_mkdtemp("killplan");
    struct json_value *r = interrupt_plan(dir, RB_ARGS("--plan", "throughput", "--batch", "8", "--steps", "10000000"));
    cr_assert_str_eq(json_get_str(r, "kind", ""), "throughput");
    json_value_free(r);
    char *res = rb_path(dir, "results.jsonl");
    cr_assert_eq(unlink(res), 0);
    r = interrupt_plan(dir, RB_ARGS("--plan", "scaling", "--batches", "8,16,32", "--steps", "10000000"));
    cr_assert_str_eq(json_get_str(r, "kind", ""), "scaling");
    cr_assert_eq(json_get_number(r, "config.batch", -1), 8, "the sweep went past its first point");
    json_value_free(r);
    char *err = rb_stderr(dir, "plan");
    cr_assert(strstr(err, "2 later points not run"), "%s", err);
    free(err);
    cr_assert_eq(unlink(res), 0);
    r = interrupt_plan(dir, RB_ARGS("--plan", "inference", "--batch", "100", "--steps", "10000000"));
    cr_assert_str_eq(json_get_str(r, "kind", ""), "inference");
    cr_assert_null(json_get(r, "figures.latency_p50_s"));
    json_value_free(r);
    free(res);
    tu_rm_rf(dir);
    free(dir);
}

/* --plan evaluate honours a stop between evaluation batches (it used to evaluate everything and exit 0
 * with an "ok" row): exit 128 + signal, one interrupted row without evaluation figures, no --logits file.
 * The signal is sent once the backend is being prepared, so it usually lands mid-evaluation. */
Test(killrun, sigint_and_sigterm_stop_evaluate_between_batches)
{
    static const int sigs[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        char *dir = tu_mkdtemp("killeval");
        pid_t pid = rb_start(dir, "eval", RB_ARGS("--data", "synthetic", "--synthetic-samples", "100,150000", "--mllog", "none",
                                                  "--out", "results.jsonl"),
                             RB_ARGS("--plan", "evaluate", "--eval-batch", "50", "--logits", "ev.npy"));
        int exited = 0, preparing = 0;
        cr_assert(rb_wait_handler(pid, sigs[i], &exited), "the run ended (status %d) before it handled signals", exited);
        for (int k = 0; k < 60000 && !preparing; k++) {
            char *err = rb_stderr(dir, "eval");
            preparing = err && strstr(err, "preparing the backend");
            free(err);
            if (!preparing) rb_sleep_ms(1.0);
        }
        cr_assert(preparing, "signal %d: bench never said it was preparing the backend", sigs[i]);
        rb_sleep_ms(100.0);
        cr_assert_eq(kill(pid, sigs[i]), 0);
        const int code = rb_wait(pid);
        char *err = rb_stderr(dir, "eval");
        cr_assert_eq(code, 128 + sigs[i], "exit status %d after signal %d, want %d: %s", code, sigs[i], 128 + sigs[i], err);
        cr_assert(strstr(err, "evaluation batches") && strstr(err, "not resumable"), "%s", err);
        struct json_value *rows[4];
        cr_assert_eq(rb_rows(dir, rows, 4), 1, "%s", err);
        struct json_value *r = rows[0];
        cr_assert_str_eq(json_get_str(r, "kind", ""), "evaluate");
        cr_assert_str_eq(json_get_str(r, "status", ""), "interrupted");
        cr_assert_eq(json_get_bool(r, "figures.partial", 0), 1);
        cr_assert_str_eq(json_get_str(r, "figures.stopped_by", ""), i ? "SIGTERM" : "SIGINT");
        cr_assert_null(json_get(r, "figures.eval_top1"), "an interrupted evaluation must not carry an accuracy");
        const double done = json_get_number(r, "figures.completed_steps", -1),
                     planned = json_get_number(r, "figures.planned_steps", -1);
        cr_assert(planned == 3000 && done >= 0 && done < planned, "%g of %g evaluation batches", done, planned);
        cr_log_info("evaluate stopped by signal %d after %g of %g batches", sigs[i], done, planned);
        char *npy = rb_path(dir, "ev.npy");
        cr_assert_neq(access(npy, F_OK), 0, "an interrupted evaluation left its --logits file");
        json_value_free(r);
        free(npy), free(err);
        tu_rm_rf(dir);
        free(dir);
    }
}

/* A stop signal in a train run's final evaluation (the steps done and checkpointed) stops it between evaluation
 * batches: exit 130, an interrupted row, and the message points at the checkpoint a resume evaluates from. */
Test(killrun, sigint_stops_the_final_evaluation_of_a_train_run)
{
    char *dir = tu_mkdtemp("killtraineval");
    pid_t pid = rb_start(dir, "te", RB_ARGS("--data", "synthetic", "--synthetic-samples", "100,150000", "--mllog", "none",
                                            "--out", "results.jsonl"),
                         RB_ARGS("--epochs", "1", "--steps-per-epoch", "2", "--batch", "8", "--eval-batch", "10",
                                 "--checkpoint-dir", "ck"));
    int exited = 0, evaluating = 0;
    cr_assert(rb_wait_handler(pid, SIGINT, &exited), "the run ended (status %d) before it handled signals", exited);
    for (int k = 0; k < 60000 && !evaluating; k++) {
        char *err = rb_stderr(dir, "te");
        evaluating = err && strstr(err, "evaluating 150000 test samples");
        free(err);
        if (!evaluating) rb_sleep_ms(1.0);
    }
    cr_assert(evaluating, "the run never said it was evaluating the test set");
    cr_assert_eq(kill(pid, SIGINT), 0);
    const int code = rb_wait(pid);
    char *err = rb_stderr(dir, "te");
    cr_assert_eq(code, 130, "exit status %d after SIGINT in the evaluation: %s", code, err);
    cr_assert(strstr(err, "in the evaluation after step 2") && strstr(err, "--resume"), "%s", err);
    struct json_value *rows[4];
    cr_assert_eq(rb_rows(dir, rows, 4), 1, "%s", err);
    cr_assert_str_eq(json_get_str(rows[0], "status", ""), "interrupted");
    json_value_free(rows[0]);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* A scaling point that cannot run (a batch the backend's arrangement cannot split) is found when its
 * backend is prepared, mid-sweep. The run used to end with an empty "bench: " line and exit 2 after the
 * other points wrote their rows; now the last line names the failed points, and the exit is 1 when some
 * points ran (their rows kept) or 2 when none did (no row). */
Test(killrun, a_scaling_point_that_cannot_run_is_named_in_one_line)
{
    static const char *const cases[][8] = {
        {"--backend", "ipu", "--stages", "2", "--batches", "3,8", NULL, "1 of 2 points failed: batch 3 (ipu: global batch 3"},
        {"--backend", "mirrored", "--devices", "3", "--batches", "8,9", NULL, "1 of 2 points failed: batch 8 (--batch 8 does"},
        {"--backend", "mirrored", "--devices", "3", "--batches", "8,9,10", NULL, "2 of 3 points failed: batch 8, batch 10"},
        {"--backend", "mirrored", "--devices", "3", "--batches", "8,10", NULL, "no point ran: batch 8, batch 10 failed"},
    };
    static const int want_code[] = {1, 1, 1, 2}, want_rows[] = {1, 1, 1, 0};
    for (int i = 0; i < 4; i++) {
        char *dir = tu_mkdtemp("killscale");
        const int code = rb_run(dir, "sc", RB_ARGS("--data", "synthetic", "--synthetic-samples", "64,32", "--mllog", "none",
                                                   "--out", "results.jsonl", "--quiet", "--plan", "scaling", "--steps", "2"),
                                cases[i]);
        char *err = rb_stderr(dir, "sc");
        cr_assert_eq(code, want_code[i], "case %d: exit %d, want %d: %s", i, code, want_code[i], err);
        /* The last line: never an empty "bench: ", always the failed points. */
        size_t len = strlen(err);
        while (len && err[len - 1] == '\n') err[--len] = '\0';
        const char *last = strrchr(err, '\n') ? strrchr(err, '\n') + 1 : err;
        cr_assert(strncmp(last, "bench: scaling: ", 16) == 0 && strstr(last, cases[i][7]), "case %d: last line '%s'", i,
                  last);
        struct json_value *rows[4];
        const int n = rb_rows(dir, rows, 4);
        cr_assert_eq(n, want_rows[i], "case %d: %d rows", i, n);
        for (int k = 0; k < n; k++) {
            cr_assert_str_eq(json_get_str(rows[k], "status", ""), "ok");
            json_value_free(rows[k]);
        }
        free(err);
        tu_rm_rf(dir);
        free(dir);
    }
}
