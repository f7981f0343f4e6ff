/* test_export.c — `bench export --csv`: rows with different key sets become one table whose columns
 * are the union of their dotted key paths (empty cells where a row lacks one), arrays are one cell of
 * compact JSON, cells are quoted as RFC 4180 says, records end in CRLF, several --in files append in
 * order, and the command's usage errors and --help behave. */
#include "test_harness_util.h"

#include "export.h"
#include "status.h"

#include <sys/sysmacros.h>
#include <sys/wait.h>

/* Runs `TB_BENCH_EXE args` in the test's directory with stdout and stderr into out; returns its exit code. */
static int bench_sh(const char *args, const char *out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s > '%s' 2>&1", th_dir, TB_BENCH_EXE, args, out);
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static const char *const row_a =
    "{\"schema_version\":1,\"kind\":\"throughput\",\"config\":{\"backend\":\"cpu\",\"batch\":32,\"lr\":0.1},"
    "\"figures\":{\"images_per_s\":1234.5,\"repeat_images_per_s\":[1000,1010.25],\"pipeline\":{\"stages\":2}}}\n";
static const char *const row_b = /* other keys, a nested array of objects, strings that need quoting */
    "{\"schema_version\":1,\"kind\":\"tta\",\"status\":\"ok\",\"config\":{\"backend\":\"a,b\",\"batch\":8,"
    "\"split\":\"say \\\"hi\\\"\\nthere\"},\"figures\":{\"runs\":[{\"tta_s\":1.5,\"reached\":true}],"
    "\"tta_median_s\":null,\"partial\":false}}\n";

Test(export, union_of_columns_and_rfc4180_cells, .init = th_setup, .fini = th_teardown)
{
    char in[192], csv[192];
    th_path(in, sizeof in, "rows.jsonl");
    th_path(csv, sizeof csv, "rows.csv");
    th_write(in, row_a);
    th_append(in, "torn line, not JSON\n");
    th_append(in, row_b);
    const char *inputs[] = {in};
    int rows = 0, cols = 0;
    th_stderr_begin();
    const int st = export_csv(inputs, 1, csv, &rows, &cols);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, "rows.jsonl:2") != NULL, "the malformed line is reported: %s", err);
    free(err);
    cr_assert_eq(rows, 2);
    cr_assert_eq(cols, 13);
    char *text = th_read(csv);
    const char *expect =
        "schema_version,kind,config.backend,config.batch,config.lr,figures.images_per_s,figures.repeat_images_per_s,"
        "figures.pipeline.stages,status,config.split,figures.runs,figures.tta_median_s,figures.partial\r\n"
        "1,throughput,cpu,32,0.1,1234.5,\"[1000,1010.25]\",2,,,,,\r\n"
        "1,tta,\"a,b\",8,,,,,ok,\"say \"\"hi\"\"\nthere\",\"[{\"\"tta_s\"\":1.5,\"\"reached\"\":true}]\",,0\r\n";
    cr_assert_str_eq(text, expect);
    free(text);
}

