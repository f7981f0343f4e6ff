/* machine.c — gathers machine and build facts for result rows (see machine.h).
 *
 * Every reader falls back to "unknown" rather than failing: a row with one unknown fact is still
 * worth keeping, a benchmark that refuses to run because /proc is missing is not.
 */
#include "machine.h"

#include "blas_buffers.h"
#include "blas_core.h"
#include "build_info.h"
#include "executor.h"
#include "layout.h"
#include "status.h"
#include "tpool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* Declared here rather than via cblas.h: Debian ships several cblas.h variants and we only need this
 * OpenBLAS extension (and blas_core.h's openblas_get_corename). */
char *openblas_get_config(void);

/* Bounded copy that truncates silently: a long CPU or OS name is cut, never an error. */
static void copy_str(char *dst, size_t size, const char *src)
{
    if (!src || !*src)
        src = "unknown";
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Bounded append, truncating like copy_str. */
static void append_str(char *dst, size_t size, const char *src)
{
    size_t used = strlen(dst);
    if (used + 1 < size)
        copy_str(dst + used, size - used, src);
}

static void strip(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    size_t k = 0;
    while (s[k] == ' ' || s[k] == '\t')
        k++;
    if (k)
        memmove(s, s + k, n - k + 1);
}

/* Finds the first line "key<spaces/tabs>:<value>" in a /proc-style file and copies the value. */
static int read_proc_field(const char *path, const char *key, char *out, size_t out_size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    size_t klen = strlen(key);
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0)
            continue;
        const char *p = line + klen;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':')
            continue;
        copy_str(out, out_size, p + 1);
        strip(out);
        found = 1;
        break;
    }
    fclose(f);
    return found;
}

static void read_cpu_model(struct machine_info *m)
{
    char v[256];
    /* x86 says "model name"; some Arm kernels give only "Hardware" or "CPU part". */
    if (read_proc_field("/proc/cpuinfo", "model name", v, sizeof v) ||
        read_proc_field("/proc/cpuinfo", "Hardware", v, sizeof v))
        copy_str(m->cpu_model, sizeof m->cpu_model, v);
    else
        copy_str(m->cpu_model, sizeof m->cpu_model, NULL);
}

static void read_memory(struct machine_info *m)
{
    char v[128];
    m->mem_gib = 0.0;
    if (read_proc_field("/proc/meminfo", "MemTotal", v, sizeof v))
        m->mem_gib = round(strtod(v, NULL) / (1024.0 * 1024.0) * 100.0) / 100.0; /* kB -> GiB, 0.01 */
}

static void read_os(struct machine_info *m)
{
    struct utsname u;
    char pretty[128] = "";
    if (uname(&u) != 0) {
        copy_str(m->os, sizeof m->os, NULL);
        copy_str(m->hostname, sizeof m->hostname, NULL);
        return;
    }
    copy_str(m->hostname, sizeof m->hostname, u.nodename);
    FILE *f = fopen("/etc/os-release", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "PRETTY_NAME=", 12) != 0)
                continue;
            char *v = line + 12;
            strip(v);
            size_t n = strlen(v);
            if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
                v[n - 1] = '\0';
                v++;
            }
            copy_str(pretty, sizeof pretty, v);
            break;
        }
        fclose(f);
    }
    copy_str(m->os, sizeof m->os, u.sysname);
    append_str(m->os, sizeof m->os, " ");
    append_str(m->os, sizeof m->os, u.release);
    append_str(m->os, sizeof m->os, " ");
    append_str(m->os, sizeof m->os, u.machine);
    if (pretty[0]) {
        append_str(m->os, sizeof m->os, " (");
        append_str(m->os, sizeof m->os, pretty);
        append_str(m->os, sizeof m->os, ")");
    }
}

static void read_blas(struct machine_info *m)
{
    char v[128];
    copy_str(v, sizeof v, openblas_get_config());
    strip(v);
    copy_str(m->blas, sizeof m->blas, v);
    copy_str(v, sizeof v, openblas_get_corename());
    strip(v);
    copy_str(m->blas_core, sizeof m->blas_core, v);
    copy_str(m->blas_buffers, sizeof m->blas_buffers, blas_buffers_mode());
}

static void read_timestamp(struct machine_info *m)
{
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) && strftime(m->timestamp, sizeof m->timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm))
        return;
    copy_str(m->timestamp, sizeof m->timestamp, NULL);
}

int machine_info_read(struct machine_info *m)
{
    memset(m, 0, sizeof *m);
    read_cpu_model(m);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    m->n_cores = n > 0 ? (int)n : 0;
    m->usable_cores = tpool_cpus();
    read_memory(m);
    read_os(m);
    copy_str(m->compiler, sizeof m->compiler, TB_COMPILER);
    copy_str(m->cflags, sizeof m->cflags, TB_CFLAGS);
    strip(m->cflags);
    read_blas(m);
    /* The configure-time commit goes stale when the tree changes without re-running CMake, so a
     * caller (CI, a wrapper script) may override it. */
    const char *env_commit = getenv("TB_GIT_COMMIT");
    copy_str(m->commit, sizeof m->commit, env_commit && *env_commit ? env_commit : TB_GIT_COMMIT);
    read_timestamp(m);
    m->nt_store_kib = (long)(tb_stream_bytes() >> 10);
    return TB_OK;
}

int machine_gpu_read(struct machine_info *m, const char *device)
{
    m->have_gpu = device && strcmp(device, "cpu") && executor_device_info(device, &m->gpu) == TB_OK;
    if (!m->have_gpu) memset(&m->gpu, 0, sizeof m->gpu);
    tb_error_clear();
    return TB_OK;
}

void machine_info_write_json(const struct machine_info *m, struct json_buf *b)
{
    json_key_str(b, "timestamp", m->timestamp);
    json_key_object(b, "machine");
    json_key_str(b, "cpu_model", m->cpu_model);
    json_key_int(b, "n_cores", m->n_cores);
    /* Beside the machine's: under taskset or a cpuset the same command runs on fewer cores, and the row said 2. */
    json_key_int(b, "usable_cores", m->usable_cores);
    json_key_double(b, "mem_gib", m->mem_gib);
    json_key_str(b, "hostname", m->hostname);
    json_key_str(b, "os", m->os);
    json_key_int(b, "nt_store_from_kib", m->nt_store_kib);
    if (m->have_gpu) {
        json_key_object(b, "gpu");
        json_key_str(b, "name", m->gpu.name);
        json_key_str(b, "driver_version", m->gpu.driver_version);
        json_key_str(b, "driver_cuda_version", m->gpu.driver_cuda);
        json_key_str(b, "runtime_version", m->gpu.runtime_version);
        json_key_str(b, "compute_capability", m->gpu.capability);
        json_key_double(b, "mem_gib", round(m->gpu.mem_gib * 100.0) / 100.0);
        json_key_int(b, "multiprocessors", m->gpu.multiprocessors);
        json_end_object(b);
    }
    json_end_object(b);

    json_key_object(b, "build");
    json_key_str(b, "version", TB_VERSION);
    json_key_str(b, "build_type", TB_BUILD_TYPE);
    json_key_str(b, "compiler", m->compiler);
    json_key_str(b, "cflags", m->cflags);
    json_key_str(b, "blas", m->blas);
    json_key_str(b, "blas_core", m->blas_core);
    json_key_str(b, "blas_buffers", m->blas_buffers);
    json_key_str(b, "commit", m->commit);
    json_end_object(b);
}
