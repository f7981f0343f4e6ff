/* json.h — a tiny JSON writer (one result row in memory) and a small reader for our own rows.
 *
 * Writer: `struct json_buf` is a growable NUL-terminated buffer plus a container stack that puts the
 * commas in. Writer calls return nothing; the first failure (out of memory, unbalanced or too deep
 * nesting, a value where a key is needed, invalid raw text) is sticky and read once with
 * json_buf_status() when the row is complete. Doubles that are NaN or Inf are written as null, so
 * a row is always valid JSON. Numbers use the C locale's '.' (the harness never calls setlocale).
 *
 * Reader: json_parse() builds a small DOM (objects, arrays, strings, numbers, bools, null) from one
 * line, with lookup by dotted path ("config.backend", "figures.images_per_s", "a.list.0"). It
 * rejects malformed input with TB_EFORMAT and a message giving the byte offset; recursion depth is
 * bounded by JSON_MAX_DEPTH, so hostile input cannot overflow the stack.
 *
 * Not a general JSON library: no streaming, no comments, no duplicate-key detection (lookup returns
 * the first), strings may not contain \u0000.
 * Threading: no shared state; one json_buf or DOM per thread. The caller owns both (json_buf_free,
 * json_value_free).
 */
#ifndef TB_JSON_H
#define TB_JSON_H

#include <stddef.h>

#define JSON_MAX_DEPTH 32

struct json_buf {
    char *data;   /* NUL-terminated text, owned; NULL until the first write */
    size_t len;   /* bytes used, without the NUL */
    size_t cap;   /* bytes allocated */
    int depth;    /* open containers */
    int status;   /* first error (TB_OK while fine); sticky */
    int after_key;                       /* a key was just written: the value takes no comma */
    unsigned char is_object[JSON_MAX_DEPTH]; /* per open container: object (1) or array (0) */
    unsigned char n_items[JSON_MAX_DEPTH];   /* per open container: 0 before its first member */
};

/* Initialises an empty buffer (no allocation yet). */
void json_buf_init(struct json_buf *b);
/* Frees the buffer's memory and re-initialises it. */
void json_buf_free(struct json_buf *b);
/* Empties the buffer for reuse, keeping its memory. */
void json_buf_reset(struct json_buf *b);
/* Returns the text so far ("" if nothing was written); valid until the next write. */
const char *json_buf_str(const struct json_buf *b);
/* Returns TB_OK if every write succeeded and all containers are closed, else the first error. */
int json_buf_status(const struct json_buf *b);

/* Opens an object as the next value (top level or array element). */
void json_begin_object(struct json_buf *b);
/* Closes the innermost object. */
void json_end_object(struct json_buf *b);
/* Opens an array as the next value. */
void json_begin_array(struct json_buf *b);
/* Closes the innermost array. */
void json_end_array(struct json_buf *b);

/* Writes a member key inside an object; the next call writes its value. */
void json_key(struct json_buf *b, const char *key);
/* Writes a string value (escaped; invalid UTF-8 bytes become U+FFFD). NULL writes null. */
void json_str(struct json_buf *b, const char *s);
/* Writes an integer value. */
void json_int(struct json_buf *b, long long v);
/* Writes a double with the shortest text that reads back exactly; NaN/Inf become null. */
void json_double(struct json_buf *b, double v);
/* Writes true or false. */
void json_bool(struct json_buf *b, int v);
/* Writes null. */
void json_null(struct json_buf *b);
/* Writes pre-formatted JSON text as one value; invalid text sets TB_EINVAL instead. */
void json_raw(struct json_buf *b, const char *text);

/* Key + value shorthands for object members. */
void json_key_str(struct json_buf *b, const char *key, const char *s);
void json_key_int(struct json_buf *b, const char *key, long long v);
void json_key_double(struct json_buf *b, const char *key, double v);
void json_key_bool(struct json_buf *b, const char *key, int v);
void json_key_null(struct json_buf *b, const char *key);
void json_key_raw(struct json_buf *b, const char *key, const char *text);
/* Writes a key and opens an object as its value (close with json_end_object). */
void json_key_object(struct json_buf *b, const char *key);
/* Writes a key and opens an array as its value (close with json_end_array). */
void json_key_array(struct json_buf *b, const char *key);

/* Formats v as the shortest decimal that strtod reads back exactly ("null" if not finite). */
void json_format_double(double v, char *out, size_t out_size);

/* ---- reader ---- */

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_value {
    enum json_type type;
    int boolean;               /* JSON_BOOL */
    double number;             /* JSON_NUMBER */
    char *str;                 /* JSON_STRING: NUL-terminated UTF-8 */
    int n;                     /* JSON_ARRAY / JSON_OBJECT: number of members */
    char **keys;               /* JSON_OBJECT: n keys, in input order */
    struct json_value *items;  /* JSON_ARRAY / JSON_OBJECT: n values */
};

/* Parses exactly one JSON value (surrounding whitespace allowed) from text[0..len) into *out.
 * Returns TB_OK, TB_EFORMAT (malformed; message names the byte offset) or TB_ENOMEM. */
int json_parse(const char *text, size_t len, struct json_value **out);
/* Frees a DOM returned by json_parse (NULL is fine). */
void json_value_free(struct json_value *v);

/* Returns the value at a dotted path ("config.backend"; digits index arrays), or NULL. */
const struct json_value *json_get(const struct json_value *root, const char *path);
/* Returns the string at path, or fallback if missing or not a string. */
const char *json_get_str(const struct json_value *root, const char *path, const char *fallback);
/* Returns the number at path, or fallback if missing or not a number (null included). */
double json_get_number(const struct json_value *root, const char *path, double fallback);
/* Returns the bool at path (0/1), or fallback if missing or not a bool. */
int json_get_bool(const struct json_value *root, const char *path, int fallback);

/* Writes a DOM value (any type, recursively) as the next value of b. */
void json_write_value(struct json_buf *b, const struct json_value *v);
/* Deep-copies v into *out (free with json_value_free): a row kept past the reader's callback. */
int json_value_copy(const struct json_value *v, struct json_value **out);

#endif
