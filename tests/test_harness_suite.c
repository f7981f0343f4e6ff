/* test_harness_suite.c — the option parser shared by the CLI and suite files, and the suite parser on
 * good and bad files: comments, cartesian expansion of comma lists, backend=*, list-valued options,
 * optional lines, and errors that name file:line and the option before anything runs (runs that would
 * share a checkpoint directory included); each backend's own options, and backend=* lines naming some.
 * backend=* leaves out a backend tied to a device this machine lacks (cuda without a GPU), and a `?` line
 * whose device cannot run here is skipped; bench --list marks such a backend. */
#include "test_harness_util.h"

#include "backend.h"
#include "run.h"
#include "status.h"
#include "suite.h"

#include <glob.h>

/* Loads text as t.suite; what suite_load wrote on stderr into *err (malloc'd) where err is not NULL. */
static int load_err(const char *text, struct suite *s, char **err)
{
    char p[192];
    th_write(th_path(p, sizeof p, "t.suite"), text);
    struct bench_config base;
    bench_config_defaults(&base);
    th_stderr_begin();
    int st = suite_load(p, &base, s);
    char *e = th_stderr_end();
    if (err) *err = e;
    else free(e);
    return st;
}

static int load(const char *text, struct suite *s) { return load_err(text, s, NULL); }

static void expect_error(const char *text, const char *needle1, const char *needle2)
{
    struct suite s;
    cr_assert_eq(load(text, &s), TB_EINVAL, "accepted: %s", text);
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, needle1) != NULL, "message '%s' lacks '%s'", msg, needle1);
    if (needle2) cr_assert(strstr(msg, needle2) != NULL, "message '%s' lacks '%s'", msg, needle2);
}

Test(harness_suite, expands_lists_to_the_cartesian_product, .init = th_setup, .fini = th_teardown)
{
    struct suite s;
    cr_assert_eq(load("# a comment line\n"
                      "\n"
                      "plan=throughput backend=cpu lr=0.1,0.2 warmup=2,5 steps=20   # trailing comment\n"
                      "plan=scaling backend=cpu batches=16,32,64 steps=10\n"
                      "plan=tta seeds=3 max-epochs=2 --quiet\n",
                      &s),
                 TB_OK, "%s", tb_error_get());
    cr_assert_eq(s.n_runs, 6);
    /* The last option varies fastest. */
    cr_assert_float_eq(s.runs[0].c.lr, 0.1f, 1e-7);
    cr_assert_eq(s.runs[0].c.warmup, 2);
    cr_assert_eq(s.runs[1].c.warmup, 5);
    cr_assert_float_eq(s.runs[2].c.lr, 0.2f, 1e-7);
    cr_assert_float_eq(s.runs[3].c.run.optim.lr, 0.2f, 1e-7);
    cr_assert_str_eq(s.runs[3].c.variant, "lr=0.2 warmup=5");
    cr_assert_eq(s.runs[0].line, 3);
    cr_assert_eq(s.runs[0].c.plan, PLAN_THROUGHPUT);
    /* batches is itself a list: one run, not three; so is every option whose value is a list (a probe saw
     * project-devices=16,64 run twice, once a count). */
    int n_opts;
    const struct bench_option *o = bench_options(&n_opts);
    for (int k = 0; k < n_opts; k++)
        if (o[k].meta && (strstr(o[k].meta, "LIST") || strchr(o[k].meta, ',')))
            cr_assert(o[k].list_valued, "--%s %s is a list but a suite would expand it", o[k].name, o[k].meta);
    cr_assert_eq(s.runs[4].c.plan, PLAN_SCALING);
    cr_assert_eq(s.runs[4].c.n_batches, 3);
    cr_assert_eq(s.runs[4].c.batches[2], 64);
    cr_assert_eq(s.runs[4].line, 4);
    cr_assert_eq(s.runs[5].c.plan, PLAN_TTA);
    cr_assert_eq(s.runs[5].c.seeds, 3);
    cr_assert_eq(s.runs[5].c.quiet, 1, "a flag may stand alone, with or without dashes");
    cr_assert_float_eq(s.runs[5].c.target, 0.88, 1e-9, "the workload's default target");
    suite_free(&s);
}

/* A line's option replaces the command line's for its runs, with one note a line naming both (a probe found
 * `bench --suite F --batch 16` running a line's batch=8 unsaid); a bare flag on both agrees, and is not noted. */
