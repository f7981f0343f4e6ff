/* blas_buffers.c — OpenBLAS's packing buffers, one set per thread (blas_buffers.h says why).
 *
 * OpenBLAS's interface functions (cblas_sgemm and the other level-3 calls) take one buffer of BUFFER_SIZE
 * + a page with blas_memory_alloc, pack their panels into it, and give it back with blas_memory_free. Its
 * own allocator (driver/others/memory.c, built without USE_TLS) scans one process-wide table under one
 * pthread mutex for both, and hands a thread whichever slot is free first, so a thread's panels land in
 * memory another core wrote last. Upstream reports the same queue (OpenBLAS issues 478, 2575, 5589).
 *
 * Here each thread keeps up to BB_SLOTS buffers of its own (more than one only for nested level-3 calls),
 * mapped and first touched by itself and reused by it call after call; taking and giving one back is a flag
 * in the thread's own set. A buffer carries a header in the page before the address OpenBLAS gets, so a
 * free from any thread finds its slot; the set is unmapped when its thread exits. The buffer's size is the
 * library's own: blas_memory_alloc_nolock mallocs exactly BUFFER_SIZE + a page, and malloc_usable_size of
 * that is at least it, so an OpenBLAS built with another BUFFER_SIZE still gets whole buffers. Without that
 * probe, or with TB_BLAS_BUFFERS=shared, every call goes on to OpenBLAS's own allocator (dlsym RTLD_NEXT). */
#define _GNU_SOURCE
#include "blas_buffers.h"

#include <cblas.h>
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* OpenBLAS's own names, called through its PLT: defined here, they serve the process. */
void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

enum { BB_UNSET, BB_PER_THREAD, BB_SHARED };
#define BB_SLOTS 4 /* a thread's buffers held at once: one a call, nested calls (LAPACK over GEMM) more */
#define BB_HEADER 4096 /* the page before the buffer: keeps the page alignment OpenBLAS's mmap gives */
#define BB_MAGIC 0x7462627566667273ull

struct bb_slot {
    char *map; /* header page + buffer; NULL until first taken */
    atomic_int used;
};

struct bb_set {
    struct bb_slot slot[BB_SLOTS];
};

struct bb_header {
    uint64_t magic;
    struct bb_slot *slot; /* NULL: a loose mapping (all slots taken, or its thread gone), unmapped on free */
};

static atomic_int bb_mode;
static size_t bb_bytes; /* a buffer's usable bytes: at least OpenBLAS's BUFFER_SIZE + a page */
static void *(*bb_next_alloc)(int);
static void (*bb_next_free)(void *);
static pthread_once_t bb_once = PTHREAD_ONCE_INIT;
static int bb_env_shared = -1; /* TB_BLAS_BUFFERS=shared: read by bb_read_env before any thread runs; −1 unread */
static pthread_key_t bb_key;
static _Thread_local struct bb_set *bb_tls;
static _Thread_local long bb_calls;

static void bb_set_release(void *p)
{
    struct bb_set *set = p;
    int outstanding = 0;
    for (int k = 0; k < BB_SLOTS; k++) {
        struct bb_slot *s = &set->slot[k];
        if (!s->map) continue;
        if (atomic_load(&s->used)) {
            /* Still held as its thread exits (OpenBLAS never does this): its free unmaps it. */
            ((struct bb_header *)s->map)->slot = NULL;
            outstanding = 1;
        } else {
            munmap(s->map, BB_HEADER + bb_bytes);
        }
    }
    if (!outstanding) free(set);
}

/* The variable is read before any library's constructor: OpenBLAS's starts its server threads, which ask for a
 * buffer at once, while bench's main thread may be changing the environment to re-execute itself (blas_core.c);
 * a getenv from that thread then read an environment being rewritten (a segfault, 1 run in ~100). An
 * executable's .preinit_array runs first, with the process's one thread, and gets the environment. */
static void bb_read_env(int argc, char **argv, char **envp)
{
    (void)argc, (void)argv;
    bb_env_shared = 0;
    for (char **e = envp; e && *e; e++)
        if (strcmp(*e, "TB_BLAS_BUFFERS=shared") == 0) bb_env_shared = 1;
}
__attribute__((section(".preinit_array"), used)) static void (*const bb_preinit)(int, char **, char **) = bb_read_env;

/* OpenBLAS's own allocator retries a failed allocation forever (driver/others/memory.c loops until one succeeds): a
 * process under a memory limit it could not meet (ulimit -v) spun there, deaf to SIGTERM, which bench answers after
 * the current step. No status can be returned through OpenBLAS's call: said in one line, and the process ends
 * (exit 1, as a run that failed). */
static void bb_out_of_memory(const char *what, size_t bytes)
{
    char size[48] = "";
    if (bytes) snprintf(size, sizeof size, " (%.0f MiB)", (double)bytes / (1 << 20));
    fprintf(stderr, "bench: out of memory: %s%s could not be allocated (a memory limit such as ulimit -v too low?)\n",
            what, size);
    _exit(1);
}