Test(export, cli_several_inputs_and_usage, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192], out[192];
    th_write(th_path(a, sizeof a, "a.jsonl"), row_a);
    th_write(th_path(b, sizeof b, "b.jsonl"), row_b);
    th_path(out, sizeof out, "out.txt");
    cr_assert_eq(bench_sh("export --csv t.csv --in a.jsonl --in b.jsonl", out), 0);
    char *text = th_read(out);
    cr_assert(strstr(text, "t.csv: 2 rows, 13 columns") != NULL, "%s", text);
    free(text);
    char p[192];
    text = th_read(th_path(p, sizeof p, "t.csv"));
    cr_assert(!strncmp(text, "schema_version,kind,config.backend,", 35), "%s", text);
    cr_assert(strstr(text, "\r\n1,throughput,cpu,32,") && strstr(text, "\r\n1,tta,\"a,b\",8,"), "%s", text);
    free(text);
    /* the default input is results/results.jsonl; "-" is stdout */
    cr_assert_eq(mkdir(th_path(p, sizeof p, "results"), 0755), 0);
    th_write(th_path(p, sizeof p, "results/results.jsonl"), row_a);
    cr_assert_eq(bench_sh("export --csv -", out), 0);
    text = th_read(out);
    cr_assert(!strncmp(text, "schema_version,kind,config.backend,config.batch,config.lr,", 58), "%s", text);
    cr_assert(strstr(text, "status") == NULL, "only row_a's columns: %s", text);
    free(text);

    cr_assert_eq(bench_sh("export --help", out), 0);
    text = th_read(out);
    cr_assert(strstr(text, "usage: bench export --csv FILE") != NULL, "%s", text);
    free(text);
    cr_assert_eq(bench_sh("export --in a.jsonl", out), 2, "--csv is required");
    text = th_read(out); /* one line, not the whole usage */
    cr_assert_str_eq(text, "bench export: --csv FILE is needed (\"-\" for stdout; see bench export --help)\n");
    free(text);
    cr_assert_eq(bench_sh("export --csv t.csv --bogus", out), 2);
    cr_assert_eq(bench_sh("export --csv t.csv --in", out), 2);
    cr_assert_eq(bench_sh("export --csv t.csv --in missing.jsonl", out), 1, "an unreadable input is a runtime failure");
    text = th_read(out);
    cr_assert(strstr(text, "missing.jsonl") != NULL, "%s", text);
    free(text);
}

/* Probe item 3: --csv naming a device or FIFO renamed a regular file over it (--csv /dev/null replaced the
 * machine's /dev/null). It is refused with one line, exit 1, and the node stays what it was. */