Test(harness_suite, a_lines_option_over_the_command_lines_is_noted, .init = th_setup, .fini = th_teardown)
{
    char p[192];
    th_write(th_path(p, sizeof p, "t.suite"), "plan=throughput backend=cpu batch=8,16 steps=3 quiet\nplan=throughput steps=2\n");
    struct bench_config base;
    bench_config_defaults(&base);
    cr_assert_eq(bench_config_set(&base, "batch", "32"), TB_OK);
    cr_assert_eq(bench_config_set(&base, "quiet", NULL), TB_OK);
    struct suite s;
    th_stderr_begin();
    const int st = suite_load(p, &base, &s);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert_eq(s.n_runs, 3);
    cr_assert_eq(s.runs[0].c.run.batch, 8);
    cr_assert_eq(s.runs[1].c.run.batch, 16);
    cr_assert_eq(s.runs[2].c.run.batch, 32, "a line without batch= keeps the command line's");
    cr_assert(strstr(err, "t.suite:1: batch=8,16 replaces the command line's --batch"), "%s", err);
    const char *first = strstr(err, "replaces");
    cr_assert(first && !strstr(first + 1, "replaces"), "one note, not one a run or one for the flag: %s", err);
    free(err);
    suite_free(&s);
}

/* Runs of one suite that would write one file whole (save=, trace=, logits=, timeline=) over another run's output
 * of any kind, results included, are refused before anything runs; runs may share out= (they append). */
Test(harness_suite, runs_writing_one_file_are_refused, .init = th_setup, .fini = th_teardown)
{
    expect_error("plan=train steps=2 out=rows.jsonl\nplan=train steps=2 save=rows.jsonl\n", ":2:", "line 1's out=");
    expect_error("plan=train steps=2 save=w.st\nplan=train steps=2 trace=w.st\n", "save=w.st", "line 2");
    expect_error("plan=train steps=2 seed=1,2 save=w.st\n", ":1:", "several runs");
    /* A line writing over the suite file: refused before line 1 runs (a probe saw line 1 run first). */
    char self[224], text[512];
    th_path(self, sizeof self, "t.suite");
    snprintf(text, sizeof text, "plan=train steps=2\nplan=train steps=2 out=%s\n", self);
    expect_error(text, ":2:", "this suite file");
    snprintf(text, sizeof text, "plan=train steps=2 trace=%s\n", self);
    expect_error(text, ":1: the run's --trace", "this suite file");
    /* Over an earlier line's input (the suite could not run again), or a name another line's checkpoints use */
    expect_error("plan=train steps=2 load=lin.st\nplan=train steps=2 trace=lin.st\n", ":2: trace=lin.st",
                 "line 1's load=, which it reads");
    expect_error("plan=train steps=2 checkpoint-dir=ck\nplan=train steps=2 save=ck/ckpt-0000000002.safetensors\n",
                 ":2: save=ck/ckpt-0000000002.safetensors", "line 1's checkpoints in ck");
    expect_error("plan=train steps=2 resume=ck\nplan=train steps=2 trace=ck/finished.json\n", ":2: trace=",
                 "line 1's checkpoints in ck");
    expect_error("plan=train steps=2 resume=A checkpoint-dir=B\nplan=train steps=2 trace=A/ckpt-0000000002.safetensors\n",
                 ":2: trace=A/ckpt-", "line 1's checkpoints in A");
    /* someone's data where a later line would write, refused before line 1 runs, as the run itself would refuse it */
    th_write("other.jsonl", "{\"schema_version\":1,\"kind\":\"train\",\"config\":{}}\n");
    expect_error("plan=train steps=2\nplan=train steps=2 save=other.jsonl\n", ":2: save other.jsonl",
                 "an existing results file");
    struct suite s;
    cr_assert_eq(load("plan=train steps=2 out=rows.jsonl\nplan=train steps=2 out=rows.jsonl save=a.st\n", &s), TB_OK,
                 "%s", tb_error_get());
    suite_free(&s);
    /* a later line reading what an earlier one saved is a pipeline */
    cr_assert_eq(load("plan=train steps=2 save=w.st\nplan=evaluate load=w.st\n", &s), TB_OK, "%s", tb_error_get());
    suite_free(&s);
}

/* The registered backends backend=* expands to here: all but those tied to a device this machine lacks
 * (cuda without a GPU), in registry order, into names (at most 32). */
static int runnable_backends(const char **names)
{
    int n, k = 0;
    const struct backend_entry *b = backend_registry(&n);
    for (int i = 0; i < n && k < 32; i++) {
        if (b[i].caps.device && executor_device_probe(b[i].caps.device) != TB_OK) {
            tb_error_clear();
            continue;
        }
        names[k++] = b[i].name;
    }
    return k;
}

Test(harness_suite, star_means_every_backend_and_question_mark_skips, .init = th_setup, .fini = th_teardown)
{
    const char *names[32];
    const int n_backends = runnable_backends(names);
    struct suite s;
    cr_assert_eq(load("plan=inference backend=* batch=64\n"
                      "? plan=throughput workload=no-such-workload\n"
                      "? plan=throughput backend=no-such-backend\n"
                      "? plan=throughput backend=cpu workload=mnist-mlp\n",
                      &s),
                 TB_OK, "%s", tb_error_get());
    cr_assert_eq(s.n_runs, n_backends + 1);
    cr_assert_eq(s.n_skipped, 2);
    for (int k = 0; k < n_backends; k++) cr_assert_str_eq(s.runs[k].c.backend, names[k]);
    suite_free(&s);
}

