/* test_resume.c — checkpoints, resume, stop signals and divergence, through `bench` (TB_BENCH_EXE) and
 * the checkpoint library.
 *
 * The central claim: on cpu, a run that is stopped (at a step boundary by --steps, or by SIGINT and
 * SIGTERM mid-run) and continued with --resume reaches BITWISE the parameters and optimizer state of the
 * same run done straight, because a checkpoint holds params, buffers and optimizer state and the data
 * stream and all randomness are functions of (seed, step, sample); its first_loss and final_loss are the
 * straight run's too, from the losses the checkpoint carries. Also: a stop signal exits 130/143
 * with a checkpoint and a "status":"interrupted" row; a configuration that differs from the
 * checkpoint's is a usage error (exit 2) naming the difference (an unset dropout as the workload's); an
 * unreadable newest checkpoint (torn, or a malformed tta_state or loss_scaler) falls back to the one before and is
 * renamed aside, out of pruning's count; an unreadable finished.json refuses the resume of a run's last step (exit 1,
 * no row); --load of a malformed file is one line, exit 1, no row; a NaN loss writes a
 * "status":"diverged" row without throughput or accuracy and exits 1.
 * Time to accuracy resumes too: interrupted (in its first seed or a later one) and resumed, it takes the
 * same steps and evaluations, reaches the target at the same step with bitwise the same parameters, and
 * its clock continues from the seconds already spent; train and tta never take each other's checkpoints.
 * fp16's loss-scale policy is part of the configuration (an older checkpoint without it resumes, with a note).
 * tools/ckpt_roundtrip.py loads both a --save file and a resumable checkpoint into torchvision.
 * Every child runs in a fresh temp directory on the MLP with a 1000-sample synthetic set. A test's refusals after its
 * first, and setup runs none of whose numbers are compared, run in the test's own process instead (run_here).
 */
#include "test_ckpt_meta.h"
#include "test_reliability_util.h"

#include "results.h"

TestSuite(resume, .timeout = 120);

/* A fresh directory for a test's runs. */
static char *new_dir(void)
{
    return tu_mkdtemp("resume");
}

/* Whether the trainable tensors (and with_opt their optimizer copies) of two models agree bitwise;
 * the padding between tensors is not stored. */
static int same_entries(const struct rb_model *a, const struct rb_model *b, int with_opt)
{
    for (int k = 0; k < a->m.n_entries; k++) {
        const struct param_entry *e = &a->m.params[k];
        if (e->kind == PARAM_BUFFER || e->kind == PARAM_COUNTER) continue;
        if (memcmp(a->p + e->off, b->p + e->off, e->n * sizeof(float)) != 0) return 0;
        for (int j = 0; with_opt && j < a->spp; j++) {
            const size_t o = (size_t)j * a->m.n_params + e->off;
            if (memcmp(a->o + o, b->o + o, e->n * sizeof(float)) != 0) return 0;
        }
    }
    return 1;
}

/* bench's run with base then extra (as rb_run takes them) in this process, in dir: the options set as the command
 * line sets them (rb_config_args), then bench_run. Returns its status (TB_EINVAL is the command line's exit status
 * 2; the message in tb_error_get()) and in *out what it printed (malloc'd). For what needs no process of its own: a
 * spawned bench under ASan costs 0.3-0.5 CPU-s before it reads an option. Each kind of refusal a test checks stays
 * a spawn in at least one test (exit status, the line on stderr), as do the runs whose numbers are compared: bench
 * chooses its own OpenBLAS kernel set (--blas-core auto), so this process need not compute bench's bits. */
static int run_here(const char *dir, const char *const *base, const char *const *extra, char **out)
{
    const char *args[80];
    int n = 0;
    for (const char *const *l = base; l && *l; l++) args[n++] = *l;
    for (const char *const *l = extra; l && *l; l++) {
        cr_assert_lt(n, 79, "more than 79 arguments");
        args[n++] = *l;
    }
    args[n] = NULL;
    char cwd[4096];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(dir), 0, "cannot enter %s", dir);
    struct bench_config c;
    rb_streams_begin();
    int st = rb_config_args(&c, args, 0);
    if (st == TB_OK) st = bench_run(&c);
    *out = rb_streams_end();
    cr_assert_eq(chdir(cwd), 0);
    return st;
}

/* run_here as rb_run and rb_stderr see a spawned bench: the exit status bench gives its status (main_bench.c: 0, 2
 * for TB_EINVAL, else 1), and in *err (malloc'd) what it printed, then its message as bench prints it on stderr. */
static int run_here_cli(const char *dir, const char *const *base, const char *const *extra, char **err)
{
    char *out;
    const int st = run_here(dir, base, extra, &out);
    if (st == TB_OK) {
        *err = out;
        return 0;
    }
    cr_assert(asprintf(err, "%sbench: %s\n", out, tb_error_get()) > 0);
    free(out);
    return st == TB_EINVAL ? 2 : 1;
}

/* Case i of a kind of refusal, as rb_run and rb_stderr see it: the first (i == 0) spawned as `name`, the others in
 * this process (run_here_cli), as a spawn under ASan costs 0.3-0.5 CPU-s before bench reads an option. */
static int run_case(const char *dir, int i, const char *name, const char *const *base, const char *const *extra,
                    char **err)
{
    if (i > 0) return run_here_cli(dir, base, extra, err);
    const int code = rb_run(dir, name, base, extra);
    *err = rb_stderr(dir, name);
    return code;
}

/* A setup run in this process (run_here): one whose checkpoint a refusal or a resume reads, none of its numbers
 * compared. Fails the test unless bench would have exited 0. */
static void run_ref(const char *dir, const char *const *base, const char *const *extra)
{
    char *err;
    const int code = run_here_cli(dir, base, extra, &err);
    cr_assert_eq(code, 0, "a setup run in this process: exit %d: %s", code, err);
    free(err);
}

Test(resume, checkpoint_state_round_trip_and_directory_rules)
{
    char *dir = new_dir();
    struct rb_model a, b;
    rb_model_init(&a);
    rb_model_init(&b);
    tu_fill_normal(a.p, a.m.n_params, 1, 0.0f, 1.0f);
    tu_fill_normal(a.o, (size_t)a.spp * a.m.n_params, 2, 0.0f, 1.0f);
    char p5[512], p7[512], p9[512];
    checkpoint_dir_path(dir, 5, p5, sizeof p5);
    checkpoint_dir_path(dir, 7, p7, sizeof p7);
    checkpoint_dir_path(dir, 9, p9, sizeof p9);
    cr_assert_eq(checkpoint_save_state(p5, &a.m, a.p, a.b, a.o, a.spp, "{\"step\":5}"), TB_OK, "%s", tb_error_get());
    /* The optimizer tensors come back exactly; a plain load ignores them; a load that wants more copies
     * than the file has fails naming the missing tensor. */
    cr_assert_eq(checkpoint_load_state(p5, &b.m, b.p, b.b, b.o, b.spp), TB_OK, "%s", tb_error_get());
    cr_assert(same_entries(&a, &b, 1));
    memset(b.p, 0, b.m.n_params * sizeof(float));
    cr_assert_eq(checkpoint_load(p5, &b.m, b.p, b.b), TB_OK, "%s", tb_error_get());
    cr_assert(same_entries(&a, &b, 0));
    float *o3 = tu_fvec(3 * a.m.n_params);
    cr_assert_eq(checkpoint_load_state(p5, &b.m, b.p, b.b, o3, 3), TB_EFORMAT);
    cr_assert(strstr(tb_error_get(), "__optimizer__") != NULL, "%s", tb_error_get());
    free(o3);
    /* A weights-only file is not resumable. */
    cr_assert_eq(checkpoint_save(p7, &a.m, a.p, a.b, NULL), TB_OK, "%s", tb_error_get());
    cr_assert_eq(checkpoint_load_state(p7, &b.m, b.p, b.b, b.o, b.spp), TB_EFORMAT);
    /* Listing: newest first; temporary files and other names are ignored. */
    cr_assert_eq(checkpoint_save_state(p9, &a.m, a.p, a.b, a.o, a.spp, NULL), TB_OK, "%s", tb_error_get());
    char *junk[] = {rb_path(dir, "ckpt-0000000011.safetensors.tmp.Ab12Cd"), rb_path(dir, "notes.txt"),
                    rb_path(dir, "ckpt-12.safetensors.bak")};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(junk[i], "w");
        cr_assert_not_null(f);
        fputs("x", f);
        fclose(f);
    }
    long steps[8];
    int n = 0;
    cr_assert_eq(checkpoint_dir_list(dir, steps, 8, &n), TB_OK, "%s", tb_error_get());
    cr_assert_eq(n, 3);
    cr_assert(steps[0] == 9 && steps[1] == 7 && steps[2] == 5, "got %ld %ld %ld", steps[0], steps[1], steps[2]);
    /* Pruning keeps the newest two and removes the temporary file, nothing else. */
    cr_assert_eq(checkpoint_dir_prune(dir, 2), TB_OK, "%s", tb_error_get());
    cr_assert_eq(checkpoint_dir_list(dir, steps, 8, &n), TB_OK);
    cr_assert(n == 2 && steps[0] == 9 && steps[1] == 7);
    cr_assert_neq(access(junk[0], F_OK), 0, "the stale temporary file survived pruning");
    cr_assert_eq(access(junk[1], F_OK), 0);
    cr_assert_eq(access(junk[2], F_OK), 0);
    for (int i = 0; i < 3; i++) free(junk[i]);
    char *deep = rb_path(dir, "a/b/c");
    cr_assert_eq(checkpoint_dir_create(deep), TB_OK, "%s", tb_error_get());
    cr_assert_eq(checkpoint_dir_create(deep), TB_OK, "%s", tb_error_get());
    free(deep);
    rb_model_free(&a);
    rb_model_free(&b);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, stopped_at_a_step_and_resumed_is_bitwise_the_straight_run)
{
    char *dir = new_dir();
    /* Straight: 200 steps, checkpointing every 37 (which must not perturb anything). */
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(RB_BASE),
                        RB_ARGS("--steps", "200", "--checkpoint-dir", "ck_straight", "--checkpoint-every", "37",
                                "--save", "straight.st")),
                 0);
    /* 80 steps, then continued to 200. */
    cr_assert_eq(rb_run(dir, "part1", RB_ARGS(RB_BASE), RB_ARGS("--steps", "80", "--checkpoint-dir", "ck")), 0);
    struct json_value *r1 = rb_last_row(dir);
    const double t1 = json_get_number(r1, "figures.train_time_s", NAN);
    json_value_free(r1);
    cr_assert_eq(rb_run(dir, "part2", RB_ARGS(RB_BASE), RB_ARGS("--steps", "200", "--resume", "ck", "--save", "resumed.st")),
                 0);
    struct json_value *r2 = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r2, "status", ""), "ok");
    cr_assert_eq(json_get_number(r2, "figures.resumed_from_step", -1), 80);
    cr_assert_eq(json_get_number(r2, "figures.session_steps", -1), 120);
    cr_assert_eq(json_get_number(r2, "figures.train_steps", -1), 200);
    /* Training time is what was spent: the first part's seconds plus this session's. */
    const double prev = json_get_number(r2, "figures.previous_train_time_s", NAN),
                 sess = json_get_number(r2, "figures.session_train_time_s", NAN),
                 tot = json_get_number(r2, "figures.train_time_s", NAN);
    cr_assert(fabs(prev - t1) < 1e-9 && sess > 0 && fabs(tot - (prev + sess)) < 1e-9, "prev %g (first part %g), session %g, total %g",
              prev, t1, sess, tot);
    cr_assert(json_get_number(r2, "figures.test_accuracy", NAN) >= 0.0);
    json_value_free(r2);

    char *a = rb_path(dir, "straight.st"), *b = rb_path(dir, "resumed.st");
    rb_assert_same_tensors(a, b, 0);
    char *ca = rb_path(dir, "ck_straight/ckpt-0000000200.safetensors"), *cb = rb_path(dir, "ck/ckpt-0000000200.safetensors");
    rb_assert_same_tensors(ca, cb, 1);
    /* The straight run kept its newest two checkpoints: 185 (=5·37) and the final 200. */
    char *cs = rb_path(dir, "ck_straight");
    long steps[8];
    int n = 0;
    cr_assert_eq(checkpoint_dir_list(cs, steps, 8, &n), TB_OK);
    cr_assert(n == 2 && steps[0] == 200 && steps[1] == 185, "n %d: %ld %ld", n, steps[0], steps[1]);
    char v[64];
    cr_assert_eq(checkpoint_read_meta(ca, "step", v, sizeof v), TB_OK);
    cr_assert_str_eq(v, "200");
    cr_assert_eq(checkpoint_read_meta(ca, "workload", v, sizeof v), TB_OK);
    cr_assert_str_eq(v, "mnist-mlp");
    free(a), free(b), free(ca), free(cb), free(cs);
    tu_rm_rf(dir);
    free(dir);
}