Test(export, device_or_fifo_target_is_refused, .init = th_setup, .fini = th_teardown)
{
    char a[192], node[192], out[192];
    th_write(th_path(a, sizeof a, "a.jsonl"), row_a);
    th_path(out, sizeof out, "out.txt");
    cr_assert_eq(mkfifo(th_path(node, sizeof node, "fifo"), 0644), 0);
    cr_assert_eq(bench_sh("export --csv fifo --in a.jsonl", out), 1);
    char *text = th_read(out);
    cr_assert(strstr(text, "bench export: --csv fifo: not a regular file") != NULL, "%s", text);
    cr_assert(strchr(text, '\n') == strrchr(text, '\n'), "one line: %s", text);
    free(text);
    struct stat sb;
    cr_assert(stat(node, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    /* A private character device like /dev/null (only where this user may make one). */
    if (mknod(th_path(node, sizeof node, "null"), S_IFCHR | 0666, makedev(1, 3)) == 0) {
        cr_assert_eq(bench_sh("export --csv null --in a.jsonl", out), 1);
        text = th_read(out);
        cr_assert(strstr(text, "bench export: --csv null: not a regular file") != NULL, "%s", text);
        free(text);
        cr_assert(stat(node, &sb) == 0 && S_ISCHR(sb.st_mode), "the device node was replaced");
    }
    cr_assert_eq(system("test -z \"$(ls -A | grep '\\.tmp\\.')\""), 0, "no temporary file is left");
}

/* Probe item 4: `export --csv X --in X` replaced the rows with the table. An output that is one of the
 * inputs (same file, however named: another path, a hard link) is a usage error, before anything is written. */
Test(export, output_that_is_an_input_is_refused, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192], hard[192], out[192];
    th_write(th_path(a, sizeof a, "r.jsonl"), row_a);
    th_write(th_path(b, sizeof b, "b.jsonl"), row_b);
    cr_assert_eq(link(a, th_path(hard, sizeof hard, "hard.jsonl")), 0);
    th_path(out, sizeof out, "out.txt");
    static const char *const args[] = {"export --csv r.jsonl --in r.jsonl", "export --csv ./r.jsonl --in b.jsonl --in r.jsonl",
                                       "export --csv hard.jsonl --in r.jsonl"};
    for (size_t k = 0; k < sizeof args / sizeof *args; k++) {
        cr_assert_eq(bench_sh(args[k], out), 2, "%s", args[k]);
        char *text = th_read(out);
        cr_assert(strstr(text, "is also an input") != NULL, "%s: %s", args[k], text);
        cr_assert(strchr(text, '\n') == strrchr(text, '\n'), "one line: %s", text);
        free(text);
        text = th_read(a);
        cr_assert_str_eq(text, row_a, "%s: the input was overwritten", args[k]);
        free(text);
    }
    const char *inputs[] = {b, a};
    cr_assert_eq(export_csv(inputs, 2, a, NULL, NULL), TB_EINVAL);
    tb_error_clear();
    /* Nor another results file: the table replaced its rows, exit 0. A CSV there is replaced, as ever. */
    cr_assert_eq(bench_sh("export --csv r.jsonl --in b.jsonl", out), 2);
    char *text = th_read(out);
    cr_assert(strstr(text, "--csv r.jsonl: an existing results file") != NULL, "%s", text);
    free(text);
    text = th_read(a);
    cr_assert_str_eq(text, row_a, "the other results file was overwritten");
    free(text);
    th_write("old.csv", "a,b\n1,2\n");
    cr_assert_eq(bench_sh("export --csv old.csv --in b.jsonl", out), 0);
}

/* A probe's: an input with no usable row (empty, garbage) exited 0 and replaced an existing CSV with an empty
 * file. It is one line, exit 1, and the old table stays. */
Test(export, no_usable_rows_keeps_the_old_table, .init = th_setup, .fini = th_teardown)
{
    char in[192], csv[192], out[192];
    th_path(out, sizeof out, "out.txt");
    th_write(th_path(csv, sizeof csv, "keep.csv"), "keep\r\n");
    static const char *const inputs[] = {"", "\x01\x02 garbage\n{not json\n"};
    for (size_t k = 0; k < sizeof inputs / sizeof *inputs; k++) {
        th_write(th_path(in, sizeof in, "in.jsonl"), inputs[k]);
        cr_assert_eq(bench_sh("export --csv keep.csv --in in.jsonl", out), 1, "input %zu", k);
        char *text = th_read(out);
        cr_assert(strstr(text, "no usable result rows") && strstr(text, "left as it was"), "%s", text);
        free(text);
        text = th_read(csv);
        cr_assert_str_eq(text, "keep\r\n", "input %zu: the old table was replaced", k);
        free(text);
    }
}

/* Probe item 22: a dotted key and the nested path it spells ({"a":{"b":1},"a.b":2}) were merged into one
 * column a.b and one value silently dropped. Both are kept: the second gets column a.b#2, with a warning
 * naming it; a row holding only one of them fills a.b. */
Test(export, dotted_key_and_nested_path_are_both_kept, .init = th_setup, .fini = th_teardown)
{
    char in[192], csv[192];
    th_write(th_path(in, sizeof in, "dot.jsonl"), "{\"schema_version\":1,\"a\":{\"b\":1},\"a.b\":2}\n"
                                                  "{\"schema_version\":1,\"a.b\":3}\n");
    th_path(csv, sizeof csv, "dot.csv");
    const char *inputs[] = {in};
    int rows = 0, cols = 0;
    th_stderr_begin();
    const int st = export_csv(inputs, 1, csv, &rows, &cols);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, "dot.jsonl:1") && strstr(err, "a.b#2"), "%s", err);
    cr_assert(strchr(err, '\n') == strrchr(err, '\n'), "one line: %s", err);
    free(err);
    char *text = th_read(csv);
    cr_assert_str_eq(text, "schema_version,a.b,a.b#2\r\n1,1,2\r\n1,3,\r\n");
    free(text);
}

/* Probe item 22: finding a row's columns was linear in the columns (100,000 distinct keys: 9.7 s). */
Test(export, many_distinct_keys_in_linear_time, .init = th_setup, .fini = th_teardown, .timeout = 5)
{
    char in[192], csv[192];
    th_path(in, sizeof in, "wide.jsonl");
    FILE *f = fopen(in, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"schema_version\":1");
    for (int k = 0; k < 100000; k++) fprintf(f, ",\"k%d\":%d", k, k);
    fprintf(f, "}\n");
    fclose(f);
    const char *inputs[] = {in};
    int rows = 0, cols = 0;
    cr_assert_eq(export_csv(inputs, 1, th_path(csv, sizeof csv, "wide.csv"), &rows, &cols), TB_OK, "%s", tb_error_get());
    cr_assert(rows == 1 && cols == 100001, "%d rows, %d columns", rows, cols);
}