/* A device double whose hardware is never present, as cuda's on a machine without a GPU. */
static int absent_probe(void)
{
    return tb_error_set(TB_EUNSUPPORTED, "nogpu: no such device here (test)");
}

static int absent_create(struct executor *ex)
{
    (void)ex;
    return absent_probe();
}

/* A `?` line whose device cannot run here is skipped with the probe's reason (it failed the whole suite at
 * run time: "run 1 failed: cuda: no CUDA device"), as backend=* leaves such a backend out; so is one naming a
 * device this binary was built without. A line without `?` still loads (and fails when it runs). */
Test(harness_suite, question_mark_skips_a_device_that_cannot_run_here, .init = th_setup, .fini = th_teardown)
{
    static const struct executor_device d = {.name = "nogpu", .summary = "test: never present",
                                             .create = absent_create, .probe = absent_probe};
    cr_assert_eq(executor_device_register(&d), TB_OK, "%s", tb_error_get());
    char p[192];
    th_write(th_path(p, sizeof p, "t.suite"), "? plan=throughput device=nogpu steps=2\n"
                                              "? plan=throughput device=cuda steps=2\n"
                                              "plan=throughput backend=cpu steps=2\n");
    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    th_stderr_begin();
    const int st = suite_load(p, &base, &s);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, "t.suite:1: skipping optional run: device nogpu cannot run here: nogpu: no such device here")
              != NULL, "%s", err);
    /* cuda: not built, or built without a GPU here (skipped), or with one (a run). */
    const int cuda_runs = executor_device_probe("cuda") == TB_OK;
    tb_error_clear();
    if (!cuda_runs)
        cr_assert(strstr(err, "t.suite:2: skipping optional run: device cuda cannot run here") != NULL, "%s", err);
    cr_assert_eq(s.n_skipped, 2 - cuda_runs, "%s", err);
    cr_assert_eq(s.n_runs, 1 + cuda_runs);
    cr_assert_str_eq(s.runs[s.n_runs - 1].c.backend, "cpu");
    suite_free(&s);
    free(err);
    cr_assert_eq(load("plan=throughput device=nogpu steps=2\n", &s), TB_OK, "%s", tb_error_get());
    cr_assert_eq(s.n_runs, 1);
    suite_free(&s);
}

/* An optional line of lists whose every run is skipped said its reason once a combination, and skipped
 * combinations counted toward no limit: one line of five 64-value lists printed a billion notes and never ended.
 * Now each reason is said once a line and one line counts the rest; a line of more combinations than a suite may
 * run is refused, whether its runs would run or be skipped. */
Test(harness_suite, optional_lists_say_each_reason_once_and_a_line_is_capped, .init = th_setup, .fini = th_teardown)
{
    char p[192];
    th_write(th_path(p, sizeof p, "t.suite"), "? workload=nosuch batch=1,2,3 seed=1,2\n"
                                              "plan=throughput steps=2\n");
    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    th_stderr_begin();
    int st = suite_load(p, &base, &s);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    char want[1200];
    snprintf(want, sizeof want, "bench: %s:1: skipping optional run: 'nosuch' is not registered in this build\n"
                                "bench: %s:1: skipped 5 more optional runs of the line, for the reason above\n", p, p);
    cr_assert_str_eq(err, want);
    cr_assert_eq(s.n_skipped, 6);
    cr_assert_eq(s.n_runs, 1);
    suite_free(&s);
    free(err);
    /* two reasons on one line: each said once */
    th_write(p, "? workload=nosuch,alsonot seed=1,2\nplan=throughput steps=2\n");
    th_stderr_begin();
    st = suite_load(p, &base, &s);
    err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    snprintf(want, sizeof want, "bench: %s:1: skipping optional run: 'nosuch' is not registered in this build\n"
                                "bench: %s:1: skipping optional run: 'alsonot' is not registered in this build\n"
                                "bench: %s:1: skipped 2 more optional runs of the line, for the reasons above\n", p, p, p);
    cr_assert_str_eq(err, want);
    suite_free(&s);
    free(err);
    /* 17 x 16 x 16 = 4352 combinations, none of which would run */
    char line[1024] = "? workload=nosuch batch=1", *e;
    for (int v = 2; v <= 17; v++) e = line + strlen(line), snprintf(e, sizeof line - (size_t)(e - line), ",%d", v);
    strcat(line, " seed=1");
    for (int v = 2; v <= 16; v++) e = line + strlen(line), snprintf(e, sizeof line - (size_t)(e - line), ",%d", v);
    strcat(line, " steps=1");
    for (int v = 2; v <= 16; v++) e = line + strlen(line), snprintf(e, sizeof line - (size_t)(e - line), ",%d", v);
    strcat(line, "\n");
    th_write(p, line);
    th_stderr_begin();
    st = suite_load(p, &base, &s);
    err = th_stderr_end();
    cr_assert_eq(st, TB_EINVAL);
    snprintf(want, sizeof want, "%s:1: the line expands to more than 4096 runs", p);
    cr_assert_str_eq(tb_error_get(), want);
    cr_assert_str_eq(err, "", "nothing skipped, nothing said: %s", err);
    free(err);
}