/* The text of the number under "key" in dir's last row, as bench wrote it (%.17g), into out; the key must occur
 * once in the row. */
static void last_row_number(const char *dir, const char *key, char *out, size_t n)
{
    char *p = rb_path(dir, "results.jsonl");
    char *s = tu_read_file(p, NULL);
    cr_assert_not_null(s, "no results file %s", p);
    size_t len = strlen(s);
    while (len > 0 && s[len - 1] == '\n') s[--len] = '\0';
    const char *line = strrchr(s, '\n');
    line = line ? line + 1 : s;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *v = strstr(line, pat);
    cr_assert_not_null(v, "no %s in the last row of %s", key, p);
    cr_assert_null(strstr(v + 1, pat), "%s twice in the last row of %s", key, p);
    v += strlen(pat);
    snprintf(out, n, "%.*s", (int)strcspn(v, ",}"), v);
    free(s);
    free(p);
}

/* dir/name's text, malloc'd (NULL if it cannot be read). */
static char *read_in(const char *dir, const char *name)
{
    char *p = rb_path(dir, name), *s = tu_read_file(p, NULL);
    free(p);
    return s;
}

/* Makes ck a checkpoint of a build before checkpoints kept the run's losses: those metadata keys renamed in
 * place ("first_loss" → "xirst_loss"), so the header keeps its length and every tensor offset. */
static void hide_loss_history(const char *ck)
{
    FILE *f;
    size_t hlen;
    char *h = ckpt_header_read(ck, &f, &hlen);
    static const char *const keys[] = {"\"first_loss\":", "\"last_losses\":"};
    for (int k = 0; k < 2; k++) {
        char *at = strstr(h, keys[k]);
        cr_assert_not_null(at, "%s has no %s", ck, keys[k]);
        cr_assert_null(strstr(at + 1, keys[k]));
        at[1] = 'x';
    }
    ckpt_header_write(f, h, hlen);
    free(h);
}

/* A resumed run's first_loss and final_loss are the whole run's (a probe's: after 60 + 60 steps the row had
 * step 61's loss as first_loss and the mean of the last 60 steps, not 100): checkpoints carry step 1's loss
 * and the last 100 steps' losses, so one resume or two give the straight run's figures to the bit. A
 * checkpoint without them (an older build's) still resumes; its row marks figures of the session alone. */
Test(resume, a_resumed_runs_loss_figures_are_the_straight_runs)
{
    char *dir = new_dir();
    /* RB_BASE without --quiet: the summary's loss line is checked too. */
#define LOSS_BASE "--data", "synthetic", "--synthetic-samples", "1000,200", "--batch", "8", "--mllog", "none", \
                  "--out", "results.jsonl", "--no-eval"
    char first[64], final[64], v[64];
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(LOSS_BASE), RB_ARGS("--steps", "120", "--save", "straight.st")), 0);
    last_row_number(dir, "first_loss", first, sizeof first);
    last_row_number(dir, "final_loss", final, sizeof final);
    /* 60 + 60: a tail of 60 from the checkpoint and 60 of the session. */
    cr_assert_eq(rb_run(dir, "a1", RB_ARGS(LOSS_BASE), RB_ARGS("--steps", "60", "--checkpoint-dir", "ck2")), 0);
    cr_assert_eq(rb_run(dir, "a2", RB_ARGS(LOSS_BASE), RB_ARGS("--steps", "120", "--resume", "ck2", "--save", "two.st")),
                 0);
    last_row_number(dir, "first_loss", v, sizeof v);
    cr_assert_str_eq(v, first, "60 + 60: first_loss %s, straight %s", v, first);
    last_row_number(dir, "final_loss", v, sizeof v);
    cr_assert_str_eq(v, final, "60 + 60: final_loss %s, straight %s", v, final);
    struct json_value *r = rb_last_row(dir);
    cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), 60);
    cr_assert_eq(json_get_number(r, "figures.loss_figures_from_step", -1), 1, "a full history marked partial");
    json_value_free(r);
    char *out = read_in(dir, "a2.out");
    cr_assert(out && strstr(out, " at step 1, ") && strstr(out, "mean of the last 100 steps"), "%s", out);
    free(out);
    /* 40 + 40 + 40: the middle session's checkpoint carries the first one's losses on, cut to the last 100. */
    cr_assert_eq(rb_run(dir, "b1", RB_ARGS(LOSS_BASE), RB_ARGS("--steps", "40", "--checkpoint-dir", "ck3")), 0);
    /* A copy of step 40's checkpoint, for the case of a checkpoint without the history below. */
    char *ck40 = rb_path(dir, "ck3/ckpt-0000000040.safetensors"), *old_dir = rb_path(dir, "ck_old"),
         *ck = rb_path(dir, "ck_old/ckpt-0000000040.safetensors");
    cr_assert_eq(mkdir(old_dir, 0755), 0);
    size_t ck_len = 0;
    char *ck_bytes = tu_read_file(ck40, &ck_len);
    cr_assert_not_null(ck_bytes, "%s", ck40);
    tu_write_file(ck, ck_bytes, ck_len);
    free(ck_bytes);
    cr_assert_eq(rb_run(dir, "b2", RB_ARGS(LOSS_BASE), RB_ARGS("--steps", "80", "--resume", "ck3", "--checkpoint-dir", "ck3")),
                 0);
    cr_assert_eq(rb_run(dir, "b3", RB_ARGS(LOSS_BASE), RB_ARGS("--steps", "120", "--resume", "ck3", "--save", "three.st")),
                 0);
    last_row_number(dir, "first_loss", v, sizeof v);
    cr_assert_str_eq(v, first, "40 + 40 + 40: first_loss %s, straight %s", v, first);
    last_row_number(dir, "final_loss", v, sizeof v);
    cr_assert_str_eq(v, final, "40 + 40 + 40: final_loss %s, straight %s", v, final);
    char *a = rb_path(dir, "straight.st"), *b = rb_path(dir, "two.st"), *c = rb_path(dir, "three.st");
    rb_assert_same_tensors(a, b, 0);
    rb_assert_same_tensors(a, c, 0);
    /* A checkpoint without the history: the run resumes, and its row and summary say whose figures they are. */
    hide_loss_history(ck);
    cr_assert_eq(rb_run(dir, "old", RB_ARGS(LOSS_BASE), RB_ARGS("--steps", "120", "--resume", "ck_old")), 0);
    r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), 40);
    cr_assert_eq(json_get_number(r, "figures.loss_figures_from_step", -1), 41);
    json_value_free(r);
    last_row_number(dir, "first_loss", v, sizeof v);
    cr_assert_str_neq(v, first);
    char *err = rb_stderr(dir, "old");
    cr_assert(strstr(err, "holds no loss history") && strstr(err, "ckpt-0000000040"), "%s", err);
    free(err);
    out = read_in(dir, "old.out");
    cr_assert(out && strstr(out, " at step 41, ") && strstr(out, "mean of the last 80 steps"), "%s", out);
    free(out);
#undef LOSS_BASE
    free(a), free(b), free(c), free(ck40), free(old_dir), free(ck);
    tu_rm_rf(dir);
    free(dir);
}

/* The same on the multi-device engines: a resumed mirrored or ipu run (fp32) is bitwise that backend's own
 * straight run; their gradient sums differ from cpu's order, never from their own. The straight run's checkpoint at
 * step 25 (of one every 25 steps) is what the resumed run starts from, in a directory of its own: two runs a backend
 * rather than a third to stop at step 25 (a bench spawned under ASan costs 0.3-0.5 CPU-s before it reads an option);
 * a checkpoint that perturbed the straight run, or missed a replica's or a stage's state, still shows in the bits. */
