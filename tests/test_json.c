/* test_json.c — the JSON writer's exact output, escaping, parse round trips, and rejection of
 * malformed input (including truncations and byte flips of a real row, which must never crash). */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "status.h"

static struct json_value *parse_ok(const char *text)
{
    struct json_value *v = NULL;
    int st = json_parse(text, strlen(text), &v);
    cr_assert_eq(st, TB_OK, "parse of <%s> failed: %s", text, tb_error_get());
    cr_assert_not_null(v);
    return v;
}

Test(json, writer_exact_text)
{
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_int(&b, "schema_version", 1);
    json_key_object(&b, "config");
    json_key_str(&b, "backend", "threads");
    json_key_int(&b, "n_threads", -2);
    json_key_bool(&b, "fused", 1);
    json_end_object(&b);
    json_key_array(&b, "times");
    json_double(&b, 0.1);
    json_double(&b, 2.5);
    json_int(&b, 3);
    json_null(&b);
    json_begin_object(&b);
    json_end_object(&b);
    json_end_array(&b);
    json_key_double(&b, "nan", NAN);
    json_key_double(&b, "inf", -INFINITY);
    json_key_bool(&b, "ok", 0);
    json_key_null(&b, "none");
    json_key_raw(&b, "raw", "{\"x\": [1, 2]}");
    json_end_object(&b);
    cr_assert_eq(json_buf_status(&b), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(json_buf_str(&b),
                     "{\"schema_version\":1,\"config\":{\"backend\":\"threads\",\"n_threads\":-2,"
                     "\"fused\":true},\"times\":[0.1,2.5,3,null,{}],\"nan\":null,\"inf\":null,"
                     "\"ok\":false,\"none\":null,\"raw\":{\"x\": [1, 2]}}");
    json_buf_reset(&b);
    cr_assert_str_eq(json_buf_str(&b), "");
    json_begin_array(&b);
    json_end_array(&b);
    cr_assert_str_eq(json_buf_str(&b), "[]");
    json_buf_free(&b);
}

Test(json, string_escaping)
{
    struct json_buf b;
    json_buf_init(&b);
    json_begin_array(&b);
    json_str(&b, "q\"b\\s/ n\n r\r t\t \x01 \x1f \x7f caf\xc3\xa9 bad\xff end\xe2\x82");
    json_end_array(&b);
    cr_assert_eq(json_buf_status(&b), TB_OK);
    cr_assert_str_eq(json_buf_str(&b),
                     "[\"q\\\"b\\\\s/ n\\n r\\r t\\t \\u0001 \\u001f \x7f caf\xc3\xa9 bad\\ufffd "
                     "end\\ufffd\\ufffd\"]");
    json_buf_free(&b);
}

Test(json, doubles_shortest_round_trip)
{
    const double vals[] = {0.1, 1.0 / 3.0, -0.5, 1e300, 5e-324, 123456789012.0, 2.0 / 3.0 * 1e-7, 0.0};
    const char *want[] = {"0.1", NULL, "-0.5", "1e+300", NULL, "123456789012", NULL, "0"};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char s[40];
        json_format_double(vals[i], s, sizeof s);
        cr_assert_eq(strtod(s, NULL), vals[i], "%s does not read back as %.17g", s, vals[i]);
        if (want[i])
            cr_assert_str_eq(s, want[i]);
    }
    char s[40];
    json_format_double(NAN, s, sizeof s);
    cr_assert_str_eq(s, "null");
}