/* bench --list marks a backend tied to a device this machine lacks (cuda without a GPU) as the devices section
 * marks the device: it offered cuda as if it ran, and every run of it exits 1. Any other backend is unmarked. */
Test(harness_suite, list_marks_a_backend_whose_device_is_absent, .timeout = 30)
{
    FILE *f = popen("'" TB_BENCH_EXE "' --list", "r");
    cr_assert_not_null(f);
    static char out[1 << 16];
    const size_t len = fread(out, 1, sizeof out - 1, f);
    out[len] = '\0';
    cr_assert_eq(pclose(f), 0, "%s", out);
    const char *devices = strstr(out, "\ndevices:\n");
    cr_assert_not_null(devices, "%s", out);
    int n;
    const struct backend_entry *b = backend_registry(&n);
    for (int k = 0; k < n; k++) {
        char head[32];
        snprintf(head, sizeof head, "\n  %-10s ", b[k].name);
        const char *line = strstr(out, head);
        cr_assert(line && line < devices, "no line for backend %s: %s", b[k].name, out);
        const char *eol = strchr(line + 1, '\n');
        const char *mark = strstr(line, "(no device present: every run that trains or times exits 1)");
        const int absent = b[k].caps.device && executor_device_probe(b[k].caps.device) != TB_OK;
        tb_error_clear();
        cr_assert_eq(mark && mark < eol, absent, "%s: %.*s", b[k].name, (int)(eol - line), line);
    }
}

Test(harness_suite, bad_lines_name_file_line_and_option, .init = th_setup, .fini = th_teardown)
{
    expect_error("plan=throughput\nplan=throughput batch=abc\n", "t.suite:2:", "--batch");
    expect_error("plan=throughput frobnicate=1\n", "t.suite:1:", "frobnicate");
    /* a typo of an option is named with the option it is near */
    expect_error("plan=throughput stpes=3\n", "t.suite:1:", "'stpes' (did you mean steps?)");
    expect_error("\n\nplan=tta seeds=2 repeat=3\n", "t.suite:3:", "--repeat");
    expect_error("plan=throughput lr=0.1,,0.2\n", "t.suite:1:", "lr");
    expect_error("plan=throughput lr=\n", "t.suite:1:", "lr");
    expect_error("plan=throughput batch=32 batch=64\n", "t.suite:1:", "batch");
    expect_error("plan=throughput workload=no-such-workload\n", "t.suite:1:", "no-such-workload");
    expect_error("plan=warp\n", "t.suite:1:", "--plan");
    expect_error("plan=scaling batches=16,x\n", "t.suite:1:", "--batches");
    expect_error("plan=throughput precision=fp8\n", "t.suite:1:", "--precision");
    expect_error("plan=throughput no-eval=maybe\n", "t.suite:1:", "--no-eval");
    expect_error("?\n", "t.suite:1:", NULL);
    expect_error("# only comments\n\n", "no runs", NULL);
    /* An error anywhere means nothing runs: the first line was fine, but no runs come back. */
    struct suite s;
    cr_assert_eq(load("plan=throughput\nplan=throughput steps=0\n", &s), TB_EINVAL);
    cr_assert_eq(s.n_runs, 0);
    cr_assert_null(s.runs);
}

Test(harness_suite, missing_file_is_an_io_error, .init = th_setup, .fini = th_teardown)
{
    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    cr_assert_eq(suite_load("/nonexistent/x.suite", &base, &s), TB_EIO);
    cr_assert(strstr(tb_error_get(), "/nonexistent/x.suite") != NULL);
    /* A directory opens fine with fopen; the message says what it is, not "read error". */
    cr_assert_eq(suite_load("/tmp", &base, &s), TB_EIO);
    cr_assert(strstr(tb_error_get(), "is a directory") != NULL, "%s", tb_error_get());
}

