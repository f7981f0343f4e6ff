/* test_ckpt_meta.h — makes a resumable checkpoint look like an older build's: a word of its configuration
 * text ("config" in the safetensors header's metadata) rewritten or removed in place, and "config_hash" recomputed
 * as harness/resume.c computes it (FNV-1a, 16 hex digits), so the file is one an older bench wrote; another
 * metadata value set outright (a damaged field in an otherwise valid file); and the header's read and write-back in
 * place for other such edits.
 *
 * The header keeps its length and every tensor its offset: a shorter text is padded with spaces after its
 * closing quote (JSON whitespace); a longer one grows the header by a multiple of 8 bytes (the tensors' bytes stay
 * 8-byte aligned, moved after it; their offsets count from the header's end). Static functions only; failures fail
 * the calling test.
 */
#ifndef TB_TEST_CKPT_META_H
#define TB_TEST_CKPT_META_H

#include "test_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Checkpoint ck's safetensors header (malloc'd, NUL-ended, *hlen bytes without the NUL), with *f left open for
 * ckpt_header_write. */
static __attribute__((unused)) char *ckpt_header_read(const char *ck, FILE **f, size_t *hlen)
{
    *f = fopen(ck, "r+b");
    cr_assert_not_null(*f, "cannot open %s", ck);
    unsigned char len8[8];
    cr_assert_eq(fread(len8, 1, 8, *f), 8);
    size_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
    cr_assert(n > 0 && n < (1u << 20), "%s: header length %zu", ck, n);
    char *h = malloc(n + 1);
    cr_assert_not_null(h);
    cr_assert_eq(fread(h, 1, n, *f), n);
    h[n] = '\0';
    *hlen = n;
    return h;
}

/* Checkpoint ck's header (malloc'd), read only; its "data_crc32=XXXXXXXX" word into crc (n >= 20 bytes). */
static __attribute__((unused)) char *ckpt_header_crc(const char *ck, char *crc, size_t n)
{
    FILE *f;
    size_t hlen;
    char *h = ckpt_header_read(ck, &f, &hlen);
    fclose(f);
    const char *at = strstr(h, "data_crc32=");
    cr_assert(at && n >= 20, "%s: no data CRC in %s", ck, h);
    snprintf(crc, n, "%.19s", at);
    return h;
}

/* Writes a header of the same length back in place over ckpt_header_read's, and closes f. */
static __attribute__((unused)) void ckpt_header_write(FILE *f, const char *h, size_t hlen)
{
    cr_assert_eq(fseek(f, 8, SEEK_SET), 0);
    cr_assert_eq(fwrite(h, 1, hlen, f), hlen);
    cr_assert_eq(fclose(f), 0);
}

/* Puts header out (hlen + grow bytes, grow a multiple of 8) in place of the hlen bytes ckpt_header_read read through
 * f, moving the tensors' bytes after it when it grew, and closes f. */
static __attribute__((unused)) void ckpt_header_replace(FILE *f, size_t hlen, const char *out, size_t grow)
{
    if (!grow) {
        ckpt_header_write(f, out, hlen);
        return;
    }
    /* The tensors' bytes (the rest of the file), then the file again: the new length, header and those bytes. */
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    const long size = ftell(f);
    cr_assert(size >= (long)(8 + hlen));
    const size_t n_data = (size_t)size - 8 - hlen;
    unsigned char *data = malloc(n_data + 1), len8[8];
    cr_assert_not_null(data);
    cr_assert_eq(fseek(f, (long)(8 + hlen), SEEK_SET), 0);
    cr_assert_eq(fread(data, 1, n_data, f), n_data);
    const size_t nh = hlen + grow;
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)nh >> (8 * i));
    cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
    cr_assert_eq(fwrite(len8, 1, 8, f), 8);
    cr_assert_eq(fwrite(out, 1, nh, f), nh);
    cr_assert_eq(fwrite(data, 1, n_data, f), n_data);
    cr_assert_eq(fclose(f), 0);
    free(data);
}

