/* json.c — JSON writer into a growable buffer, and a bounded-depth recursive-descent reader.
 *
 * See json.h for the contract. The writer's errors are sticky so building a row stays a flat list
 * of calls; the reader reports the first fault with its byte offset via tb_error_set().
 */
#include "json.h"

#include "status.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- writer */

void json_buf_init(struct json_buf *b)
{
    memset(b, 0, sizeof *b);
}

void json_buf_free(struct json_buf *b)
{
    free(b->data);
    json_buf_init(b);
}

void json_buf_reset(struct json_buf *b)
{
    char *data = b->data;
    size_t cap = b->cap;
    json_buf_init(b);
    b->data = data;
    b->cap = cap;
    if (data)
        data[0] = '\0';
}

const char *json_buf_str(const struct json_buf *b)
{
    return b->data ? b->data : "";
}

int json_buf_status(const struct json_buf *b)
{
    if (b->status != TB_OK)
        return b->status;
    if (b->depth != 0 || b->after_key)
        return tb_error_set(TB_EINVAL, "json_buf_status: %d container(s) left open%s", b->depth,
                            b->after_key ? " and a key without a value" : "");
    return TB_OK;
}

static void buf_fail(struct json_buf *b, int status, const char *what)
{
    if (b->status == TB_OK)
        b->status = tb_error_set(status, "json writer: %s", what);
}

static int buf_reserve(struct json_buf *b, size_t extra)
{
    if (b->status != TB_OK)
        return 0;
    if (b->len + extra + 1 <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        buf_fail(b, TB_ENOMEM, "out of memory growing the row buffer");
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

static void buf_put(struct json_buf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_putc(struct json_buf *b, char c)
{
    buf_put(b, &c, 1);
}

/* Every value goes through here: it checks the value is allowed at this point and writes the
 * separating comma. Returns 0 (and records the error) if the value may not be written. */
static int buf_before_value(struct json_buf *b)
{
    if (b->status != TB_OK)
        return 0;
    if (b->after_key) {
        b->after_key = 0;
        return 1;
    }
    if (b->depth == 0) {
        if (b->len != 0) {
            buf_fail(b, TB_EINVAL, "a second top-level value");
            return 0;
        }
        return 1;
    }
    if (b->is_object[b->depth - 1]) {
        buf_fail(b, TB_EINVAL, "a value inside an object without a key");
        return 0;
    }
    if (b->n_items[b->depth - 1])
        buf_putc(b, ',');
    b->n_items[b->depth - 1] = 1;
    return 1;
}

static void buf_open(struct json_buf *b, int is_object)
{
    if (!buf_before_value(b))
        return;
    if (b->depth >= JSON_MAX_DEPTH) {
        buf_fail(b, TB_EINVAL, "nesting deeper than JSON_MAX_DEPTH");
        return;
    }
    b->is_object[b->depth] = (unsigned char)is_object;
    b->n_items[b->depth] = 0;
    b->depth++;
    buf_putc(b, is_object ? '{' : '[');
}

static void buf_close(struct json_buf *b, int is_object)
{
    if (b->status != TB_OK)
        return;
    if (b->depth == 0 || b->is_object[b->depth - 1] != is_object || b->after_key) {
        buf_fail(b, TB_EINVAL, is_object ? "json_end_object does not match an open object"
                                         : "json_end_array does not match an open array");
        return;
    }
    b->depth--;
    buf_putc(b, is_object ? '}' : ']');
}

void json_begin_object(struct json_buf *b) { buf_open(b, 1); }
void json_end_object(struct json_buf *b) { buf_close(b, 1); }
void json_begin_array(struct json_buf *b) { buf_open(b, 0); }
void json_end_array(struct json_buf *b) { buf_close(b, 0); }

/* Length of a valid UTF-8 sequence starting at s (1..4), or 0 if invalid (overlongs, surrogates
 * and code points above U+10FFFF included). */
static int utf8_seq_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && s[1] < 0xA0)
            return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0)
            return 0; /* UTF-16 surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90)
            return 0;
        if (c == 0xF4 && s[1] >= 0x90)
            return 0;
        return 4;
    }
    return 0;
}

static void buf_put_string(struct json_buf *b, const char *s)
{
    buf_putc(b, '"');
    const unsigned char *p = (const unsigned char *)s;
    while (*p && b->status == TB_OK) {
        unsigned char c = *p;
        char esc[8];
        switch (c) {
        case '"': buf_put(b, "\\\"", 2); p++; continue;
        case '\\': buf_put(b, "\\\\", 2); p++; continue;
        case '\n': buf_put(b, "\\n", 2); p++; continue;
        case '\r': buf_put(b, "\\r", 2); p++; continue;
        case '\t': buf_put(b, "\\t", 2); p++; continue;
        case '\b': buf_put(b, "\\b", 2); p++; continue;
        case '\f': buf_put(b, "\\f", 2); p++; continue;
        default: break;
        }
        if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            buf_put(b, esc, 6);
            p++;
            continue;
        }
        int n = utf8_seq_len(p); /* stops at the NUL: a truncated sequence is invalid */
        if (n == 0) {
            buf_put(b, "\\ufffd", 6);
            p++;
            continue;
        }
        buf_put(b, (const char *)p, (size_t)n);
        p += n;
    }
    buf_putc(b, '"');
}