static void bb_init(void)
{
    /* The definitions after ours in lookup order: OpenBLAS's own. */
    bb_next_alloc = (void *(*)(int))dlsym(RTLD_NEXT, "blas_memory_alloc");
    bb_next_free = (void (*)(void *))dlsym(RTLD_NEXT, "blas_memory_free");
    void *(*probe_alloc)(int) = (void *(*)(int))dlsym(RTLD_DEFAULT, "blas_memory_alloc_nolock");
    void (*probe_free)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "blas_memory_free_nolock");
    int shared = bb_env_shared;
    if (shared < 0) { /* not run from an executable's preinit (a library's copy): the variable now */
        const char *env = getenv("TB_BLAS_BUFFERS");
        shared = env && strcmp(env, "shared") == 0;
    }
    int mode = BB_SHARED;
    if (probe_alloc && probe_free) {
        /* The probe is one buffer, malloc'd: where even that fails, OpenBLAS's own allocator would spin. */
        void *probe = probe_alloc(0);
        if (!probe) bb_out_of_memory("OpenBLAS's packing buffer", 0);
        bb_bytes = malloc_usable_size(probe);
        probe_free(probe);
        if (!shared && bb_bytes && pthread_key_create(&bb_key, bb_set_release) == 0) mode = BB_PER_THREAD;
    }
    if (mode == BB_SHARED && (!bb_next_alloc || !bb_next_free)) {
        fprintf(stderr, "trainbench: OpenBLAS asked for a buffer, but neither its allocator nor its size was found\n");
        abort();
    }
    atomic_store(&bb_mode, mode);
}

static char *bb_map(struct bb_slot *slot)
{
    size_t bytes = BB_HEADER + bb_bytes;
    /* NORESERVE: OpenBLAS's R blocking spans BUFFER_SIZE, but a call touches only the panels it packs. */
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) bb_out_of_memory("an OpenBLAS packing buffer", bytes);
    struct bb_header *h = m;
    h->magic = BB_MAGIC;
    h->slot = slot;
    return m;
}

void *blas_memory_alloc(int procpos)
{
    pthread_once(&bb_once, bb_init);
    bb_calls++;
    if (atomic_load_explicit(&bb_mode, memory_order_relaxed) != BB_PER_THREAD) return bb_next_alloc(procpos);
    struct bb_set *set = bb_tls;
    if (!set && (set = calloc(1, sizeof *set)) != NULL) {
        bb_tls = set;
        pthread_setspecific(bb_key, set);
    }
    for (int k = 0; set && k < BB_SLOTS; k++) {
        struct bb_slot *s = &set->slot[k];
        if (atomic_load_explicit(&s->used, memory_order_acquire)) continue;
        if (!s->map) s->map = bb_map(s);
        atomic_store_explicit(&s->used, 1, memory_order_relaxed);
        return s->map + BB_HEADER;
    }
    return bb_map(NULL) + BB_HEADER;
}

void blas_memory_free(void *buffer)
{
    pthread_once(&bb_once, bb_init);
    if (atomic_load_explicit(&bb_mode, memory_order_relaxed) != BB_PER_THREAD) {
        bb_next_free(buffer);
        return;
    }
    if (!buffer) return;
    struct bb_header *h = (struct bb_header *)((char *)buffer - BB_HEADER);
    if (h->magic != BB_MAGIC) {
        fprintf(stderr, "trainbench: OpenBLAS freed a buffer this allocator did not give\n");
        abort();
    }
    if (h->slot)
        atomic_store_explicit(&h->slot->used, 0, memory_order_release);
    else
        munmap(h, BB_HEADER + bb_bytes);
}

static const char *bb_seen;
static pthread_once_t bb_seen_once = PTHREAD_ONCE_INIT;

/* Whether OpenBLAS calls these definitions, seen rather than assumed: the executable must export them, and a
 * library that binds its own calls internally (-Bsymbolic, hidden visibility) would never come here. One sgemm
 * past the small-matrix path (m·n·k > 100³), and this thread's count before and after. */
static void bb_look(void)
{
    enum { S = 160 };
    float *a = calloc(3 * (size_t)S * S, sizeof *a);
    if (!a) {
        bb_seen = "unknown";
        return;
    }
    long before = bb_calls;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, S, S, 1.0f, a, S, a + S * S, S, 0.0f, a + 2 * S * S, S);
    free(a);
    if (bb_calls == before)
        bb_seen = "not interposed";
    else
        bb_seen = atomic_load(&bb_mode) == BB_PER_THREAD ? "per-thread" : "shared";
}

const char *blas_buffers_mode(void)
{
    pthread_once(&bb_seen_once, bb_look);
    return bb_seen;
}

long blas_buffers_thread_calls(void)
{
    return bb_calls;
}