/* In checkpoint ck's configuration text, replaces from (which must occur once) by to. */
static __attribute__((unused)) void ckpt_rewrite_config(const char *ck, const char *from, const char *to)
{
    const size_t lf = strlen(from), lt = strlen(to);
    const size_t grow = lt > lf ? (lt - lf + 7) / 8 * 8 : 0;
    FILE *f;
    size_t hlen;
    char *h = ckpt_header_read(ck, &f, &hlen), *out = malloc(hlen + grow + 1);
    cr_assert_not_null(out);
    char *cfg = strstr(h, "\"config\":\"");
    cr_assert_not_null(cfg, "%s: no config", ck);
    cfg += strlen("\"config\":\"");
    char *end = strchr(cfg, '"');
    cr_assert_not_null(end);
    char *at = strstr(cfg, from);
    cr_assert(at && at + lf <= end, "%s: '%s' is not in its config", ck, from);
    /* prefix, the text with the word replaced, the closing quote, the padding, the rest */
    size_t k = 0;
    memcpy(out + k, h, (size_t)(at - h)), k += (size_t)(at - h);
    memcpy(out + k, to, lt), k += lt;
    memcpy(out + k, at + lf, (size_t)(end - at - lf)), k += (size_t)(end - at - lf);
    const size_t text_end = k;
    out[k++] = '"';
    memset(out + k, ' ', lf + grow - lt), k += lf + grow - lt;
    memcpy(out + k, end + 1, hlen - (size_t)(end + 1 - h)), k += hlen - (size_t)(end + 1 - h);
    cr_assert_eq(k, hlen + grow);
    out[k] = '\0';
    uint64_t hash = 1469598103934665603ull;
    for (const char *p = out + (cfg - h); p < out + text_end; p++) hash = (hash ^ (unsigned char)*p) * 1099511628211ull;
    char *hv = strstr(out, "\"config_hash\":\"");
    cr_assert_not_null(hv, "%s: no config_hash", ck);
    hv += strlen("\"config_hash\":\"");
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    cr_assert_eq(hv[16], '"');
    memcpy(hv, hex, 16);
    ckpt_header_replace(f, hlen, out, grow);
    free(h), free(out);
}

/* In checkpoint ck's metadata, sets key's string value (which must be there) to value, written as it is (the caller
 * escapes what JSON needs escaped): a probe's damage to one field, the rest of the file still valid. */
static __attribute__((unused)) void ckpt_rewrite_meta(const char *ck, const char *key, const char *value)
{
    FILE *f;
    size_t hlen;
    char *h = ckpt_header_read(ck, &f, &hlen), pat[128];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    char *at = strstr(h, pat);
    cr_assert_not_null(at, "%s: no metadata '%s'", ck, key);
    at += strlen(pat);
    char *end = at;
    while (*end && *end != '"') end += *end == '\\' && end[1] ? 2 : 1;
    cr_assert_eq(*end, '"', "%s: '%s' does not end", ck, key);
    const size_t lf = (size_t)(end - at), lt = strlen(value);
    const size_t grow = lt > lf ? (lt - lf + 7) / 8 * 8 : 0;
    char *out = malloc(hlen + grow + 1);
    cr_assert_not_null(out);
    /* prefix, the value, the closing quote, the padding, the rest */
    size_t k = 0;
    memcpy(out + k, h, (size_t)(at - h)), k += (size_t)(at - h);
    memcpy(out + k, value, lt), k += lt;
    out[k++] = '"';
    memset(out + k, ' ', lf + grow - lt), k += lf + grow - lt;
    memcpy(out + k, end + 1, hlen - (size_t)(end + 1 - h)), k += hlen - (size_t)(end + 1 - h);
    cr_assert_eq(k, hlen + grow);
    out[k] = '\0';
    ckpt_header_replace(f, hlen, out, grow);
    free(h), free(out);
}

#endif