Test(harness_suite, runs_sharing_a_checkpoint_dir_are_refused_before_any_runs, .init = th_setup, .fini = th_teardown)
{
    /* The second run would find the first one's checkpoints and refuse to start, after the first ran. */
    expect_error("plan=train steps=5 checkpoint-dir=ck\nplan=train steps=9\nplan=train steps=7 checkpoint-dir=ck\n",
                 "t.suite:3:", "line 1");
    expect_error("plan=train steps=5 checkpoint-dir=ck lr=0.1,0.2\n", "t.suite:1:", "several runs");
    expect_error("plan=train steps=5 resume=ck\nplan=train steps=9 checkpoint-dir=ck\n", "t.suite:2:", "'ck'");
    /* The command line's directory is every line's default. */
    char p[192];
    th_write(th_path(p, sizeof p, "t.suite"), "plan=train steps=5\nplan=train steps=9\n");
    struct bench_config base;
    bench_config_defaults(&base);
    cr_assert_eq(bench_config_set(&base, "checkpoint-dir", "ck"), TB_OK);
    struct suite s;
    cr_assert_eq(suite_load(p, &base, &s), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "command line") != NULL, "%s", tb_error_get());
    struct suite ok;
    /* Directories of their own are fine, and so is a later line continuing an earlier one's run. */
    cr_assert_eq(load("plan=train steps=5 checkpoint-dir=a\nplan=train steps=5 checkpoint-dir=b\nplan=train steps=5\n"
                      "plan=train steps=6\nplan=train steps=9 resume=a\nplan=train steps=12 resume=a\n",
                      &ok),
                 TB_OK, "%s", tb_error_get());
    cr_assert_eq(ok.n_runs, 6);
    suite_free(&ok);
}

Test(harness_suite, a_bad_option_name_is_shown_escaped, .init = th_setup, .fini = th_teardown)
{
    expect_error("plan=train steps=5 \xff\xfe=1\n", "t.suite:1:", "'\\xff\\xfe'");
    expect_error("plan=train steps=5 no_eval\n", "t.suite:1:", "no_eval");
}

Test(harness_suite, the_default_suite_parses)
{
    char p[512];
    snprintf(p, sizeof p, "%s/suites/default.suite", TB_SOURCE_DIR);
    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    cr_assert_eq(suite_load(p, &base, &s), TB_OK, "%s", tb_error_get());
    cr_assert(s.n_runs >= 6);
    suite_free(&s);
}

/* Issue 30 item 1: suites/seed-002.suite is the seed's recipe on every backend, with tf.distribute's
 * per-replica batch: cpu and threads at batch 1, mirrored on 2 devices at global batch 2 (1 per replica),
 * ipu in 2 stages of micro-batch 1 x GA 2; 50 epochs of 2000 steps (ipu: 1000 updates of 2 samples, the
 * seed's 2000 micro-batches); mnist-mlp's Adam at 0.001; every run records the suite it came from. */
Test(harness_suite, the_seed_002_suite_expands_to_the_seed_s_runs)
{
    char p[512];
    snprintf(p, sizeof p, "%s/suites/seed-002.suite", TB_SOURCE_DIR);
    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    cr_assert_eq(suite_load(p, &base, &s), TB_OK, "%s", tb_error_get());
    cr_assert_eq(s.n_runs, 4);
    const char *backend[4] = {"cpu", "threads", "mirrored", "ipu"};
    const int batch[4] = {1, 1, 2, 2}, spe[4] = {2000, 2000, 2000, 1000};
    for (int k = 0; k < 4; k++) {
        const struct bench_config *c = &s.runs[k].c;
        cr_assert_str_eq(c->backend, backend[k]);
        cr_assert_str_eq(c->workload, "mnist-mlp");
        cr_assert_eq(c->plan, PLAN_TRAIN, "%s", backend[k]);
        cr_assert_eq(c->run.batch, batch[k], "%s: global batch %d", backend[k], c->run.batch);
        cr_assert_eq(c->epochs, 50, "%s", backend[k]);
        cr_assert_eq(c->steps_per_epoch, spe[k], "%s", backend[k]);
        cr_assert_eq(c->steps, 0, "%s: whole epochs, so the whole test set is evaluated", backend[k]);
        cr_assert_eq(c->run.optim.kind, OPTIM_ADAM, "%s", backend[k]);
        cr_assert_float_eq(c->run.optim.lr, 1e-3f, 1e-9f, "%s", backend[k]);
        cr_assert_str_eq(c->data, "", "%s: the data come from the command line (make seeds SEED_DATA)", backend[k]);
        cr_assert_str_eq(c->suite, p, "%s", backend[k]);
    }
    cr_assert_eq(s.runs[0].c.batch_per_replica, 1);
    cr_assert_eq(s.runs[2].c.batch_per_replica, 1);
    cr_assert_eq(s.runs[2].c.run.n_devices, 2);
    const struct bench_config *ipu = &s.runs[3].c;
    cr_assert_eq(ipu->run.ipu.stages, 2);
    cr_assert_eq(ipu->run.ipu.micro_batch, 1);
    cr_assert_eq(ipu->run.ipu.ga, 2);
    cr_assert_str_eq(ipu->run.ipu.schedule, "1f1b");
    suite_free(&s);
    /* --data on the command line reaches every run (MNIST from the user's folder). */
    snprintf(base.data, sizeof base.data, "/some/mnist");
    cr_assert_eq(suite_load(p, &base, &s), TB_OK, "%s", tb_error_get());
    for (int k = 0; k < s.n_runs; k++) cr_assert_str_eq(s.runs[k].c.data, "/some/mnist");
    suite_free(&s);
}