Test(json, round_trip_through_parser)
{
    struct json_buf b;
    json_buf_init(&b);
    const char *tricky = "tab\there \"quoted\" back\\slash \xe2\x82\xac \xf0\x9f\x98\x80 \x02";
    json_begin_object(&b);
    json_key_str(&b, "s", tricky);
    json_key_object(&b, "config");
    json_key_str(&b, "backend", "mirrored");
    json_key_int(&b, "replicas", 4);
    json_end_object(&b);
    json_key_object(&b, "figures");
    json_key_double(&b, "images_per_s", 12345.678);
    json_key_double(&b, "tiny", 1.25e-17);
    json_key_double(&b, "bad", NAN);
    json_end_object(&b);
    json_key_array(&b, "list");
    json_int(&b, 10);
    json_str(&b, "x");
    json_bool(&b, 1);
    json_end_array(&b);
    json_key_str(&b, "weird key \"q\"", "v");
    json_end_object(&b);
    cr_assert_eq(json_buf_status(&b), TB_OK);

    struct json_value *v = parse_ok(json_buf_str(&b));
    cr_assert_eq(v->type, JSON_OBJECT);
    cr_assert_str_eq(json_get_str(v, "s", ""), tricky);
    cr_assert_str_eq(json_get_str(v, "config.backend", ""), "mirrored");
    cr_assert_eq(json_get_number(v, "config.replicas", -1), 4.0);
    cr_assert_eq(json_get_number(v, "figures.images_per_s", -1), 12345.678);
    cr_assert_eq(json_get_number(v, "figures.tiny", -1), 1.25e-17);
    cr_assert_eq(json_get(v, "figures.bad")->type, JSON_NULL);
    cr_assert_eq(json_get_number(v, "figures.bad", -7), -7.0, "null falls back");
    cr_assert_eq(json_get_number(v, "list.0", -1), 10.0);
    cr_assert_str_eq(json_get_str(v, "list.1", ""), "x");
    cr_assert_eq(json_get_bool(v, "list.2", 0), 1);
    cr_assert_null(json_get(v, "list.3"));
    cr_assert_null(json_get(v, "list.x"));
    cr_assert_null(json_get(v, "config.backend.deeper"));
    cr_assert_null(json_get(v, "nope"));
    cr_assert_null(json_get(v, "config."));
    cr_assert_str_eq(json_get_str(v, "weird key \"q\"", ""), "v");
    cr_assert_str_eq(json_get_str(v, "config.replicas", "fb"), "fb", "type mismatch falls back");

    /* DOM -> text -> DOM -> text is stable. */
    struct json_buf b2;
    json_buf_init(&b2);
    json_write_value(&b2, v);
    cr_assert_eq(json_buf_status(&b2), TB_OK);
    cr_assert_str_eq(json_buf_str(&b2), json_buf_str(&b));
    /* json_value_copy: an independent DOM that writes the same text. */
    struct json_value *c = NULL;
    cr_assert_eq(json_value_copy(v, &c), TB_OK);
    cr_assert(c != NULL && c != v);
    struct json_buf b3;
    json_buf_init(&b3);
    json_write_value(&b3, c);
    cr_assert_str_eq(json_buf_str(&b3), json_buf_str(&b));
    json_buf_free(&b3);
    json_value_free(c);
    json_value_free(v);
    json_buf_free(&b2);
    json_buf_free(&b);
}