void json_key(struct json_buf *b, const char *key)
{
    if (b->status != TB_OK)
        return;
    if (b->depth == 0 || !b->is_object[b->depth - 1] || b->after_key) {
        buf_fail(b, TB_EINVAL, "a key outside an object or right after another key");
        return;
    }
    if (b->n_items[b->depth - 1])
        buf_putc(b, ',');
    b->n_items[b->depth - 1] = 1;
    buf_put_string(b, key ? key : "");
    buf_putc(b, ':');
    b->after_key = 1;
}

void json_str(struct json_buf *b, const char *s)
{
    if (!s) {
        json_null(b);
        return;
    }
    if (buf_before_value(b))
        buf_put_string(b, s);
}

void json_int(struct json_buf *b, long long v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    if (buf_before_value(b))
        buf_put(b, tmp, (size_t)n);
}

void json_format_double(double v, char *out, size_t out_size)
{
    if (!isfinite(v)) {
        snprintf(out, out_size, "null");
        return;
    }
    /* The shortest %.Ng that round-trips: 0.1 stays "0.1" instead of "0.10000000000000001". */
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(out, out_size, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

void json_double(struct json_buf *b, double v)
{
    char tmp[40];
    json_format_double(v, tmp, sizeof tmp);
    if (buf_before_value(b))
        buf_put(b, tmp, strlen(tmp));
}

void json_bool(struct json_buf *b, int v)
{
    if (buf_before_value(b))
        buf_put(b, v ? "true" : "false", v ? 4 : 5);
}

void json_null(struct json_buf *b)
{
    if (buf_before_value(b))
        buf_put(b, "null", 4);
}

void json_raw(struct json_buf *b, const char *text)
{
    if (b->status != TB_OK)
        return;
    /* Validate so that a bad fragment can never make the whole row unreadable. */
    struct json_value *v = NULL;
    int st = json_parse(text ? text : "", text ? strlen(text) : 0, &v);
    json_value_free(v);
    if (st != TB_OK) {
        buf_fail(b, st == TB_ENOMEM ? TB_ENOMEM : TB_EINVAL, "json_raw: text is not valid JSON");
        return;
    }
    if (buf_before_value(b))
        buf_put(b, text, strlen(text));
}

void json_key_str(struct json_buf *b, const char *key, const char *s) { json_key(b, key); json_str(b, s); }
void json_key_int(struct json_buf *b, const char *key, long long v) { json_key(b, key); json_int(b, v); }
void json_key_double(struct json_buf *b, const char *key, double v) { json_key(b, key); json_double(b, v); }
void json_key_bool(struct json_buf *b, const char *key, int v) { json_key(b, key); json_bool(b, v); }
void json_key_null(struct json_buf *b, const char *key) { json_key(b, key); json_null(b); }
void json_key_raw(struct json_buf *b, const char *key, const char *text) { json_key(b, key); json_raw(b, text); }
void json_key_object(struct json_buf *b, const char *key) { json_key(b, key); json_begin_object(b); }
void json_key_array(struct json_buf *b, const char *key) { json_key(b, key); json_begin_array(b); }

void json_write_value(struct json_buf *b, const struct json_value *v)
{
    if (!v) {
        json_null(b);
        return;
    }
    switch (v->type) {
    case JSON_NULL: json_null(b); break;
    case JSON_BOOL: json_bool(b, v->boolean); break;
    case JSON_NUMBER: json_double(b, v->number); break;
    case JSON_STRING: json_str(b, v->str); break;
    case JSON_ARRAY:
        json_begin_array(b);
        for (int i = 0; i < v->n; i++)
            json_write_value(b, &v->items[i]);
        json_end_array(b);
        break;
    case JSON_OBJECT:
        json_begin_object(b);
        for (int i = 0; i < v->n; i++) {
            json_key(b, v->keys[i]);
            json_write_value(b, &v->items[i]);
        }
        json_end_object(b);
        break;
    }
}

/* ---------------------------------------------------------------- reader */

struct parser {
    const char *s;
    size_t len;
    size_t pos;
    int status; /* first error; the message is set once, at the innermost fault */
};

static int parse_fail(struct parser *p, int status, const char *what)
{
    if (p->status == TB_OK) {
        if (status == TB_ENOMEM)
            p->status = tb_error_set(status, "json_parse: out of memory at byte %zu", p->pos);
        else
            p->status = tb_error_set(status, "json_parse: %s at byte %zu", what, p->pos);
    }
    return p->status;
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static int peek(const struct parser *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static void value_free_members(struct json_value *v)
{
    if (v->type == JSON_STRING) {
        free(v->str);
    } else if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (int i = 0; i < v->n; i++) {
            value_free_members(&v->items[i]);
            if (v->keys)
                free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof *v);
}

void json_value_free(struct json_value *v)
{
    if (!v)
        return;
    value_free_members(v);
    free(v);
}

static int parse_value(struct parser *p, struct json_value *out, int depth);

static int parse_literal(struct parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return parse_fail(p, TB_EFORMAT, "invalid literal");
    p->pos += n;
    return TB_OK;
}

static int parse_number(struct parser *p, struct json_value *out)
{
    /* Check the JSON grammar first (strtod alone accepts hex, inf, leading '+', ...). */
    size_t start = p->pos, i = p->pos;
    const char *s = p->s;
    if (i < p->len && s[i] == '-')
        i++;
    if (i >= p->len)
        return parse_fail(p, TB_EFORMAT, "truncated number");
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    } else {
        return parse_fail(p, TB_EFORMAT, "invalid number");
    }
    if (i < p->len && s[i] == '.') {
        i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9')
            return parse_fail(p, TB_EFORMAT, "digit expected after '.'");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9')
            return parse_fail(p, TB_EFORMAT, "digit expected in exponent");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    char tmp[64];
    size_t n = i - start;
    if (n >= sizeof tmp)
        return parse_fail(p, TB_EFORMAT, "number longer than 63 characters");
    memcpy(tmp, s + start, n);
    tmp[n] = '\0';
    out->type = JSON_NUMBER;
    out->number = strtod(tmp, NULL); /* overflow gives ±HUGE_VAL, which is fine for a reader */
    p->pos = i;
    return TB_OK;
}

static int hex4(const struct parser *p, size_t at, unsigned *out)
{
    if (p->len < 4 || at > p->len - 4)
        return 0;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[at + (size_t)k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t utf8_encode(unsigned cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string starting at the opening quote into a new NUL-terminated buffer. */
static int parse_string(struct parser *p, char **out)
{
    p->pos++; /* opening quote */
    size_t end = p->pos;
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\\')
            end++;
        end++;
    }
    if (end >= p->len)
        return parse_fail(p, TB_EFORMAT, "unterminated string");
    /* Decoded text is never longer than the escaped text. */
    char *buf = malloc(end - p->pos + 1);
    if (!buf)
        return parse_fail(p, TB_ENOMEM, "");
    size_t o = 0;
    while (p->pos < end) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20) {
            free(buf);
            return parse_fail(p, TB_EFORMAT, "control character in string");
        }
        if (c != '\\') {
            buf[o++] = (char)c;
            p->pos++;
            continue;
        }
        char e = p->s[p->pos + 1];
        p->pos += 2;
        switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!hex4(p, p->pos, &cp)) {
                free(buf);
                return parse_fail(p, TB_EFORMAT, "bad \\u escape");
            }
            p->pos += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                /* A high surrogate must be followed by an escaped low surrogate. */
                if (p->pos + 6 > end || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                    !hex4(p, p->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    free(buf);
                    return parse_fail(p, TB_EFORMAT, "unpaired UTF-16 surrogate");
                }
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(buf);
                return parse_fail(p, TB_EFORMAT, "unpaired UTF-16 surrogate");
            } else if (cp == 0) {
                free(buf);
                return parse_fail(p, TB_EFORMAT, "\\u0000 in string");
            }
            o += utf8_encode(cp, buf + o);
            break;
        }
        default:
            free(buf);
            return parse_fail(p, TB_EFORMAT, "invalid escape in string");
        }
    }
    buf[o] = '\0';
    p->pos = end + 1; /* closing quote */
    *out = buf;
    return TB_OK;
}

/* Appends one zeroed slot to a container's items (and keys, for objects); returns its index. */
static int container_push(struct parser *p, struct json_value *v, int *cap)
{
    if (v->n == *cap) {
        int ncap = *cap ? *cap * 2 : 4;
        struct json_value *items = realloc(v->items, (size_t)ncap * sizeof *items);
        if (!items)
            return parse_fail(p, TB_ENOMEM, "");
        v->items = items;
        if (v->type == JSON_OBJECT) {
            char **keys = realloc(v->keys, (size_t)ncap * sizeof *keys);
            if (!keys)
                return parse_fail(p, TB_ENOMEM, "");
            v->keys = keys;
        }
        *cap = ncap;
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    if (v->type == JSON_OBJECT)
        v->keys[v->n] = NULL;
    v->n++;
    return TB_OK;
}

static int parse_container(struct parser *p, struct json_value *out, int depth, int is_object)
{
    char close = is_object ? '}' : ']';
    int cap = 0;
    out->type = is_object ? JSON_OBJECT : JSON_ARRAY;
    p->pos++; /* opening bracket */
    skip_ws(p);
    if (peek(p) == close) {
        p->pos++;
        return TB_OK;
    }
    for (;;) {
        skip_ws(p);
        if (container_push(p, out, &cap) != TB_OK)
            return p->status;
        int i = out->n - 1;
        if (is_object) {
            if (peek(p) != '"')
                return parse_fail(p, TB_EFORMAT, "object key expected");
            if (parse_string(p, &out->keys[i]) != TB_OK)
                return p->status;
            skip_ws(p);
            if (peek(p) != ':')
                return parse_fail(p, TB_EFORMAT, "':' expected");
            p->pos++;
            skip_ws(p);
        }
        if (parse_value(p, &out->items[i], depth + 1) != TB_OK)
            return p->status;
        skip_ws(p);
        int c = peek(p);
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == close) {
            p->pos++;
            return TB_OK;
        }
        return parse_fail(p, TB_EFORMAT, is_object ? "',' or '}' expected" : "',' or ']' expected");
    }
}

static int parse_value(struct parser *p, struct json_value *out, int depth)
{
    skip_ws(p);
    int c = peek(p);
    if ((c == '{' || c == '[') && depth > JSON_MAX_DEPTH)
        return parse_fail(p, TB_EFORMAT, "nesting deeper than JSON_MAX_DEPTH");
    switch (c) {
    case '{': return parse_container(p, out, depth, 1);
    case '[': return parse_container(p, out, depth, 0);
    case '"':
        out->type = JSON_STRING;
        return parse_string(p, &out->str);
    case 't':
        out->type = JSON_BOOL;
        out->boolean = 1;
        return parse_literal(p, "true");
    case 'f':
        out->type = JSON_BOOL;
        out->boolean = 0;
        return parse_literal(p, "false");
    case 'n':
        out->type = JSON_NULL;
        return parse_literal(p, "null");
    case -1: return parse_fail(p, TB_EFORMAT, "unexpected end of input");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return parse_number(p, out);
        return parse_fail(p, TB_EFORMAT, "unexpected character");
    }
}

int json_parse(const char *text, size_t len, struct json_value **out)
{
    *out = NULL;
    if (!text)
        return tb_error_set(TB_EINVAL, "json_parse: NULL text");
    struct json_value *v = calloc(1, sizeof *v);
    if (!v)
        return tb_error_set(TB_ENOMEM, "json_parse: out of memory");
    struct parser p = {text, len, 0, TB_OK};
    if (parse_value(&p, v, 1) == TB_OK) {
        skip_ws(&p);
        if (p.pos != p.len)
            parse_fail(&p, TB_EFORMAT, "trailing characters after the value");
    }
    if (p.status != TB_OK) {
        json_value_free(v);
        return p.status;
    }
    *out = v;
    return TB_OK;
}

/* ---------------------------------------------------------------- lookup */

const struct json_value *json_get(const struct json_value *root, const char *path)
{
    const struct json_value *v = root;
    const char *seg = path;
    if (!v || !path)
        return NULL;
    if (*path == '\0')
        return v;
    for (;;) {
        const char *dot = strchr(seg, '.');
        size_t n = dot ? (size_t)(dot - seg) : strlen(seg);
        const struct json_value *next = NULL;
        if (v->type == JSON_OBJECT) {
            for (int i = 0; i < v->n; i++) {
                if (strlen(v->keys[i]) == n && memcmp(v->keys[i], seg, n) == 0) {
                    next = &v->items[i];
                    break;
                }
            }
        } else if (v->type == JSON_ARRAY && n > 0 && n < 10) {
            long idx = 0;
            size_t k;
            for (k = 0; k < n && seg[k] >= '0' && seg[k] <= '9'; k++)
                idx = idx * 10 + (seg[k] - '0');
            if (k == n && idx < v->n)
                next = &v->items[idx];
        }
        if (!next)
            return NULL;
        v = next;
        if (!dot)
            return v;
        seg = dot + 1;
    }
}

const char *json_get_str(const struct json_value *root, const char *path, const char *fallback)
{
    const struct json_value *v = json_get(root, path);
    return v && v->type == JSON_STRING ? v->str : fallback;
}

double json_get_number(const struct json_value *root, const char *path, double fallback)
{
    const struct json_value *v = json_get(root, path);
    return v && v->type == JSON_NUMBER ? v->number : fallback;
}

int json_get_bool(const struct json_value *root, const char *path, int fallback)
{
    const struct json_value *v = json_get(root, path);
    return v && v->type == JSON_BOOL ? v->boolean : fallback;
}

int json_value_copy(const struct json_value *v, struct json_value **out)
{
    /* Through the text form: the writer and the parser already agree on every type and escape. */
    struct json_buf b;
    json_buf_init(&b);
    json_write_value(&b, v);
    *out = NULL;
    int st = json_buf_status(&b);
    if (st == TB_OK) st = json_parse(json_buf_str(&b), b.len, out);
    json_buf_free(&b);
    return st;
}