Test(resume, mirrored_and_ipu_resume_bitwise_their_straight_run, .timeout = 120)
{
    static const char *const backends[][24] = {
        {RB_BASE, "--backend", "mirrored", "--devices", "2", NULL},
        {RB_BASE, "--backend", "ipu", "--stages", "2", "--micro-batch", "2", "--ga", "4", NULL},
        {RB_BASE, "--backend", "ipu", "--stages", "2", "--micro-batch", "2", "--ga", "2", "--replicas", "2", NULL},
    };
    for (int k = 0; k < 3; k++) {
        char *dir = new_dir();
        const char *const *be = backends[k];
        cr_assert_eq(rb_run(dir, "straight", be,
                            RB_ARGS("--steps", "50", "--no-eval", "--save", "straight.st", "--checkpoint-dir", "ck_s",
                                    "--checkpoint-every", "25")),
                     0, "backend line %d: straight run failed", k);
        char *from = rb_path(dir, "ck_s/ckpt-0000000025.safetensors"), *ck = rb_path(dir, "ck"),
             *to = rb_path(dir, "ck/ckpt-0000000025.safetensors");
        cr_assert_eq(mkdir(ck, 0755), 0);
        size_t len = 0;
        char *bytes = tu_read_file(from, &len);
        cr_assert_not_null(bytes, "backend line %d: no checkpoint at step 25: %s", k, from);
        tu_write_file(to, bytes, len);
        free(bytes), free(from), free(ck), free(to);
        cr_assert_eq(rb_run(dir, "part2", be,
                            RB_ARGS("--steps", "50", "--no-eval", "--resume", "ck", "--save", "resumed.st")),
                     0, "backend line %d: resumed part failed", k);
        /* It resumed (a run that ignored the checkpoint would end on the same bits too). */
        struct json_value *r = rb_last_row(dir);
        cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), 25, "backend line %d", k);
        cr_assert_eq(json_get_number(r, "figures.session_steps", -1), 25, "backend line %d", k);
        json_value_free(r);
        char *a = rb_path(dir, "straight.st"), *b = rb_path(dir, "resumed.st");
        rb_assert_same_tensors(a, b, 0);
        free(a), free(b);
        tu_rm_rf(dir);
        free(dir);
    }
}

/* fp16's loss scaler rides in the checkpoint: an ipu fp16 run at a learning rate whose first steps overflow
 * (its dynamic scale halves from 32768), resumed after them, ends bitwise the straight run with the straight
 * run's scale and skipped steps in its row. Before, the resumed run started again at 32768 and its row
 * counted only its own skips (0 against the straight run's SKIPPED). The split is given: chosen by timing
 * (the default), a busy machine once put the resumed run's stage boundary one block later than the straight
 * run's, and fp16 rounds what crosses a boundary, so the bits differed with nothing wrong in the resume. */
Test(resume, fp16_loss_scaler_resumes_where_it_was)
{
    static const char *const be[] = {RB_BASE, "--backend", "ipu", "--stages", "2", "--split", "2", "--ga", "2",
                                      "--precision", "fp16", "--lr", "0.05", NULL};
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "straight", be, RB_ARGS("--steps", "60", "--no-eval", "--save", "straight.st")), 0);
    struct json_value *rs = rb_last_row(dir);
    const double scale = json_get_number(rs, "figures.loss_scaling.scale", NAN),
                 skipped = json_get_number(rs, "figures.loss_scaling.skipped_steps", NAN);
    cr_assert(skipped > 0 && scale < 32768, "the straight run skipped %g steps (scale %g): no overflow to carry", skipped,
              scale);
    cr_assert_eq(rb_run(dir, "part1", be, RB_ARGS("--steps", "25", "--no-eval", "--checkpoint-dir", "ck")), 0);
    struct json_value *r1 = rb_last_row(dir);
    cr_assert_eq(json_get_number(r1, "figures.loss_scaling.skipped_steps", -1), skipped,
                 "the overflows are in the first 25 steps");
    cr_assert_eq(rb_run(dir, "part2", be, RB_ARGS("--steps", "60", "--no-eval", "--resume", "ck", "--save", "resumed.st")),
                 0);
    struct json_value *rr = rb_last_row(dir);
    cr_assert_eq(json_get_number(rr, "figures.resumed_from_step", -1), 25);
    const double rscale = json_get_number(rr, "figures.loss_scaling.scale", NAN),
                 rskipped = json_get_number(rr, "figures.loss_scaling.skipped_steps", NAN);
    cr_assert(rscale == scale && rskipped == skipped, "resumed: scale %g, %g steps skipped; straight: %g, %g", rscale,
              rskipped, scale, skipped);
    char *a = rb_path(dir, "straight.st"), *b = rb_path(dir, "resumed.st");
    rb_assert_same_tensors(a, b, 0);
    json_value_free(rs), json_value_free(r1), json_value_free(rr);
    free(a), free(b);
    tu_rm_rf(dir);
    free(dir);
}

/* The length of the run a signal stops mid-way, in steps, and as its --steps argument: long enough that the signal,
 * sent when a checkpoint appears (every 100 steps), lands well before the end. Under ASan, where a step takes about
 * 5 times as long (0.5 ms against 0.09), 1000 steps: the 800 or so left after the second stop still outlast the
 * main build's 2800 (0.4 s against 0.26); the resumes and their bits do not depend on the length. */
#define MID_RUN_STEPS (TU_UNDER_ASAN ? 1000 : 3000)
#define MID_RUN_STEPS_ARG (TU_UNDER_ASAN ? "1000" : "3000")

/* Starts a long run (or its resumption), waits for a checkpoint newer than `after`, sends sig; returns
 * the step the run reports it stopped at, after checking exit status, row and checkpoint. */
static long interrupt_once(const char *dir, const char *tag, const char *const *extra, long after, int sig)
{
    pid_t pid = rb_start(dir, tag, RB_ARGS(RB_BASE), extra);
    char *ck = rb_path(dir, "ck");
    int exited = 0;
    long seen = rb_wait_checkpoint(pid, ck, after, &exited);
    cr_assert_geq(seen, 0, "%s finished (status %d) before it could be interrupted", tag, exited);
    cr_assert_eq(kill(pid, sig), 0);
    const int code = rb_wait(pid);
    char *err = rb_stderr(dir, tag);
    cr_assert_eq(code, 128 + sig, "%s: exit status %d after signal %d, want %d; stderr: %s", tag, code, sig, 128 + sig,
                 err);
    cr_assert(strstr(err, "--resume ck") != NULL, "%s: the message does not say how to resume: %s", tag, err);
    free(err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "interrupted");
    cr_assert_eq(json_get_bool(r, "figures.partial", 0), 1);
    cr_assert_str_eq(json_get_str(r, "figures.stopped_by", ""), sig == SIGINT ? "SIGINT" : "SIGTERM");
    cr_assert_null(json_get(r, "figures.images_per_s"), "an interrupted row must not carry a headline rate");
    cr_assert_null(json_get(r, "figures.test_accuracy"));
    const long done = (long)json_get_number(r, "figures.completed_steps", -1);
    cr_assert(done >= seen && done < MID_RUN_STEPS, "%s: completed_steps %ld (a checkpoint at %ld was seen)", tag, done,
              seen);
    char want[600];
    checkpoint_dir_path("ck", done, want, sizeof want);
    cr_assert_str_eq(json_get_str(r, "figures.checkpoint", ""), want);
    json_value_free(r);
    cr_assert_eq(rb_newest(ck), done, "the newest checkpoint is not the stop's");
    free(ck);
    return done;
}

Test(resume, sigint_and_sigterm_mid_run_then_resume_is_bitwise)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(RB_BASE),
                        RB_ARGS("--steps", MID_RUN_STEPS_ARG, "--no-eval", "--save", "straight.st")),
                 0);
    const long k1 = interrupt_once(dir, "first",
                                   RB_ARGS("--steps", MID_RUN_STEPS_ARG, "--no-eval", "--checkpoint-dir", "ck",
                                           "--checkpoint-every", "100"),
                                   0, SIGINT);
    const long k2 = interrupt_once(dir, "second", RB_ARGS("--steps", MID_RUN_STEPS_ARG, "--no-eval", "--resume", "ck"),
                                   k1, SIGTERM);
    cr_assert_gt(k2, k1);
    cr_assert_eq(rb_run(dir, "last", RB_ARGS(RB_BASE),
                        RB_ARGS("--steps", MID_RUN_STEPS_ARG, "--no-eval", "--resume", "ck", "--save", "resumed.st")),
                 0);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), k2);
    json_value_free(r);
    char *a = rb_path(dir, "straight.st"), *b = rb_path(dir, "resumed.st");
    rb_assert_same_tensors(a, b, 0);
    free(a), free(b);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, a_different_configuration_is_a_usage_error)
{
    char *dir = new_dir();
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--no-eval", "--checkpoint-dir", "ck"));
    char *res = rb_path(dir, "results.jsonl");
    const int rows = rb_count_lines(res);
    static const char *const cases[][4] = {
        {"--batch", "16", "batch=8", "batch=16"},
        {"--seed", "7", "seed=42", "seed=7"},
        {"--optimizer", "sgd", "optimizer=adam", "optimizer=sgd"},
        {"--lr", "0.01", "lr=0.00100000005", "lr=0.00999999978"},
        /* a probe's: another --classes was named by its parameter count; other data under the same name (here
         * the test set's size: the train set's is train_samples) resumed unsaid */
        {"--classes", "20", "classes=10", "classes=20"},
        {"--synthetic-samples", "1000,100", "data_crc32=", "in this run"},
    };
    /* The first through bench, the others in this process (run_here_cli: bench_run's status and message as bench
     * would exit and print them). */
    for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
        const char *const *base = RB_ARGS("--data", "synthetic", "--synthetic-samples", "1000,200", "--mllog", "none",
                                          "--out", "results.jsonl", "--quiet", "--steps", "40");
        const char *const *extra = RB_ARGS("--resume", "ck", cases[i][0], cases[i][1], i == 0 ? NULL : "--batch", "8");
        char *err;
        const int code = run_case(dir, i, "bad", base, extra, &err);
        cr_assert_eq(code, 2, "%s %s: exit %d, want 2: %s", cases[i][0], cases[i][1], code, err);
        cr_assert(strstr(err, cases[i][2]) && strstr(err, cases[i][3]), "%s %s: message does not name the difference: %s",
                  cases[i][0], cases[i][1], err);
        free(err);
    }
    cr_assert_eq(rb_count_lines(res), rows, "a refused resume wrote a result row");
    free(res);
    tu_rm_rf(dir);
    free(dir);
}

/* Exit status of resuming dir/ck (4 steps done) to 6 steps with the fp16 options be and extra; its stderr into err.
 * here: in this process (run_here_cli), for a refusal after the test's first. */
static int resume_fp16(const char *dir, const char *const *be, const char *ck, const char *const *extra, char **err,
                       int here)
{
    const char *args[16] = {"--steps", "6", "--no-eval", "--resume", ck};
    int n = 5;
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    return run_case(dir, here, "again", be, args, err);
}