Test(json, parse_escapes_and_whitespace)
{
    struct json_value *v = parse_ok(" \t\r\n{ \"a\" : \"\\u00e9\\u20ac\\ud83d\\ude00\\/\\b\\f\" ,"
                                    " \"n\" : -0.5e+2 , \"e\":[ ], \"o\":{} }\n ");
    cr_assert_str_eq(json_get_str(v, "a", ""), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/\b\f");
    cr_assert_eq(json_get_number(v, "n", 0), -50.0);
    cr_assert_eq(json_get(v, "e")->type, JSON_ARRAY);
    cr_assert_eq(json_get(v, "e")->n, 0);
    cr_assert_eq(json_get(v, "o")->type, JSON_OBJECT);
    json_value_free(v);
    v = parse_ok("42");
    cr_assert_eq(v->type, JSON_NUMBER);
    json_value_free(v);
    v = parse_ok("[true,false,null,0,-0,1E3,0.25]");
    cr_assert_eq(v->n, 7);
    cr_assert_eq(v->items[5].number, 1000.0);
    json_value_free(v);
}

Test(json, malformed_rejected)
{
    const char *bad[] = {
        "", " ", "{", "}", "[", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}", "[1,]", "[1 2]", "{a:1}",
        "{'a':1}", "01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "nan", "Infinity", "tru",
        "nul", "falsey", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\nb\"", "\"\\u0000\"", "{\"a\":1}x", "[1]]",
        "{\"a\":1}{\"b\":2}", "\"trailing backslash\\", "[\"a\",", "{\"a\"", "{\"a\":",
        "12345678901234567890123456789012345678901234567890123456789012345"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct json_value *v = (struct json_value *)1;
        int st = json_parse(bad[i], strlen(bad[i]), &v);
        cr_assert_eq(st, TB_EFORMAT, "<%s> should be rejected (got %d)", bad[i], st);
        cr_assert_null(v);
        cr_assert(strstr(tb_error_get(), "byte") != NULL, "message names the offset: %s", tb_error_get());
    }
    /* An embedded NUL inside the given length is rejected, not silently cut. */
    struct json_value *v = NULL;
    cr_assert_eq(json_parse("\"a\0b\"", 5, &v), TB_EFORMAT);
    cr_assert_eq(json_parse("[1]\0", 4, &v), TB_EFORMAT);
}

