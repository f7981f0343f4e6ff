/* test_conv_tuning.c — `--conv-algo auto`'s choices kept in --tuning's file (harness/conv_tuning.h): a second
 * run takes them instead of timing, so it runs the same kernels and gives the same bits; the file's choices
 * are the ones run; a file that is not a tuning file, or entries the engine cannot run, are warnings that cost
 * nothing but timing. */
#include "test_reliability_util.h"

#include "conv_tuning.h"
#include "exec.h"
#include "executor.h"
#include "json.h"

#include <criterion/criterion.h>
#include <string.h>

/* A small EfficientNet run: its 16×16 convolutions are the stem (3×3) and 1×1 layers. */
#define CT_BASE "--backend", "cpu", "--workload", "effnet-b0", "--resolution", "16", "--data", "synthetic", \
                "--synthetic-samples", "64,16", "--batch", "8", "--plan", "throughput", "--steps", "3",      \
                "--warmup", "1", "--mllog", "none", "--out", "results.jsonl", "--quiet"

/* The row of run k (0-based) in dir's results. */
static struct json_value *row_of(const char *dir, int k)
{
    struct json_value *rows[16];
    const int n = rb_rows(dir, rows, 16);
    cr_assert_gt(n, k, "%d rows", n);
    for (int i = 0; i < n; i++)
        if (i != k) json_value_free(rows[i]);
    return rows[k];
}

/* Replaces every occurrence of from by to in the file dir/name (same length or not). */
static void replace_in(const char *dir, const char *name, const char *from, const char *to)
{
    char *p = rb_path(dir, name), *s = tu_read_file(p, NULL);
    cr_assert_not_null(s, "no %s", p);
    char *out = calloc(strlen(s) * (strlen(to) + 1) + 1, 1);
    cr_assert_not_null(out);
    for (char *r = s, *w = out;;) {
        char *hit = strstr(r, from);
        if (!hit) {
            strcpy(w, r);
            break;
        }
        memcpy(w, r, (size_t)(hit - r));
        w += hit - r;
        strcpy(w, to);
        w += strlen(to);
        r = hit + strlen(from);
    }
    tu_write_file(p, out, strlen(out));
    free(out), free(s), free(p);
}