/* fp16's loss-scale policy decides which steps are skipped and at what scale: a probe's static 512 run resumed
 * without --loss-scale went on dynamic (and the reverse), unsaid, its row labelling steps it had not run so.
 * Now another policy or static value is a usage error naming loss_scale; a checkpoint of a build before the
 * policy was recorded still resumes, with a note. bf16m and bf16 stay two configurations off the cuda device
 * (the ipu stages store bf16 weights without a master copy). */
Test(resume, fp16_loss_scale_policy_is_part_of_the_configuration)
{
    /* RB_BASE without --quiet, which would hide the note */
#define LS_BASE "--data", "synthetic", "--synthetic-samples", "1000,200", "--batch", "8", "--mllog", "none", "--out", \
                "results.jsonl", "--backend", "ipu", "--stages", "2", "--split", "2", "--ga", "2"
    static const char *const be[] = {LS_BASE, "--precision", "fp16", NULL};
    char *dir = new_dir(), *err;
    run_ref(dir, be, RB_ARGS("--steps", "4", "--no-eval", "--loss-scale", "512", "--checkpoint-dir", "ck_static"));
    run_ref(dir, be, RB_ARGS("--steps", "4", "--no-eval", "--checkpoint-dir", "ck_dyn"));
    static const struct { const char *ck, *scale, *want_a, *want_b; } bad[] = {
        {"ck_static", NULL, "loss_scale=512 in the checkpoint", "loss_scale=dynamic in this run"},
        {"ck_static", "256", "loss_scale=512 in the checkpoint", "loss_scale=256 in this run"},
        {"ck_dyn", "100", "loss_scale=dynamic in the checkpoint", "loss_scale=100 in this run"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        const int code = resume_fp16(dir, be, bad[k].ck, bad[k].scale ? RB_ARGS("--loss-scale", bad[k].scale) : NULL,
                                     &err, k > 0);
        cr_assert(code == 2 && strstr(err, bad[k].want_a) && strstr(err, bad[k].want_b), "case %zu: exit %d: %s", k,
                  code, err);
        free(err);
    }
    cr_assert_eq(resume_fp16(dir, be, "ck_static", RB_ARGS("--loss-scale", "512"), &err, 0), 0, "%s", err);
    free(err);
    /* An older build's checkpoint: its text without the word. */
    char *ckd = rb_path(dir, "ck_dyn"), old[600];
    checkpoint_dir_path(ckd, 4, old, sizeof old);
    ckpt_rewrite_config(old, " loss_scale=dynamic", "");
    cr_assert_eq(resume_fp16(dir, be, "ck_dyn", NULL, &err, 0), 0, "%s", err);
    cr_assert(strstr(err, "predates fp16's loss-scale policy") && strstr(err, "loss_scale=dynamic"), "%s", err);
    free(err);
    free(ckd);
    /* bf16m is not bf16 on the cpu device. */
    static const char *const bf[] = {LS_BASE, NULL};
#undef LS_BASE
    run_ref(dir, bf, RB_ARGS("--steps", "4", "--no-eval", "--precision", "bf16m", "--checkpoint-dir", "ck_bf"));
    const int code = resume_fp16(dir, bf, "ck_bf", RB_ARGS("--precision", "bf16"), &err, 1);
    cr_assert(code == 2 && strstr(err, "precision=bf16m in the checkpoint"), "exit %d: %s", code, err);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, another_backend_continues_the_run)
{
    /* The backend is not part of the configuration: threads continues a cpu run, and since it runs the
     * same kernels bitwise for any thread count, the result is the straight cpu run's. */
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(RB_BASE), RB_ARGS("--steps", "200", "--no-eval", "--save", "straight.st")), 0);
    cr_assert_eq(rb_run(dir, "cpu", RB_ARGS(RB_BASE), RB_ARGS("--steps", "80", "--no-eval", "--checkpoint-dir", "ck")), 0);
    cr_assert_eq(rb_run(dir, "threads", RB_ARGS(RB_BASE), RB_ARGS("--steps", "200", "--no-eval", "--resume", "ck", "--backend",
                                                                   "threads", "--threads", "2", "--save", "resumed.st")),
                 0);
    struct json_value *r = rb_last_row(dir);
    cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), 80);
    cr_assert_eq(json_get_number(r, "figures.session_steps", -1), 120);
    json_value_free(r);
    char *a = rb_path(dir, "straight.st"), *b = rb_path(dir, "resumed.st");
    rb_assert_same_tensors(a, b, 0);
    free(a), free(b);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, an_unreadable_newest_checkpoint_falls_back_to_the_one_before)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(RB_BASE), RB_ARGS("--steps", "40", "--no-eval", "--save", "straight.st")), 0);
    cr_assert_eq(rb_run(dir, "first", RB_ARGS(RB_BASE),
                        RB_ARGS("--steps", "20", "--no-eval", "--checkpoint-dir", "ck", "--checkpoint-every", "10")),
                 0);
    /* The newest (step 20) torn in half, plus a stale temporary file of a killed save. */
    char *p20 = rb_path(dir, "ck/ckpt-0000000020.safetensors"), *tmp = rb_path(dir, "ck/ckpt-0000000030.safetensors.tmp.XyZ123");
    cr_assert_eq(truncate(p20, 1000), 0);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs("partial", f);
    fclose(f);
    cr_assert_eq(rb_run(dir, "second", RB_ARGS(RB_BASE), RB_ARGS("--steps", "40", "--no-eval", "--resume", "ck", "--save",
                                                                  "resumed.st")),
                 0);
    char *err = rb_stderr(dir, "second");
    cr_assert(strstr(err, "warning") && strstr(err, "ckpt-0000000020"), "no warning about the torn checkpoint: %s", err);
    free(err);
    rb_assert_resumed_from(dir, 10);
    char *a = rb_path(dir, "straight.st"), *b = rb_path(dir, "resumed.st");
    rb_assert_same_tensors(a, b, 0);
    cr_assert_neq(access(tmp, F_OK), 0, "the stale temporary file is still there");
    free(a), free(b), free(p20), free(tmp);
    tu_rm_rf(dir);
    free(dir);
}

/* A torn newest checkpoint that --resume skipped is renamed aside (with a warning), so that keeping the newest two
 * checkpoints keeps the good one the run resumed from rather than the torn file (a probe's: pruning kept ckpt-30
 * torn and deleted ckpt-20, leaving one usable checkpoint). */
Test(resume, a_skipped_torn_checkpoint_is_set_aside_not_kept_by_pruning)
{
    char *dir = new_dir();
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--no-eval", "--checkpoint-dir", "ck"));
    cr_assert_eq(rb_run(dir, "second", RB_ARGS(RB_BASE), RB_ARGS("--steps", "30", "--no-eval", "--resume", "ck")), 0);
    char *p20 = rb_path(dir, "ck/ckpt-0000000020.safetensors"), *p30 = rb_path(dir, "ck/ckpt-0000000030.safetensors"),
         *p40 = rb_path(dir, "ck/ckpt-0000000040.safetensors"),
         *aside = rb_path(dir, "ck/ckpt-0000000030.safetensors.unreadable");
    cr_assert_eq(truncate(p30, 1000), 0);
    cr_assert_eq(rb_run(dir, "third", RB_ARGS(RB_BASE), RB_ARGS("--steps", "40", "--no-eval", "--resume", "ck")), 0);
    char *err = rb_stderr(dir, "third");
    cr_assert(strstr(err, "skipping") && strstr(err, "renamed it to") && strstr(err, "unreadable"), "%s", err);
    free(err);
    rb_assert_resumed_from(dir, 20);
    cr_assert_eq(access(p20, F_OK), 0, "the checkpoint the run resumed from was pruned");
    cr_assert_eq(access(p40, F_OK), 0, "the run's own checkpoint is missing");
    cr_assert_neq(access(p30, F_OK), 0, "the torn checkpoint is still among the checkpoints");
    cr_assert_eq(access(aside, F_OK), 0, "the torn checkpoint was not kept aside");
    long steps[4];
    int n = 0;
    char *ck = rb_path(dir, "ck");
    cr_assert_eq(checkpoint_dir_list(ck, steps, 4, &n), TB_OK, "%s", tb_error_get());
    cr_assert(n == 2 && steps[0] == 40 && steps[1] == 20, "%d checkpoints, newest %ld", n, n ? steps[0] : -1);
    free(ck), free(p20), free(p30), free(p40), free(aside);
    tu_rm_rf(dir);
    free(dir);
}

/* A checkpoint whose plan state or fp16 loss scaler is malformed is damaged like a torn file: skipped with a warning
 * naming it, set aside, and the one before it resumed. A probe's `tta_state` of "{" and `loss_scaler` of "scale=3
 * garbage" were found only after the checkpoint was taken, and ended the run (exit 1) with the good one untried. */
Test(resume, a_malformed_tta_state_falls_back_to_the_checkpoint_before)
{
    char *dir = new_dir(), *err;
    /* A whole plan, then its note removed: a run killed after its last checkpoint, before its row. */
    run_ref(dir, RB_ARGS(RB_BASE),
            RB_ARGS("--plan", "tta", "--eval-every", "25", "--target", "0.9", "--checkpoint-dir", "ck",
                    "--checkpoint-every", "10"));
    char *ck = rb_path(dir, "ck"), *note = rb_path(dir, "ck/finished.json");
    cr_assert_eq(unlink(note), 0);
    long steps[2];
    int n = 0;
    cr_assert_eq(checkpoint_dir_list(ck, steps, 2, &n), TB_OK, "%s", tb_error_get());
    cr_assert_eq(n, 2, "%d checkpoints", n);
    char newest[600], name[600], aside[700];
    checkpoint_dir_path(ck, steps[0], newest, sizeof newest);
    checkpoint_dir_path("ck", steps[0], name, sizeof name); /* as the run in dir names it */
    snprintf(aside, sizeof aside, "%s.unreadable", newest);
    ckpt_rewrite_meta(newest, "tta_state", "{");
    const char *const *again = RB_ARGS("--plan", "tta", "--eval-every", "25", "--target", "0.9", "--resume", "ck");
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), again, &err);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    cr_assert(strstr(err, "bench: warning: --resume: skipping") && strstr(err, name) &&
              strstr(err, "time-to-accuracy state is malformed"), "%s", err);
    free(err);
    cr_assert_eq(access(aside, F_OK), 0, "the damaged checkpoint was not set aside");
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), steps[1]);
    json_value_free(r);
    free(ck), free(note);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, a_malformed_loss_scaler_falls_back_to_the_checkpoint_before)
{
    static const char *const be[] = {RB_BASE, "--backend", "ipu", "--stages", "2", "--split", "2", "--ga", "2",
                                      "--precision", "fp16", "--no-eval", NULL};
    char *dir = new_dir(), *err;
    run_ref(dir, be, RB_ARGS("--steps", "4", "--checkpoint-dir", "ck", "--checkpoint-every", "2"));
    char *p4 = rb_path(dir, "ck/ckpt-0000000004.safetensors"),
         *aside = rb_path(dir, "ck/ckpt-0000000004.safetensors.unreadable");
    ckpt_rewrite_meta(p4, "loss_scaler", "scale=3 garbage");
    const int code = run_here_cli(dir, be, RB_ARGS("--steps", "6", "--resume", "ck"), &err);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    cr_assert(strstr(err, "bench: warning: --resume: skipping") && strstr(err, "ckpt-0000000004") &&
              strstr(err, "scale=3 garbage"), "%s", err);
    free(err);
    cr_assert_eq(access(aside, F_OK), 0, "the damaged checkpoint was not set aside");
    rb_assert_resumed_from(dir, 2);
    free(p4), free(aside);
    tu_rm_rf(dir);
    free(dir);
}