Test(json, nesting_depth_bounded)
{
    char deep[JSON_MAX_DEPTH * 2 + 3];
    struct json_value *v = NULL;
    /* Exactly JSON_MAX_DEPTH nested arrays: accepted. */
    memset(deep, '[', JSON_MAX_DEPTH);
    memset(deep + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
    cr_assert_eq(json_parse(deep, 2 * JSON_MAX_DEPTH, &v), TB_OK, "%s", tb_error_get());
    json_value_free(v);
    /* One more: rejected. */
    memset(deep, '[', JSON_MAX_DEPTH + 1);
    memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
    cr_assert_eq(json_parse(deep, 2 * JSON_MAX_DEPTH + 2, &v), TB_EFORMAT);
    /* A hostile 100k-deep input fails quickly instead of overflowing the stack. */
    size_t n = 100000;
    char *huge = malloc(n);
    memset(huge, '[', n);
    cr_assert_eq(json_parse(huge, n, &v), TB_EFORMAT);
    memset(huge, '{', n);
    for (size_t i = 0; i + 5 < n; i += 5)
        memcpy(huge + i, "{\"a\":", 5);
    cr_assert_eq(json_parse(huge, n, &v), TB_EFORMAT);
    free(huge);
}

Test(json, writer_misuse_reported)
{
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_int(&b, 1); /* value without key */
    json_end_object(&b);
    cr_assert_eq(json_buf_status(&b), TB_EINVAL);
    json_buf_free(&b);

    json_begin_object(&b);
    json_key_str(&b, "a", "b");
    cr_assert_eq(json_buf_status(&b), TB_EINVAL, "unclosed object");
    json_buf_free(&b);

    json_begin_array(&b);
    json_key(&b, "k"); /* key in array */
    cr_assert_eq(json_buf_status(&b), TB_EINVAL);
    json_buf_free(&b);

    json_begin_array(&b);
    json_end_object(&b); /* mismatched close */
    cr_assert_eq(json_buf_status(&b), TB_EINVAL);
    json_buf_free(&b);

    json_begin_object(&b);
    json_key_raw(&b, "r", "{not json");
    json_end_object(&b);
    cr_assert_eq(json_buf_status(&b), TB_EINVAL);
    json_buf_free(&b);

    json_int(&b, 1);
    json_int(&b, 2); /* two top-level values */
    cr_assert_eq(json_buf_status(&b), TB_EINVAL);
    json_buf_free(&b);

    for (int i = 0; i <= JSON_MAX_DEPTH; i++)
        json_begin_array(&b);
    cr_assert_eq(json_buf_status(&b), TB_EINVAL, "too deep");
    json_buf_free(&b);
}

static const char *sample_row =
    "{\"schema_version\":1,\"config\":{\"backend\":\"ipu\",\"stages\":4,\"schedule\":\"1f1b\"},"
    "\"figures\":{\"images_per_s\":{\"value\":1234.5,\"unit\":\"img/s\",\"kind\":\"measured\"},"
    "\"times\":[0.125,0.5,1e-3]},\"note\":\"caf\\u00e9 \\\"x\\\"\",\"ok\":true,\"n\":null}";

Test(json, truncations_and_flips_never_crash)
{
    size_t n = strlen(sample_row);
    struct json_value *v = NULL;
    cr_assert_eq(json_parse(sample_row, n, &v), TB_OK, "%s", tb_error_get());
    json_value_free(v);
    for (size_t k = 0; k < n; k++) {
        v = NULL;
        int st = json_parse(sample_row, k, &v);
        cr_assert_eq(st, TB_EFORMAT, "a %zu-byte prefix must be rejected", k);
        cr_assert_null(v);
    }
    char *copy = malloc(n);
    uint64_t s = 7;
    for (int trial = 0; trial < 5000; trial++) {
        memcpy(copy, sample_row, n);
        for (int f = 0; f < 1 + trial % 3; f++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            copy[(s >> 33) % n] = (char)(s >> 20);
        }
        v = NULL;
        int st = json_parse(copy, n, &v);
        cr_assert(st == TB_OK || st == TB_EFORMAT);
        cr_assert((st == TB_OK) == (v != NULL));
        json_value_free(v);
    }
    free(copy);
}

/* An error message is one line of text whatever its arguments hold (a probe's calibration with "\n" and a
 * terminal escape in its CPU name split the warning and coloured the terminal; a tensor name that is not UTF-8
 * went out raw): control bytes and malformed UTF-8 show as \xNN, well-formed UTF-8 as itself. */
Test(json, error_messages_are_one_line_of_text)
{
    cr_assert_eq(tb_error_set(TB_EIO, "cpu '%s' and %s", "EPYC\n\x1b[31mred", "x\xff\xfey"), TB_EIO);
    cr_assert_str_eq(tb_error_get(), "cpu 'EPYC\\x0a\\x1b[31mred' and x\\xff\\xfey");
    tb_error_set(TB_EIO, "%s", "1 \xc3\x97 2 \xe2\x80\x94 ok, \xc3 cut, \xed\xa0\x80 surrogate, \xe0\x80\x80 overlong, tab\t.");
    cr_assert_str_eq(tb_error_get(),
                     "1 \xc3\x97 2 \xe2\x80\x94 ok, \\xc3 cut, \\xed\\xa0\\x80 surrogate, \\xe0\\x80\\x80 overlong, tab\\x09.");
    /* well-formed, but a terminal's: C1 controls (U+009B, an escape's start) and bidirectional overrides */
    tb_error_set(TB_EIO, "%s", "a\xc2\x9b" "31m b\xe2\x80\xae" "c d\xe2\x81\xa6" "e \xc2\xa0ok");
    cr_assert_str_eq(tb_error_get(), "a\\xc2\\x9b31m b\\xe2\\x80\\xaec d\\xe2\\x81\\xa6e \xc2\xa0ok");
    /* a long message is cut whole: no escape or character split at the end */
    char big[2000];
    memset(big, 'a', sizeof big - 1), big[sizeof big - 1] = '\0';
    big[508] = '\x01';
    tb_error_set(TB_EIO, "%s", big);
    cr_assert_lt(strlen(tb_error_get()), 512);
    cr_assert_eq(strchr(tb_error_get(), '\\'), NULL, "a cut escape: %s", tb_error_get() + 500);
    tb_error_clear();
}