Test(harness_options, values_are_validated_with_the_option_named)
{
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "norm", "group:8"), TB_OK);
    cr_assert_str_eq(c.wopts.norm, "group");
    cr_assert_eq(c.wopts.norm_groups, 8);
    cr_assert_eq(bench_config_set(&c, "norm", "batch"), TB_OK);
    cr_assert_eq(c.wopts.norm_groups, 0);
    cr_assert_eq(bench_config_set(&c, "norm", "group:0"), TB_EINVAL);
    cr_assert_eq(bench_config_set(&c, "norm", "layer"), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "--norm") != NULL);
    cr_assert_eq(bench_config_set(&c, "split", "3,7,12"), TB_OK);
    cr_assert_str_eq(c.run.ipu.split, "3,7,12");
    cr_assert_eq(bench_config_set(&c, "split", "7,3"), TB_EINVAL);
    cr_assert_eq(bench_config_set(&c, "conv-algo", "fft"), TB_OK);
    cr_assert_str_eq(c.run.conv_algo, "fft");
    cr_assert_eq(bench_config_set(&c, "conv-algo", "winograd"), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "im2col") != NULL, "lists the valid names: %s", tb_error_get());
    cr_assert_eq(bench_config_set(&c, "transport", "mpi"), TB_OK);
    cr_assert_eq(c.run.transport_mpi, 1);
    cr_assert_eq(bench_config_set(&c, "schedule", "1f1b"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "precision", "bf16"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "dropout", "1.0"), TB_EINVAL);
    cr_assert_eq(bench_config_set(&c, "dropout", "0.25"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "sync-bn", NULL), TB_OK);
    cr_assert_eq(c.run.sync_bn, 1);
    cr_assert_eq(bench_config_set(&c, "recompute", "yes"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "run-id", "a/b"), TB_EINVAL);
    cr_assert_eq(bench_config_set(&c, "batch", NULL), TB_EINVAL);
    cr_assert_eq(bench_config_set(&c, "no-such-option", "1"), TB_EINVAL);
}

Test(harness_options, plan_defaults_and_conflicts)
{
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
    cr_assert_eq(c.plan, PLAN_THROUGHPUT, "no --epochs/--steps: the throughput plan");
    cr_assert_eq(c.steps, 100);
    cr_assert_eq(c.warmup, 10);
    bench_config_defaults(&c);
    bench_config_set(&c, "steps", "500");
    cr_assert_eq(bench_config_finish(&c), TB_OK);
    cr_assert_eq(c.plan, PLAN_TRAIN, "--steps alone keeps the training run");
    /* an exponential decay without --lr-decay-steps decays every step, as --help says: the row said 0 */
    bench_config_defaults(&c);
    bench_config_set(&c, "steps", "2");
    bench_config_set(&c, "lr-schedule", "exponential");
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
    cr_assert_eq(c.run.optim.decay_steps, 1);
    bench_config_defaults(&c);
    bench_config_set(&c, "plan", "scaling");
    cr_assert_eq(bench_config_finish(&c), TB_OK);
    cr_assert_eq(c.n_batches, 5);
    cr_assert_eq(c.batches[4], 256);
    bench_config_defaults(&c);
    bench_config_set(&c, "plan", "throughput");
    bench_config_set(&c, "epochs", "2");
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL);
    bench_config_defaults(&c);
    bench_config_set(&c, "target", "0.9");
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL, "--target without --plan tta");
    bench_config_defaults(&c);
    bench_config_set(&c, "backend", "warp-drive");
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "warp-drive") != NULL);
}

/* Unbounded reads: `--suite /dev/zero` grew to gigabytes in getline. Now a suite is a regular file with
 * lines of at most SUITE_MAX_LINE bytes and at most SUITE_MAX_BYTES in all. */