/* A checkpoint's training seconds that are not a time (inf) count as unknown, as NaN does: the row's figures stay
 * finite (the run printed "train inf s at 0 img/s"). */
Test(resume, an_infinite_training_time_in_a_checkpoint_counts_as_unknown)
{
    char *dir = new_dir(), *err;
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--no-eval", "--checkpoint-dir", "ck"));
    char *p2 = rb_path(dir, "ck/ckpt-0000000002.safetensors");
    ckpt_rewrite_meta(p2, "train_time_s", "inf");
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--resume", "ck"), &err);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    free(err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), 2);
    cr_assert_eq(json_get_number(r, "figures.previous_train_time_s", NAN), 0.0);
    const double t = json_get_number(r, "figures.train_time_s", NAN);
    cr_assert(isfinite(t) && t > 0, "train_time_s %g", t);
    json_value_free(r);
    free(p2);
    tu_rm_rf(dir);
    free(dir);
}

/* A finished run whose last checkpoint is damaged: the resume sets it aside and takes the one before, and ran the
 * last steps again, a second "ok" row for one run. The note says the run finished at that total: nothing to do.
 * With the note unreadable too, whether it finished cannot be told: refused, as at the last step (it ran again). */
Test(resume, a_finished_run_with_its_last_checkpoint_damaged_writes_no_second_row)
{
    char *dir = new_dir(), *err;
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--checkpoint-dir", "ck", "--checkpoint-every", "2"));
    char *res = rb_path(dir, "results.jsonl"), *p4 = rb_path(dir, "ck/ckpt-0000000004.safetensors");
    const int rows = rb_count_lines(res);
    cr_assert_eq(truncate(p4, 100), 0);
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--resume", "ck"), &err);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    cr_assert(strstr(err, "bench: warning: --resume: skipping") && strstr(err, "the run finished at step 4") &&
              strstr(err, "nothing to do, no new row"), "%s", err);
    free(err);
    cr_assert_eq(rb_count_lines(res), rows, "a second row for the finished run");
    /* the damaged checkpoint back from where the resume set it aside, and the note damaged */
    char aside[700];
    snprintf(aside, sizeof aside, "%s.unreadable", p4);
    cr_assert_eq(rename(aside, p4), 0, "%s", aside);
    rb_write(dir, "ck/finished.json", "{\"finished_step\":");
    const int code2 = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--resume", "ck"), &err);
    cr_assert(code2 == 1 && strstr(err, "ck/finished.json is not a note bench wrote (not JSON)"), "exit %d: %s", code2,
              err);
    free(err);
    cr_assert_eq(rb_count_lines(res), rows, "a damaged note and last checkpoint: a second row for the finished run");
    free(res), free(p4);
    tu_rm_rf(dir);
    free(dir);
}

/* Two bench processes in one checkpoint folder (a resume beside the run still writing there, two resumes of it,
 * two fresh runs) mixed their checkpoints and both wrote the run's row: the folder is locked while a run writes or
 * resumes from it, and a second is refused (exit 1) naming the holder. Here this process holds the lock. */
Test(resume, a_checkpoint_folder_in_use_by_another_run_is_refused)
{
    char *dir = new_dir(), *err;
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--no-eval", "--checkpoint-dir", "ck"));
    char *ck = rb_path(dir, "ck"), *ck3 = rb_path(dir, "ck3"), *res = rb_path(dir, "results.jsonl");
    cr_assert_eq(mkdir(ck3, 0755), 0);
    const int rows = rb_count_lines(res);
    int fd = -1, fd3 = -1;
    cr_assert(checkpoint_dir_lock(ck, &fd) == TB_OK && checkpoint_dir_lock(ck3, &fd3) == TB_OK, "%s", tb_error_get());
    cr_assert(fd >= 0 && fd3 >= 0);
    const char *const *const cases[3] = {RB_ARGS("--steps", "4", "--no-eval", "--resume", "ck"),
                                         RB_ARGS("--steps", "4", "--no-eval", "--resume", "ck", "--checkpoint-dir", "ck2"),
                                         RB_ARGS("--steps", "4", "--no-eval", "--checkpoint-dir", "ck3")};
    static const char *const said[3] = {"--checkpoint-dir ck is in use", "--resume ck is in use",
                                        "--checkpoint-dir ck3 is in use"};
    for (int k = 0; k < 3; k++) {
        const int code = run_here_cli(dir, RB_ARGS(RB_BASE), cases[k], &err);
        char want[200];
        snprintf(want, sizeof want, "%s by another bench process (pid %ld)", said[k], (long)getpid());
        cr_assert(code == 1 && strstr(err, want), "case %d: exit %d: %s", k, code, err);
        free(err);
    }
    cr_assert_eq(rb_count_lines(res), rows, "a row was written");
    close(fd), close(fd3);
    /* free again: the resume goes on */
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--resume", "ck"), &err);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    free(err);
    cr_assert_eq(rb_count_lines(res), rows + 1);
    free(ck), free(ck3), free(res);
    tu_rm_rf(dir);
    free(dir);
}

/* An exponential decay without --lr-decay-steps decays every step; checkpoints before the fiftieth session recorded
 * it as decay_steps=0, this build as 1: such a checkpoint still resumes (the same schedule). Made here by rewriting
 * a new checkpoint's configuration and its hash as an older build wrote them. */
Test(resume, an_older_exponential_checkpoint_with_decay_steps_0_resumes)
{
    char *dir = new_dir(), *err;
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--lr-schedule", "exponential", "--checkpoint-dir",
                                           "ck", "--checkpoint-every", "2"));
    char *p2 = rb_path(dir, "ck/ckpt-0000000002.safetensors"), *p4 = rb_path(dir, "ck/ckpt-0000000004.safetensors"),
         *fin = rb_path(dir, "ck/finished.json");
    cr_assert(remove(p4) == 0 && remove(fin) == 0); /* a run stopped after step 2 */
    free(p4), free(fin);
    char cfg[1024], hash[24];
    cr_assert_eq(checkpoint_read_meta(p2, "config", cfg, sizeof cfg), TB_OK, "%s", tb_error_get());
    char *w = strstr(cfg, " decay_steps=1 ");
    cr_assert_not_null(w, "%s", cfg);
    w[strlen(" decay_steps=")] = '0';
    unsigned long long h = 1469598103934665603ull; /* FNV-1a, as resume.c's config_hash */
    for (const char *c = cfg; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    snprintf(hash, sizeof hash, "%016llx", h);
    ckpt_rewrite_meta(p2, "config", cfg);
    ckpt_rewrite_meta(p2, "config_hash", hash);
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--lr-schedule", "exponential",
                                                                 "--resume", "ck"), &err);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    free(err), free(p2);
    rb_assert_resumed_from(dir, 2);
    tu_rm_rf(dir);
    free(dir);
}

/* A finished.json that cannot be read was taken for "not finished": resuming the finished run wrote its "ok" row
 * again, unsaid. Whether the row exists cannot be told then, so the resume of the run's last step is refused (one
 * line naming the note, exit 1, no row); extending the run does not depend on the note and goes on. */
Test(resume, an_unreadable_finished_note_refuses_the_resume_and_writes_no_row)
{
    char *dir = new_dir();
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "4", "--no-eval", "--checkpoint-dir", "ck"));
    char *res = rb_path(dir, "results.jsonl");
    const int rows = rb_count_lines(res);
    static const char *const notes[] = {"{\"finished_step\":", "{\"finished_step\":\"4\"}\n", "{}\n"};
    for (int i = 0; i < 3; i++) { /* the first through bench, the others in this process (run_case) */
        rb_write(dir, "ck/finished.json", notes[i]);
        char *err;
        const char *const *again = RB_ARGS("--steps", "4", "--no-eval", "--resume", "ck");
        const int code = run_case(dir, i, "again", RB_ARGS(RB_BASE), again, &err);
        cr_assert_eq(code, 1, "note %d: exit %d: %s", i, code, err);
        cr_assert(strstr(err, "ck/finished.json is not a note bench wrote (") &&
                  strstr(err, "whether the run finished at step 4 and wrote its row cannot be told") &&
                  strchr(err, '\n') == err + strlen(err) - 1, "note %d: one line: %s", i, err);
        free(err);
        cr_assert_eq(rb_count_lines(res), rows, "note %d: a row was written", i);
    }
    char *err;
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "6", "--no-eval", "--resume", "ck"), &err);
    cr_assert_eq(code, 0, "extending: exit %d: %s", code, err);
    free(err);
    cr_assert_eq(rb_count_lines(res), rows + 1);
    free(res);
    tu_rm_rf(dir);
    free(dir);
}

/* A resume refused for another dropout names an unset one as the workload's (its classifier's rate), not the
 * internal -1 that stands for it in the checkpoint. */