Test(conv_tuning, second_run_takes_the_files_choices_and_bits, .timeout = 120)
{
    char *dir = tu_mkdtemp("tuning");
    cr_assert_eq(rb_run(dir, "a", RB_ARGS(CT_BASE), NULL), 0, "%s", rb_stderr(dir, "a"));
    /* The default file, beside the default rows: one section for this machine and executable. */
    char *path = rb_path(dir, "results/tuning.json");
    size_t len;
    char *text = tu_read_file(path, &len);
    cr_assert_not_null(text, "no %s", path);
    struct json_value *f = NULL;
    cr_assert_eq(json_parse(text, len, &f), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(json_get_str(f, "kind", ""), "conv_tuning");
    const struct json_value *secs = json_get(f, "sections");
    cr_assert(secs && secs->type == JSON_ARRAY && secs->n == 1, "%s", text);
    const struct json_value *es = json_get(&secs->items[0], "entries");
    cr_assert(es && es->type == JSON_ARRAY && es->n > 0, "%s", text);
    cr_assert_gt(strlen(json_get_str(&secs->items[0], "build_id", "")), 8, "%s", text);
    json_value_free(f);
    free(text);

    cr_assert_eq(rb_run(dir, "b", RB_ARGS(CT_BASE), NULL), 0, "%s", rb_stderr(dir, "b"));
    struct json_value *a = row_of(dir, 0), *b = row_of(dir, 1);
    char algos[256];
    snprintf(algos, sizeof algos, "%s", json_get_str(a, "figures.conv_algos", ""));
    cr_assert_gt(strlen(algos), 1, "figures.conv_algos '%s'", algos);
    cr_assert_gt(json_get_number(a, "figures.conv_shapes_timed", -1), 0);
    cr_assert_eq(json_get_number(b, "figures.conv_shapes_timed", -1), 0, "the second run timed shapes again");
    cr_assert_str_eq(json_get_str(b, "figures.conv_algos", ""), algos);
    cr_assert_str_eq(json_get_str(b, "config.tuning", ""), "results/tuning.json");
    const double la = json_get_number(a, "figures.final_loss", NAN), lb = json_get_number(b, "figures.final_loss", NAN);
    cr_assert(memcmp(&la, &lb, sizeof la) == 0, "final losses %.17g and %.17g", la, lb);
    json_value_free(a), json_value_free(b);

    /* The file's choices are what runs: every entry rewritten to im2col (it runs every shape). */
    replace_in(dir, "results/tuning.json", "\"gemm1x1\"", "\"im2col\"");
    replace_in(dir, "results/tuning.json", "\"direct\"", "\"im2col\"");
    cr_assert_eq(rb_run(dir, "c", RB_ARGS(CT_BASE), NULL), 0, "%s", rb_stderr(dir, "c"));
    struct json_value *c = row_of(dir, 2);
    const char *ca = json_get_str(c, "figures.conv_algos", "");
    cr_assert_eq(strspn(ca, "i"), strlen(algos), "conv_algos '%s' after the file said im2col for every shape", ca);
    cr_assert_eq(json_get_number(c, "figures.conv_shapes_timed", -1), 0);
    json_value_free(c);
    free(path);
    tu_rm_rf(dir);
    free(dir);
}

/* An entry the engine cannot run (its output size does not follow from its shape) is skipped with one
 * warning and its shape timed; the rest are taken. */
Test(conv_tuning, entries_the_engine_cannot_run_are_skipped, .timeout = 120)
{
    char *dir = tu_mkdtemp("tuning_bad");
    cr_assert_eq(rb_run(dir, "a", RB_ARGS(CT_BASE), NULL), 0, "%s", rb_stderr(dir, "a"));
    /* The stem: 16×16 in, stride 2, 8×8 out; claimed 9×8. */
    replace_in(dir, "results/tuning.json", "[8,16,16,3,8,8,", "[8,16,16,3,9,8,");
    cr_assert_eq(rb_run(dir, "b", RB_ARGS(CT_BASE), NULL), 0, "%s", rb_stderr(dir, "b"));
    char *err = rb_stderr(dir, "b");
    cr_assert(strstr(err, "1 entry this engine cannot run, skipped") != NULL, "%s", err);
    struct json_value *b = row_of(dir, 1);
    cr_assert_eq(json_get_number(b, "figures.conv_shapes_timed", -1), 1);
    json_value_free(b);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* A --tuning path that holds something else is read as nothing and never replaced; `none` writes nothing. */
Test(conv_tuning, other_files_are_left_alone_and_none_writes_nothing, .timeout = 120)
{
    char *dir = tu_mkdtemp("tuning_other");
    static const char keep[] = "{\"schema\":1,\"kind\":\"calibration\"}\n";
    rb_write(dir, "mine.json", keep);
    cr_assert_eq(rb_run(dir, "a", RB_ARGS(CT_BASE), RB_ARGS("--tuning", "mine.json")), 0, "%s", rb_stderr(dir, "a"));
    char *err = rb_stderr(dir, "a"), *p = rb_path(dir, "mine.json"), *after = tu_read_file(p, NULL);
    char *errp = rb_path(dir, "a.err");
    cr_assert(strstr(err, "--tuning mine.json: not a tuning file") != NULL && strstr(err, "left as it is"), "%s", err);
    cr_assert_eq(rb_count_lines(errp), 1, "one warning line: %s", err);
    cr_assert_str_eq(after, keep);
    free(err), free(p), free(after), free(errp);

    cr_assert_eq(rb_run(dir, "b", RB_ARGS(CT_BASE), RB_ARGS("--tuning", "none")), 0, "%s", rb_stderr(dir, "b"));
    struct stat sb;
    char *def = rb_path(dir, "results/tuning.json");
    cr_assert_neq(stat(def, &sb), 0, "--tuning none wrote %s", def);
    struct json_value *b = row_of(dir, 1);
    cr_assert_str_eq(json_get_str(b, "config.tuning", ""), "none");
    cr_assert_gt(json_get_number(b, "figures.conv_shapes_timed", -1), 0);
    json_value_free(b);
    free(def);
    tu_rm_rf(dir);
    free(dir);
}

/* The choices as bytes between processes (mirrored over MPI sends rank 0's): a choice taken replaces the
 * process's own for its key, one the engine cannot run is skipped, and a partial choice is refused whole. */
Test(conv_tuning, choices_cross_processes_as_bytes)
{
    struct exec_tune_entry e = {.nth = 1, .data = 1, .algo = CONV_ALGO_GEMM1X1};
    cr_assert_eq(conv_shape_init(&e.s, 8, 16, 16, 32, 16, 1, 1, 1, 1), TB_OK);
    cr_assert_eq(executor_choices_export(NULL, 0), 0, "a fresh process has measured nothing");
    cr_assert_eq(executor_choices_import(&e, sizeof e), TB_OK);
    e.algo = CONV_ALGO_IM2COL;
    struct exec_tune_entry two[2] = {e, e};
    two[1].s.OH = 9; /* not what its shape gives */
    cr_assert_eq(executor_choices_import(two, sizeof two), TB_OK);
    struct exec_tune_entry got[4];
    cr_assert_eq(executor_choices_export(got, sizeof got), sizeof e, "the bad choice was taken");
    cr_assert_eq(got[0].algo, CONV_ALGO_IM2COL, "the imported choice did not replace the process's");
    cr_assert_eq(executor_choices_import(two, sizeof e + 1), TB_EINVAL);
    tb_error_clear();
}

/* The preparation's timing is said once, by the run that timed (the seconds before the first step at 224×224
 * were silent); a run that took every choice from the file says nothing of it. */
Test(conv_tuning, the_run_that_timed_says_so, .timeout = 120)
{
    char *dir = tu_mkdtemp("tuning_said");
    const char *const loud[] = {"--backend", "cpu", "--workload", "effnet-b0", "--resolution", "16", "--data", "synthetic",
                                "--synthetic-samples", "64,16", "--batch", "8", "--plan", "throughput", "--steps", "2",
                                "--warmup", "1", "--mllog", "none", "--out", "results.jsonl", NULL};
    for (int k = 0; k < 2; k++) {
        const char *tag = k ? "second" : "first";
        cr_assert_eq(rb_run(dir, tag, loud, NULL), 0, "%s", rb_stderr(dir, tag));
        char *err = rb_stderr(dir, tag);
        const char *said = strstr(err, "bench: timed the algorithms of ");
        cr_assert_eq(said != NULL, k == 0, "%s run: %s", tag, err);
        if (said) cr_assert(strstr(said, "convolution shapes; kept in results/tuning.json for later runs\n"), "%s", err);
        free(err);
    }
    tu_rm_rf(dir);
    free(dir);
}

/* Two processes saving into one tuning file: each wrote its own choices over what the other had saved meanwhile
 * (25 of 44 entries left). The save now takes the folder's lock and writes the union of the file's section and its
 * own choices (its own kept where both have a shape). Here the "other process" is the file edited between saves:
 * the entry it holds is not in this process's cache. */
Test(conv_tuning, a_save_keeps_what_another_process_saved_meanwhile)
{
    char *dir = tu_mkdtemp("tuning_merge"), *path = NULL;
    cr_assert(asprintf(&path, "%s/tuning.json", dir) > 0);
    struct machine_info mi;
    cr_assert_eq(machine_info_read(&mi), TB_OK, "%s", tb_error_get());
    struct exec_tune_entry e = {.nth = 1, .data = 1, .algo = CONV_ALGO_GEMM1X1};
    cr_assert_eq(conv_shape_init(&e.s, 8, 16, 16, 32, 16, 1, 1, 1, 1), TB_OK);
    cr_assert_eq(executor_choices_import(&e, sizeof e), TB_OK);
    cr_assert_eq(conv_tuning_save(path, &mi), TB_OK, "%s", tb_error_get());
    /* the other process's save: the same section, another shape (batch 8 -> 4) */
    replace_in(dir, "tuning.json", "[8,16,16,32,16,16,16,", "[4,16,16,32,16,16,16,");
    char *text = tu_read_file(path, NULL);
    cr_assert(text && strstr(text, "[4,16,16,32,16,16,16,") && !strstr(text, "[8,16,16,32,16,16,16,"), "%s", text);
    free(text);
    cr_assert_eq(conv_tuning_save(path, &mi), TB_OK, "%s", tb_error_get());
    text = tu_read_file(path, NULL);
    cr_assert(strstr(text, "[4,16,16,32,16,16,16,") && strstr(text, "[8,16,16,32,16,16,16,"),
              "the other process's entry was lost: %s", text);
    free(text), free(path);
    tu_rm_rf(dir);
    free(dir);
}
