/* test_ckpt_meta.h — makes a resumable checkpoint look like an older build's: a word of its configuration
 * text ("config" in the safetensors header's metadata) rewritten or removed in place, and "config_hash" recomputed
 * as harness/resume.c computes it (FNV-1a, 16 hex digits), so the file is one an older bench wrote.
 *
 * The header keeps its length and every tensor its offset: a shorter text is padded with spaces after its
 * closing quote (JSON whitespace). Static functions only; failures fail the calling test.
 */
#ifndef TB_TEST_CKPT_META_H
#define TB_TEST_CKPT_META_H

#include "test_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* In checkpoint ck's configuration text, replaces from (which must occur once) by to (no longer than from). */
static __attribute__((unused)) void ckpt_rewrite_config(const char *ck, const char *from, const char *to)
{
    const size_t lf = strlen(from), lt = strlen(to);
    cr_assert_leq(lt, lf);
    FILE *f = fopen(ck, "r+b");
    cr_assert_not_null(f, "cannot open %s", ck);
    unsigned char len8[8];
    cr_assert_eq(fread(len8, 1, 8, f), 8);
    size_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    cr_assert(hlen > 0 && hlen < (1u << 20), "%s: header length %zu", ck, hlen);
    char *h = malloc(hlen + 1), *out = malloc(hlen + 1);
    cr_assert(h && out);
    cr_assert_eq(fread(h, 1, hlen, f), hlen);
    h[hlen] = '\0';
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
    memset(out + k, ' ', lf - lt), k += lf - lt;
    memcpy(out + k, end + 1, hlen - (size_t)(end + 1 - h)), k += hlen - (size_t)(end + 1 - h);
    cr_assert_eq(k, hlen);
    out[hlen] = '\0';
    uint64_t hash = 1469598103934665603ull;
    for (const char *p = out + (cfg - h); p < out + text_end; p++) hash = (hash ^ (unsigned char)*p) * 1099511628211ull;
    char *hv = strstr(out, "\"config_hash\":\"");
    cr_assert_not_null(hv, "%s: no config_hash", ck);
    hv += strlen("\"config_hash\":\"");
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    cr_assert_eq(hv[16], '"');
    memcpy(hv, hex, 16);
    cr_assert_eq(fseek(f, 8, SEEK_SET), 0);
    cr_assert_eq(fwrite(out, 1, hlen, f), hlen);
    cr_assert_eq(fclose(f), 0);
    free(h), free(out);
}

#endif