Test(resume, an_unset_dropout_is_named_as_the_workloads)
{
    char *dir = new_dir();
#define EFF "--workload", "effnet-b0", "--resolution", "16", "--conv-algo", "im2col", "--data", "synthetic", \
            "--synthetic-samples", "64,16", "--batch", "4", "--mllog", "none", "--out", "results.jsonl", "--quiet", "--no-eval"
    run_ref(dir, RB_ARGS(EFF), RB_ARGS("--steps", "2", "--checkpoint-dir", "ck"));
    /* In this process (run_here_cli): a_different_configuration_is_a_usage_error spawns bench's refused resume. */
    char *err;
    const int code =
        run_here_cli(dir, RB_ARGS(EFF), RB_ARGS("--steps", "2", "--dropout", "0.5", "--resume", "ck"), &err);
#undef EFF
    cr_assert_eq(code, 2, "exit %d: %s", code, err);
    cr_assert(strstr(err, "dropout=the workload's (0.2) in the checkpoint, dropout=0.5 in this run") &&
                  !strstr(err, "=-1"), "%s", err);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, nothing_to_resume_is_one_line_and_exit_1)
{
    char *dir = new_dir();
    char *empty = rb_path(dir, "empty");
    cr_assert_eq(mkdir(empty, 0755), 0);
    const char *const *dirs = RB_ARGS("empty", "missing");
    const char *const *named = RB_ARGS("--resume empty", "directory missing"); /* the folder, as a folder */
    for (int i = 0; i < 2; i++) { /* the first through bench, the second in this process (run_here_cli) */
        const char *const *extra = RB_ARGS("--steps", "10", "--resume", dirs[i]);
        char *err;
        const int code = run_case(dir, i, "r", RB_ARGS(RB_BASE), extra, &err);
        cr_assert_eq(code, 1, "--resume %s: exit %d: %s", dirs[i], code, err);
        cr_assert(strstr(err, named[i]) && strchr(err, '\n') == err + strlen(err) - 1, "--resume %s: %s", dirs[i], err);
        free(err);
    }
    /* Without --quiet too: said before the backend is prepared (its "preparing the backend" line came first). */
    const int code = rb_run(dir, "loud", RB_ARGS("--data", "synthetic", "--synthetic-samples", "1000,200", "--batch", "8",
                                                 "--mllog", "none", "--out", "results.jsonl"),
                            RB_ARGS("--steps", "10", "--resume", "empty"));
    char *err = rb_stderr(dir, "loud");
    cr_assert(code == 1 && strchr(err, '\n') == err + strlen(err) - 1, "exit %d: %s", code, err);
    free(err);
    char *res = rb_path(dir, "results.jsonl");
    cr_assert_eq(rb_count_lines(res), 0);
    free(res), free(empty);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, load_starts_from_a_file_and_rejects_a_malformed_one)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "a", RB_ARGS(RB_BASE),
                        RB_ARGS("--steps", "60", "--eval-batch", "200", "--save", "a.st", "--checkpoint-dir", "ck")),
                 0);
    struct json_value *r = rb_last_row(dir);
    const double trained = json_get_number(r, "figures.test_accuracy", NAN);
    json_value_free(r);
    /* Inference over the 200 test images once, from the saved weights, from the resumable checkpoint
     * (whose optimizer tensors --load ignores), and from fresh ones: the loaded runs see the trained
     * model's accuracy, the fresh one does not. */
    const char *const *srcs = RB_ARGS("a.st", "ck/ckpt-0000000060.safetensors", NULL);
    double acc[3];
    for (int i = 0; i < 3; i++) {
        const int code = rb_run(dir, "inf", RB_ARGS(RB_BASE), RB_ARGS("--plan", "inference", "--batch", "200", "--warmup", "0",
                                                                       "--steps", "1", srcs[i] ? "--load" : NULL, srcs[i]));
        char *err = rb_stderr(dir, "inf");
        cr_assert_eq(code, 0, "inference %s: exit %d: %s", srcs[i] ? srcs[i] : "fresh", code, err);
        free(err);
        r = rb_last_row(dir);
        acc[i] = json_get_number(r, srcs[i] ? "figures.loaded_weights_accuracy" : "figures.fresh_weights_accuracy", NAN);
        cr_assert_str_eq(json_get_str(r, "config.load", "?"), srcs[i] ? srcs[i] : "");
        json_value_free(r);
    }
    cr_assert(fabs(acc[0] - trained) <= 1.0 / 200 && acc[1] == acc[0], "trained %g, loaded %g and %g", trained, acc[0],
              acc[1]);
    cr_assert(fabs(acc[2] - trained) > 0.2, "fresh weights score %g, the trained ones %g: did --load do anything?", acc[2],
              trained);
    /* Malformed: garbage, torn, another model's, missing. One line naming the file, exit 1, no row. */
    char *res = rb_path(dir, "results.jsonl");
    const int rows = rb_count_lines(res);
    char *g = rb_path(dir, "garbage.st"), *t = rb_path(dir, "torn.st");
    FILE *f = fopen(g, "w");
    cr_assert_not_null(f);
    fputs("this is not a checkpoint", f);
    fclose(f);
    char *a = rb_path(dir, "a.st"), *cmd = NULL;
    cr_assert(asprintf(&cmd, "head -c 700 '%s' > '%s'", a, t) > 0);
    cr_assert_eq(system(cmd), 0);
    const char *const *bad = RB_ARGS("garbage.st", "torn.st", "missing.st");
    for (int i = 0; i < 3; i++) { /* the first through bench, the others in this process (run_here_cli) */
        const char *const *extra = RB_ARGS("--steps", "3", "--load", bad[i]);
        char *err;
        const int code = run_case(dir, i, "bad", RB_ARGS(RB_BASE), extra, &err);
        cr_assert_eq(code, 1, "--load %s: exit %d: %s", bad[i], code, err);
        cr_assert(strstr(err, bad[i]) != NULL, "--load %s: message does not name the file: %s", bad[i], err);
        cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "--load %s: not one line: %s", bad[i], err);
        free(err);
    }
    char *err;
    const int code = run_here_cli(
        dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "1", "--load", "a.st", "--workload", "effnet-b0", "--resolution", "16"),
        &err);
    cr_assert_eq(code, 1, "%s", err);
    cr_assert(strstr(err, "a.st") != NULL, "another model's file: the message does not name it: %s", err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "another model's file: not one line: %s", err);
    free(err);
    cr_assert_eq(rb_count_lines(res), rows, "a failed --load wrote a result row");
    free(res), free(g), free(t), free(a), free(cmd);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, divergence_stops_the_run_with_a_diverged_row)
{
    char *dir = new_dir();
    const int code = rb_run(dir, "div", RB_ARGS(RB_BASE), RB_ARGS("--steps", "200", "--optimizer", "sgd", "--lr", "1e3"));
    char *err = rb_stderr(dir, "div");
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, "diverged") && strstr(err, "step"), "unclear message: %s", err);
    free(err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "diverged");
    const long at = (long)json_get_number(r, "figures.diverged_at_step", -1);
    cr_assert(at >= 1 && at <= 200, "diverged_at_step %ld", at);
    cr_assert_eq(json_get_number(r, "figures.completed_steps", -1), at - 1);
    static const char *const absent[] = {"figures.images_per_s", "figures.images_per_s_median", "figures.test_accuracy",
                                         "figures.gflops_per_s", "figures.partial_images_per_s"};
    for (int i = 0; i < 5; i++) cr_assert_null(json_get(r, absent[i]), "a diverged row carries %s", absent[i]);
    json_value_free(r);
    /* The throughput plan too. */
    cr_assert_eq(rb_run(dir, "divt", RB_ARGS(RB_BASE), RB_ARGS("--plan", "throughput", "--optimizer", "sgd", "--lr", "1e3")),
                 1);
    r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "diverged");
    cr_assert_str_eq(json_get_str(r, "kind", ""), "throughput");
    cr_assert_null(json_get(r, "figures.images_per_s"));
    json_value_free(r);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, checkpoint_options_are_validated)
{
    char *dir = new_dir();
    static const char *const cases[][7] = { /* NULL-terminated argument lists */
        {"--plan", "throughput", "--save", "x.st", NULL, NULL},
        {"--steps", "5", "--checkpoint-every", "2", NULL, NULL},
        {"--steps", "5", "--resume", "ck", "--load", "x.st"},
        {"--plan", "throughput", "--resume", "ck", NULL, NULL}, /* a measurement: nothing to resume */
        {"--steps", "5", "--checkpoint-dir", "ck", NULL, NULL}, /* ck holds another run's checkpoints */
        {"--plan", "inference", "--checkpoint-dir", "ck2", NULL, NULL},
    };
    /* What each message must name: the rule broken, not just any usage error. */
    static const char *const needle[] = {"--save applies to --plan train", "--checkpoint-every needs --checkpoint-dir",
                                         "--load x.st does not apply", "--plan throughput measures step times",
                                         "already holds another run's checkpoints", "--plan inference measures"};
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "3", "--no-eval", "--checkpoint-dir", "ck"));
    for (int i = 0; i < 6; i++) { /* the first through bench, the others in this process (run_here_cli) */
        char *err;
        const int code = run_case(dir, i, "v", RB_ARGS(RB_BASE), cases[i], &err);
        cr_assert_eq(code, 2, "case %d: exit %d: %s", i, code, err);
        cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "case %d: not one line: %s", i, err);
        cr_assert(strstr(err, needle[i]), "case %d: the message does not say \"%s\": %s", i, needle[i], err);
        free(err);
    }
    /* --resume naming a file: the option given is named, not the --checkpoint-dir it defaults (a probe's). */
    rb_write(dir, "afile", "x\n");
    char *err; /* in this process: nothing_to_resume_is_one_line_and_exit_1 spawns bench's exit 1 of a resume */
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "5", "--resume", "afile"), &err);
    cr_assert(code == 1 && strstr(err, "--resume afile: not a directory") && !strstr(err, "--checkpoint-dir"),
              "exit %d: %s", code, err);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* A time-to-accuracy run that learns slowly (about 3100 steps to the target, one evaluation every 25), so that a
 * signal sent when a checkpoint appears lands well before the target. Under ASan, where a step takes about 5 times
 * as long, a rate that takes about 850 steps: the 700 or so left after the stops still outlast the main build's
 * 2900 (about 0.5 s against 0.45); what the tests check (the steps, evaluations and bits of a resumed run against
 * the straight one) does not depend on the length. */
#define TTA "--plan", "tta", "--eval-every", "25", "--max-epochs", "30", "--target", "0.9", "--lr", \
            (TU_UNDER_ASAN ? "0.00001" : "0.000003")

/* The checkpoint of plan step g (every seed's steps so far) in dir/sub. */
static char *ck_file(const char *dir, const char *sub, long g)
{
    char *d = rb_path(dir, sub), p[600];
    checkpoint_dir_path(d, g, p, sizeof p);
    free(d);
    return strdup(p);
}

/* The time-to-accuracy state a checkpoint keeps, parsed (the caller frees it). */
static struct json_value *tta_state_of(const char *ck)
{
    char state[1 << 16];
    cr_assert_eq(checkpoint_read_meta(ck, "tta_state", state, sizeof state), TB_OK, "%s", tb_error_get());
    struct json_value *sv = NULL;
    cr_assert_eq(json_parse(state, strlen(state), &sv), TB_OK, "%s", tb_error_get());
    return sv;
}