Test(harness_suite, long_lines_big_files_and_devices_are_refused, .init = th_setup, .fini = th_teardown)
{
    char *line = malloc(SUITE_MAX_LINE + 100);
    cr_assert_not_null(line);
    memset(line, 'a', SUITE_MAX_LINE + 98);
    memcpy(line, "plan=throughput # ", 18);
    line[SUITE_MAX_LINE + 98] = '\n', line[SUITE_MAX_LINE + 99] = '\0';
    expect_error(line, "t.suite:1:", "longer than");
    free(line);
    /* Many short comment lines: every line is fine, the file is not. */
    const size_t n = SUITE_MAX_BYTES + 64;
    char *big = malloc(n + 1);
    cr_assert_not_null(big);
    for (size_t i = 0; i < n; i += 32) memcpy(big + i, "# a comment line of 32 bytes...\n", n - i < 32 ? n - i : 32);
    memcpy(big, "plan=throughput # 32 bytes too.\n", 32);
    big[n] = '\0';
    expect_error(big, "t.suite", "larger than");
    free(big);
    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    cr_assert_eq(suite_load("/dev/zero", &base, &s), TB_EIO);
    cr_assert(strstr(tb_error_get(), "not a regular file") != NULL, "%s", tb_error_get());
}

/* A --run-id shared by several runs of a suite: the later runs would meet the first one's event log. */
Test(harness_suite, runs_sharing_a_run_id_are_refused_before_any_runs, .init = th_setup, .fini = th_teardown)
{
    expect_error("plan=throughput steps=5 run-id=a\nplan=throughput steps=9 run-id=b\nplan=throughput steps=7 run-id=a\n",
                 "t.suite:3:", "line 1");
    char p[192];
    th_write(th_path(p, sizeof p, "t.suite"), "plan=throughput steps=5\nplan=throughput steps=9\n");
    struct bench_config base;
    bench_config_defaults(&base);
    cr_assert_eq(bench_config_set(&base, "run-id", "x"), TB_OK);
    struct suite s;
    cr_assert_eq(suite_load(p, &base, &s), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "'x'") != NULL, "%s", tb_error_get());
}

/* A value each backend-only option accepts; every option a registry entry names must be here, so a new
 * one is tested as soon as a backend declares it. */
static const char *backend_option_value(const char *name)
{
    static const char *const values[][2] = {
        {"threads", "2"},        {"devices", "2"},         {"transport", "shm"},     {"sync-bn", NULL},
        {"stages", "2"},         {"split", "3"},           {"micro-batch", "2"},     {"ga", "2"},
        {"replicas", "1"},       {"schedule", "1f1b"},     {"recompute", NULL},      {"precision", "bf16"},
        {"loss-scale", "1024"},  {"prefetch", "2"},        {"timeline", "t.csv"},    {"replicas-list", "1,2"},
        {"ga-list", "2"},        {"micro-batch-list", "2"}, {"project-devices", "16"}, {"link-bw", "10"},
        {"link-latency", "1"},   {"allreduce-bw", "10"},   {"allreduce-latency", "1"},
        {"project-device", "ipu-bow"}, {"device-set", "kernel_overhead_us=1"},
    };
    for (size_t k = 0; k < sizeof values / sizeof *values; k++)
        if (!strcmp(values[k][0], name)) return values[k][1];
    cr_assert_fail("no test value for the backend option --%s", name);
    return NULL;
}

/* Each option a backend declares is accepted with that backend and refused, naming the option and the
 * backends that take it, with every other one (it used to be recorded in the row and ignored). */