/* Starts a tta run (or its resumption), waits for a checkpoint in dir/ck past `after`, sends sig; checks
 * exit status, message and row; returns the plan step of the stop's checkpoint. seed_base: the steps of
 * the seeds finished before the one that stops. */
static long tta_interrupt(const char *dir, const char *tag, const char *const *extra, long after, long seed_base,
                          int sig)
{
    pid_t pid = rb_start(dir, tag, RB_ARGS(RB_BASE), extra);
    char *ck = rb_path(dir, "ck");
    int exited = 0;
    const long seen = rb_wait_checkpoint(pid, ck, after, &exited);
    char *err = rb_stderr(dir, tag);
    cr_assert_geq(seen, 0, "%s finished (status %d) before it could be interrupted: %s", tag, exited, err);
    free(err);
    cr_assert_eq(kill(pid, sig), 0);
    const int code = rb_wait(pid);
    err = rb_stderr(dir, tag);
    cr_assert_eq(code, 128 + sig, "%s: exit status %d, want %d: %s", tag, code, 128 + sig, err);
    cr_assert(strstr(err, "--resume ck"), "%s: the message does not say how to resume: %s", tag, err);
    free(err);
    const long g = rb_newest(ck);
    cr_assert_geq(g, seen);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "kind", ""), "tta");
    cr_assert_str_eq(json_get_str(r, "status", ""), "interrupted");
    cr_assert_null(json_get(r, "figures.tta_olympic_mean_s"));
    cr_assert_null(json_get(r, "figures.images_per_s"));
    cr_assert_eq(json_get_number(r, "figures.completed_steps", -1), g - seed_base, "%s: stopped at plan step %ld", tag,
                 g);
    char want[600];
    checkpoint_dir_path("ck", g, want, sizeof want);
    cr_assert_str_eq(json_get_str(r, "figures.checkpoint", ""), want);
    json_value_free(r);
    free(ck);
    return g;
}

/* Two tta rows' seed k took the same steps and evaluations (accuracy and loss bitwise; times differ). */
static void assert_same_seed(const struct json_value *a, const struct json_value *b, int k)
{
    char key[96];
#define AT(fmt, ...) (snprintf(key, sizeof key, fmt, __VA_ARGS__), key)
    cr_assert_eq(json_get_bool(a, AT("figures.runs.%d.reached", k), -1), json_get_bool(b, key, -2), "%s", key);
    cr_assert_eq(json_get_number(a, AT("figures.runs.%d.steps", k), -1), json_get_number(b, key, -2), "%s", key);
    cr_assert_eq(json_get_number(a, AT("figures.runs.%d.best_accuracy", k), -1), json_get_number(b, key, -2), "%s", key);
    const struct json_value *ca = json_get(a, AT("figures.runs.%d.curve", k)), *cb = json_get(b, key);
    cr_assert(ca && cb && ca->n == cb->n && ca->n > 0, "seed %d: %d and %d evaluations", k, ca ? ca->n : -1,
              cb ? cb->n : -1);
    for (int i = 0; i < ca->n; i++) {
        static const char *const f[] = {"step", "accuracy", "loss"};
        for (int j = 0; j < 3; j++) {
            const double x = json_get_number(&ca->items[i], f[j], NAN), y = json_get_number(&cb->items[i], f[j], NAN);
            cr_assert(memcmp(&x, &y, sizeof x) == 0, "seed %d, evaluation %d: %s %.17g vs %.17g", k, i, f[j], x, y);
        }
    }
#undef AT
}

Test(resume, tta_interrupted_twice_and_resumed_reaches_the_target_at_the_same_step_bitwise)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(RB_BASE), RB_ARGS(TTA, "--checkpoint-dir", "ck_s")), 0);
    struct json_value *rs = rb_last_row(dir);
    cr_assert_eq(json_get_bool(rs, "figures.runs.0.reached", 0), 1, "the straight run did not reach the target");
    const long steps = (long)json_get_number(rs, "figures.runs.0.steps", -1);
    const long k1 = tta_interrupt(dir, "first", RB_ARGS(TTA, "--checkpoint-dir", "ck", "--checkpoint-every", "50"), 0, 0,
                                  SIGINT);
    const long k2 = tta_interrupt(dir, "second", RB_ARGS(TTA, "--resume", "ck"), k1, 0, SIGTERM);
    cr_assert(k1 < k2 && k2 < steps, "stops at %ld and %ld of %ld", k1, k2, steps);
    struct json_value *r2 = rb_last_row(dir);
    const double trained_before = json_get_number(r2, "figures.train_time_s", NAN);
    json_value_free(r2);
    /* The evaluations so far, as the checkpoint keeps them. */
    char *ck2 = ck_file(dir, "ck", k2);
    struct json_value *sv = tta_state_of(ck2);
    /* Every evaluation up to k2, or all but k2's when the signal came during that one (the resumed run
     * then evaluates first: a_stop_during_an_evaluation_... makes that case on purpose). */
    const struct json_value *kept = json_get(sv, "curve");
    cr_assert(kept && (kept->n == k2 / 25 || (k2 % 25 == 0 && kept->n == k2 / 25 - 1)),
              "the checkpoint at step %ld keeps %d evaluations", k2, kept ? kept->n : -1);

    cr_assert_eq(rb_run(dir, "last", RB_ARGS(RB_BASE), RB_ARGS(TTA, "--resume", "ck")), 0);
    struct json_value *rr = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(rr, "status", ""), "ok");
    cr_assert_eq(json_get_number(rr, "figures.resumed_from_step", -1), k2);
    assert_same_seed(rs, rr, 0);
    /* The curve before the stop is the one the interrupted runs measured, times included. */
    const struct json_value *curve = json_get(rr, "figures.runs.0.curve");
    for (int i = 0; i < kept->n; i++) {
        const double t = json_get_number(&curve->items[i], "time_s", NAN);
        cr_assert_eq(t, kept->items[i].items[1].number, "evaluation %d: time %.17g, the checkpoint says %.17g", i, t,
                     kept->items[i].items[1].number);
    }
    /* The clock counts what was spent: the interrupted runs' training seconds, then this one's; time to
     * accuracy is training plus evaluation up to the target. */
    const double tta = json_get_number(rr, "figures.runs.0.tta_s", NAN), tr = json_get_number(rr, "figures.runs.0.train_time_s", NAN),
                 ev = json_get_number(rr, "figures.runs.0.eval_time_s", NAN);
    cr_assert(tr > trained_before && fabs(tta - (tr + ev)) < 1e-9, "tta %g = train %g + eval %g? (%g trained before)", tta,
              tr, ev, trained_before);
    char *a = ck_file(dir, "ck_s", steps), *b = ck_file(dir, "ck", steps);
    rb_assert_same_tensors(a, b, 1);
    json_value_free(rs), json_value_free(rr), json_value_free(sv);
    free(a), free(b), free(ck2);
    tu_rm_rf(dir);
    free(dir);
}

/* A stop inside an evaluation (1.5 s into the third, at step 75: TB_STOP_IN_EVAL) checkpoints step 75
 * without that evaluation; the resumed run evaluates step 75 before its next step, so its curve, and the
 * step that reaches the target, are the straight run's. Before the fix the resumed curve skipped step 75.
 * The cut evaluation's seconds are not training: before that fix the stopped row (and the checkpoint the
 * resumed run adds to) counted the 1.5 s as training 75 steps of a small MLP, which take milliseconds. */
Test(resume, a_stop_during_an_evaluation_resumes_with_that_evaluation)
{
    /* The stop is the failpoint's, not a signal raced against the run, so a rate that reaches the target in about
     * 225 steps (9 evaluations) does: well after the stopped third evaluation, in a quarter of TTA's steps. */
#define TTA_EVAL_STOP "--plan", "tta", "--eval-every", "25", "--max-epochs", "30", "--target", "0.9", "--lr", "0.00005"
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(RB_BASE), RB_ARGS(TTA_EVAL_STOP)), 0);
    struct json_value *rs = rb_last_row(dir);
    cr_assert_eq(setenv("TB_STOP_IN_EVAL", "3:1500", 1), 0);
    const int code = rb_run(dir, "stopped", RB_ARGS(RB_BASE), RB_ARGS(TTA_EVAL_STOP, "--checkpoint-dir", "ck"));
    unsetenv("TB_STOP_IN_EVAL");
    char *err = rb_stderr(dir, "stopped");
    cr_assert_eq(code, 128 + SIGTERM, "exit %d: %s", code, err);
    cr_assert(strstr(err, "in the evaluation"), "%s", err);
    free(err);
    struct json_value *rp = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(rp, "status", ""), "interrupted");
    const double trained = json_get_number(rp, "figures.train_time_s", NAN);
    cr_assert(trained >= 0.0 && trained < 0.75, "the stopped row trained %g s (the cut evaluation took 1.5)", trained);
    json_value_free(rp);
    char *ck = ck_file(dir, "ck", 75);
    struct json_value *sv = tta_state_of(ck);
    const struct json_value *kept = json_get(sv, "curve");
    cr_assert(kept && kept->n == 2, "the checkpoint at step 75 keeps %d evaluations, want 2", kept ? kept->n : -1);
    cr_assert_eq(rb_run(dir, "resumed", RB_ARGS(RB_BASE), RB_ARGS(TTA_EVAL_STOP, "--resume", "ck")), 0);
    struct json_value *rr = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(rr, "status", ""), "ok");
    assert_same_seed(rs, rr, 0);
    json_value_free(rs), json_value_free(rr), json_value_free(sv);
    free(ck);
    tu_rm_rf(dir);
    free(dir);
#undef TTA_EVAL_STOP
}

Test(resume, tta_with_two_seeds_resumes_inside_the_second_seed)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "straight", RB_ARGS(RB_BASE), RB_ARGS(TTA, "--seeds", "2", "--checkpoint-dir", "ck_s")), 0);
    struct json_value *rs = rb_last_row(dir);
    const long s0 = (long)json_get_number(rs, "figures.runs.0.steps", -1),
               s1 = (long)json_get_number(rs, "figures.runs.1.steps", -1);
    cr_assert(s0 > 100 && s1 > 100, "seeds took %ld and %ld steps", s0, s1);
    /* Stopped past the first seed's end: the first seed's result lives in the checkpoint. */
    const long g = tta_interrupt(dir, "first",
                                 RB_ARGS(TTA, "--seeds", "2", "--checkpoint-dir", "ck", "--checkpoint-every", "50"), s0,
                                 s0, SIGINT);
    cr_assert(g > s0 && g < s0 + s1, "stopped at plan step %ld (seeds of %ld and %ld steps)", g, s0, s1);
    cr_assert_eq(rb_run(dir, "last", RB_ARGS(RB_BASE), RB_ARGS(TTA, "--seeds", "2", "--resume", "ck")), 0);
    struct json_value *rr = rb_last_row(dir);
    cr_assert_eq(json_get_number(rr, "figures.runs_total", -1), 2);
    cr_assert_eq(json_get_number(rr, "figures.runs_reached", -1), json_get_number(rs, "figures.runs_reached", -2));
    assert_same_seed(rs, rr, 0);
    assert_same_seed(rs, rr, 1);
    char *a = ck_file(dir, "ck_s", s0 + s1), *b = ck_file(dir, "ck", s0 + s1);
    rb_assert_same_tensors(a, b, 1);
    json_value_free(rs), json_value_free(rr);
    free(a), free(b);
    tu_rm_rf(dir);
    free(dir);
}

Test(resume, train_and_tta_do_not_take_each_others_checkpoints)
{
    char *dir = new_dir();
    /* A quick tta (the default rate reaches 90 % within a few evaluations) and a train run. */
    run_ref(dir, RB_ARGS(RB_BASE),
            RB_ARGS("--plan", "tta", "--eval-every", "25", "--target", "0.9", "--checkpoint-dir", "ckt"));
    run_ref(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--no-eval", "--checkpoint-dir", "ckr"));
    char *res = rb_path(dir, "results.jsonl");
    const int rows = rb_count_lines(res);
    /* Arguments (NULL-terminated), then the words the message must contain. */
    static const char *const cases[][10] = {
        {"--steps", "100", "--resume", "ckt", NULL, NULL, NULL, NULL, NULL, "plan=tta in the checkpoint, plan=train in this run"},
        {"--plan", "tta", "--eval-every", "25", "--resume", "ckr", NULL, NULL, NULL, "plan=train in the checkpoint, plan=tta"},
        {"--plan", "tta", "--eval-every", "25", "--target", "0.8", "--resume", "ckt", NULL,
         "target=0.9 in the checkpoint, target=0.8"},
        {"--plan", "tta", "--eval-every", "50", "--target", "0.9", "--resume", "ckt", NULL, "eval_every=25 in the checkpoint"},
    };
    for (int i = 0; i < 4; i++) { /* the first through bench, the others in this process (run_here_cli) */
        char *err;
        const int code = i == 0 ? rb_run(dir, "bad", RB_ARGS(RB_BASE), cases[i])
                                : run_here_cli(dir, RB_ARGS(RB_BASE), cases[i], &err);
        if (i == 0) err = rb_stderr(dir, "bad");
        cr_assert_eq(code, 2, "case %d: exit %d, want 2: %s", i, code, err);
        cr_assert(strstr(err, cases[i][9]) && strstr(err, "--resume"), "case %d: the message does not name the difference: %s",
                  i, err);
        free(err);
    }
    cr_assert_eq(rb_count_lines(res), rows, "a refused resume wrote a row");
    /* Resuming a finished tta run (its row written) has nothing to do: see tta_resume_of_a_finished_plan_... */
    free(res);
    tu_rm_rf(dir);
    free(dir);
}

/* A tta plan that reached its target and wrote its row leaves finished.json, as the train plan does: each
 * --resume of it (or of a copy of its directory) says it finished, exits 0 and writes no row, where it
 * used to append the same measurement again on every resume; with the note unreadable it refuses (exit 1). */
Test(resume, tta_resume_of_a_finished_plan_says_so_and_writes_no_row)
{
    char *dir = new_dir();
#define QUICK_TTA "--plan", "tta", "--eval-every", "25", "--target", "0.9"
    cr_assert_eq(rb_run(dir, "tta", RB_ARGS(RB_BASE), RB_ARGS(QUICK_TTA, "--seeds", "2", "--checkpoint-dir", "ckt")), 0);
    char *res = rb_path(dir, "results.jsonl"), *marker = rb_path(dir, "ckt/finished.json");
    struct json_value *r = rb_last_row(dir);
    cr_assert_eq(json_get_bool(r, "figures.runs.1.reached", 0), 1);
    const long total = (long)(json_get_number(r, "figures.runs.0.steps", -1) + json_get_number(r, "figures.runs.1.steps", -1));
    char *note = tu_read_file(marker, NULL);
    cr_assert(note, "the finished tta plan left no %s", marker);
    char want[64];
    snprintf(want, sizeof want, "\"finished_step\":%ld", total);
    cr_assert(strstr(note, want) && strstr(note, json_get_str(r, "run_id", "?")), "finished.json: %s (want %s)", note, want);
    const int rows = rb_count_lines(res);
    for (int i = 0; i < 2; i++) { /* the first through bench, the second in this process (run_here_cli) */
        const char *const *extra = RB_ARGS(QUICK_TTA, "--seeds", "2", "--resume", "ckt");
        char *err = NULL;
        const int code =
            i == 0 ? rb_run(dir, "again", RB_ARGS(RB_BASE), extra) : run_here_cli(dir, RB_ARGS(RB_BASE), extra, &err);
        if (i == 0) err = rb_stderr(dir, "again");
        cr_assert_eq(code, 0, "resume %d: exit %d: %s", i, code, err);
        cr_assert(strstr(err, "finished at step") && strstr(err, "no new row"), "resume %d: %s", i, err);
        free(err);
        cr_assert_eq(rb_count_lines(res), rows, "resume %d of a finished tta plan wrote a row", i);
    }
    /* A note that cannot be read: whether the row exists cannot be told, so no resume (an_unreadable_finished_...). */
    rb_write(dir, "ckt/finished.json", "{\"finished_step\":");
    char *err;
    const int code = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS(QUICK_TTA, "--seeds", "2", "--resume", "ckt"), &err);
    cr_assert(code == 1 && strstr(err, "ckt/finished.json is not a note bench wrote (not JSON)"), "exit %d: %s", code, err);
    free(err);
    cr_assert_eq(rb_count_lines(res), rows, "the resume with an unreadable note wrote a row");
    /* The note back, the last checkpoint damaged: the resume takes the one before, and the note (of a later step)
     * still says the plan finished (it ran the rest again and wrote a second row). */
    rb_write(dir, "ckt/finished.json", note);
    long steps[8];
    int n_ck = 0;
    char *ckt = rb_path(dir, "ckt"), last[600];
    cr_assert(checkpoint_dir_list(ckt, steps, 8, &n_ck) == TB_OK && n_ck >= 2, "%d checkpoints", n_ck);
    checkpoint_dir_path(ckt, steps[0], last, sizeof last);
    cr_assert_eq(truncate(last, 100), 0);
    const int code2 = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS(QUICK_TTA, "--seeds", "2", "--resume", "ckt"), &err);
    cr_assert(code2 == 0 && strstr(err, "bench: warning: --resume: skipping") && strstr(err, "no new row"), "exit %d: %s",
              code2, err);
    free(err), free(ckt);
    cr_assert_eq(rb_count_lines(res), rows, "the finished plan resumed from an older checkpoint wrote a second row");
    /* and with the note unreadable too: refused (it ran the rest again); the damaged checkpoint back from aside */
    char aside[700];
    snprintf(aside, sizeof aside, "%s.unreadable", last);
    cr_assert_eq(rename(aside, last), 0, "%s", aside);
    rb_write(dir, "ckt/finished.json", "{\"finished_step\":");
    const int code3 = run_here_cli(dir, RB_ARGS(RB_BASE), RB_ARGS(QUICK_TTA, "--seeds", "2", "--resume", "ckt"), &err);
    cr_assert(code3 == 1 && strstr(err, "ckt/finished.json is not a note bench wrote (not JSON)") &&
              strstr(err, "whether the run finished and wrote"), "exit %d: %s", code3, err);
    free(err);
    cr_assert_eq(rb_count_lines(res), rows, "a damaged note and last checkpoint: a second row for the finished plan");
#undef QUICK_TTA
    json_value_free(r);
    free(note), free(res), free(marker);
    tu_rm_rf(dir);
    free(dir);
}

/* tools/ckpt_roundtrip.py loads what bench writes into torchvision's efficientnet_b0 (strict): a --save
 * file, and a resumable checkpoint whose "__optimizer__.*" tensors it drops first; same weights, same
 * logits. Skipped without /usr/bin/python3 + torch + torchvision. */
Test(resume, ckpt_roundtrip_loads_saved_and_resumable_checkpoints_into_torchvision)
{
    if (system("/usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1") != 0)
        cr_skip_test("/usr/bin/python3 with torch and torchvision is not available");
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "b0", RB_ARGS("--data", "synthetic", "--synthetic-samples", "32,8", "--mllog", "none", "--out",
                                           "results.jsonl", "--quiet"),
                        RB_ARGS("--workload", "effnet-b0", "--resolution", "32", "--batch", "8", "--steps", "2", "--no-eval",
                                "--save", "b0.st", "--checkpoint-dir", "ck")),
                 0);
    char *ck = ck_file(dir, "ck", 2);
    char *hdr = tu_read_file(ck, NULL);
    cr_assert(hdr && strstr(hdr + 8, "__optimizer__."), "the resumable checkpoint has no optimizer tensors");
    free(hdr);
    const char *files[2] = {"b0.st", ck};
    char *logits[2];
    for (int i = 0; i < 2; i++) {
        char *cmd = NULL, *out = NULL;
        cr_assert(asprintf(&out, "%s/logits%d.f64", dir, i) > 0);
        cr_assert(asprintf(&cmd, "cd '%s' && OMP_NUM_THREADS=1 /usr/bin/python3 %s/tools/ckpt_roundtrip.py load '%s' --n 2 "
                                 "--res 32 --classes 10 --out '%s' >py%d.log 2>&1",
                           dir, TB_SOURCE_DIR, files[i], out, i) > 0);
        const int rc = system(cmd);
        char name[24]; /* "py", any int, ".log" */
        snprintf(name, sizeof name, "py%d.log", i);
        char *lp = rb_path(dir, name), *log = tu_read_file(lp, NULL);
        cr_assert_eq(rc, 0, "ckpt_roundtrip.py load %s failed: %s", files[i], log ? log : "");
        free(log), free(lp), free(cmd);
        size_t n = 0;
        logits[i] = tu_read_file(out, &n);
        cr_assert(logits[i] && n == 2 * 10 * sizeof(double), "%s: %zu bytes of logits", out, n);
        free(out);
    }
    cr_assert_eq(memcmp(logits[0], logits[1], 2 * 10 * sizeof(double)), 0, "the two files give different logits");
    free(logits[0]), free(logits[1]), free(ck);
    tu_rm_rf(dir);
    free(dir);
}