Test(harness_options, each_backend_takes_its_own_options_and_refuses_the_others, .init = th_setup,
     .fini = th_teardown)
{
    int n_opts, n_backends, n_checked = 0;
    const struct bench_option *o = bench_options(&n_opts);
    const struct backend_entry *b = backend_registry(&n_backends);
    th_stderr_begin();
    for (int k = 0; k < n_opts; k++) {
        char who[128];
        if (backend_option_takers(o[k].name, who, sizeof who) == 0) continue;
        const char *value = backend_option_value(o[k].name);
        const int is_list = strstr(o[k].name, "-list") != NULL; /* grid lists: --plan scaling */
        for (int i = 0; i < n_backends; i++) {
            struct bench_config c;
            bench_config_defaults(&c);
            cr_assert_eq(bench_config_set(&c, "backend", b[i].name), TB_OK);
            if (is_list) cr_assert_eq(bench_config_set(&c, "plan", "scaling"), TB_OK);
            /* --sync-bn wants a model with BatchNorm (the default mnist-mlp has none) */
            if (!strcmp(o[k].name, "sync-bn")) cr_assert_eq(bench_config_set(&c, "workload", "effnet-b0"), TB_OK);
            cr_assert_eq(bench_config_set(&c, o[k].name, value), TB_OK, "--%s: %s", o[k].name, tb_error_get());
            /* --loss-scale scales fp16's loss: with another precision it is refused as doing nothing */
            if (!strcmp(o[k].name, "loss-scale") && backend_takes_option(b[i].name, "precision"))
                cr_assert_eq(bench_config_set(&c, "precision", "fp16"), TB_OK);
            /* --device-set overrides a --project-device spec: alone it is refused as doing nothing */
            if (!strcmp(o[k].name, "device-set") && backend_takes_option(b[i].name, "project-device"))
                cr_assert_eq(bench_config_set(&c, "project-device", "ipu-bow"), TB_OK);
            /* the link model is --project-devices': alone it is refused as doing nothing */
            if (strstr(o[k].name, "link-") || strstr(o[k].name, "allreduce-")) {
                if (backend_takes_option(b[i].name, "project-devices"))
                    cr_assert_eq(bench_config_set(&c, "project-devices", "16"), TB_OK);
            }
            const int st = bench_config_finish(&c);
            if (backend_takes_option(b[i].name, o[k].name)) {
                cr_assert_eq(st, TB_OK, "%s refused its own --%s: %s", b[i].name, o[k].name, tb_error_get());
                continue;
            }
            const char *msg = tb_error_get();
            char opt[64];
            snprintf(opt, sizeof opt, "--%s", o[k].name);
            cr_assert_eq(st, TB_EINVAL, "%s accepted --%s, which only %s take", b[i].name, o[k].name, who);
            cr_assert(strstr(msg, opt) && strstr(msg, who) && strstr(msg, b[i].name) && !strchr(msg, '\n'),
                      "%s --%s: the message should name the option, %s and %s on one line: %s", b[i].name,
                      o[k].name, who, b[i].name, msg);
            n_checked++;
        }
    }
    free(th_stderr_end());
    cr_assert_gt(n_checked, 20, "the registry names backend options");
    /* The options every backend takes are unaffected. */
    for (int i = 0; i < n_backends; i++) {
        struct bench_config c;
        bench_config_defaults(&c);
        cr_assert_eq(bench_config_set(&c, "backend", b[i].name), TB_OK);
        cr_assert_eq(bench_config_set(&c, "batch", "16"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "lr", "0.01"), TB_OK);
        /* a backend tied to a device (cuda) takes only that --device, and its kernels no --conv-algo choice (on
         * a model with convolutions: mnist-mlp has none to take one) */
        const char *tied = b[i].caps.device;
        cr_assert_eq(bench_config_set(&c, "workload", "effnet-b0"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "conv-algo", tied ? "auto" : "im2col"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "device", tied ? tied : "cpu"), TB_OK);
        cr_assert_eq(bench_config_finish(&c), TB_OK, "%s: %s", b[i].name, tb_error_get());
    }
}

/* backend=* expands to the backends that take the line's options (a note names the others); a named
 * backend that does not take one is an error at file:line, and so is a line no backend can run. */
Test(harness_suite, star_keeps_the_backends_that_take_the_line_s_options, .init = th_setup, .fini = th_teardown)
{
    const char *names[32];
    const int n_backends = runnable_backends(names);
    int n_takers = 0;
    for (int k = 0; k < n_backends; k++) n_takers += backend_takes_option(names[k], "stages");
    struct suite s;
    char *err;
    cr_assert_eq(load_err("plan=throughput backend=* stages=2 steps=2\nplan=throughput backend=* steps=2\n", &s, &err),
                 TB_OK, "%s", tb_error_get());
    cr_assert_eq(s.n_runs, n_takers + n_backends, "stages=2 runs only where it means something");
    /* The note names the backends left out (cpu among them), once, for line 1. */
    const char *note = strstr(err, "t.suite:1: backend=* runs the backends that take the line's options; skipping ");
    cr_assert(note && strstr(note, "cpu") && !strstr(note + 1, "t.suite:1: backend=*"), "%s", err);
    cr_assert(!strstr(err, "t.suite:2:"), "line 2 leaves out nothing: %s", err);
    free(err);
    for (int k = 0; k < n_takers; k++) {
        cr_assert(backend_takes_option(s.runs[k].c.backend, "stages"), "%s got stages=2", s.runs[k].c.backend);
        cr_assert_eq(s.runs[k].c.run.ipu.stages, 2);
    }
    suite_free(&s);
    expect_error("plan=throughput backend=cpu stages=2\n", "t.suite:1:",
                 "--stages is an option of the ipu backend, not cpu");
    expect_error("plan=throughput backend=* stages=2 sync-bn\n", "t.suite:1:",
                 "no registered backend takes every option");
}

/* Every suite shipped in suites/ still validates (make demo runs default.suite). */
Test(harness_suite, every_shipped_suite_validates)
{
    char pattern[512];
    snprintf(pattern, sizeof pattern, "%s/suites/*.suite", TB_SOURCE_DIR);
    glob_t g;
    cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no suites in %s", pattern);
    for (size_t k = 0; k < g.gl_pathc; k++) {
        struct bench_config base;
        bench_config_defaults(&base);
        struct suite s;
        cr_assert_eq(suite_load(g.gl_pathv[k], &base, &s), TB_OK, "%s", tb_error_get());
        cr_assert_gt(s.n_runs, 0, "%s has no runs", g.gl_pathv[k]);
        suite_free(&s);
    }
    globfree(&g);
}
