/* An independent CPU memory counter for the exact-peak tests and bench (issue 21): loaded with
   LD_PRELOAD, it wraps glibc's allocator entry points and counts the in-use bytes of every
   block, with their high-water mark, at every malloc and free: a peak inside an op is seen,
   which a reading after each op misses. A block counts as its chunk (malloc_usable_size and
   glibc's header: 8 bytes, 16 for an mmapped block), the heap it takes and the figure
   mallinfo2 counts; malloc_usable_size alone reads 8 bytes a block less (~3 MiB of the ~380k
   blocks `import torch` leaves). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stddef.h>
#include <unistd.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static long long cur, peak;

/* the block's chunk: what it can hold, and glibc's header (its size word; an mmapped
   chunk's prev_size too, the IS_MMAPPED flag bit 2 of that word saying which) */
static long long held(void *p) {
    size_t mmapped = ((size_t *)p)[-1] & 2;
    return (long long)(malloc_usable_size(p) + sizeof(size_t) * (mmapped ? 2 : 1));
}

static void up(void *p) {
    if (!p) return;
    long long c = __atomic_add_fetch(&cur, held(p), __ATOMIC_RELAXED);
    long long k = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    while (c > k && !__atomic_compare_exchange_n(&peak, &k, c, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
static void down(void *p) {
    if (p) __atomic_sub_fetch(&cur, held(p), __ATOMIC_RELAXED);
}

long long mallocpeak_current(void) { return __atomic_load_n(&cur, __ATOMIC_RELAXED); }
long long mallocpeak_peak(void) { return __atomic_load_n(&peak, __ATOMIC_RELAXED); }
void mallocpeak_reset(void) { __atomic_store_n(&peak, __atomic_load_n(&cur, __ATOMIC_RELAXED), __ATOMIC_RELAXED); }

void *malloc(size_t n) { void *p = __libc_malloc(n); up(p); return p; }
void *calloc(size_t a, size_t b) { void *p = __libc_calloc(a, b); up(p); return p; }
void free(void *p) { down(p); __libc_free(p); }
void *realloc(void *old, size_t n) {
    long long was = old ? held(old) : 0;
    void *p = __libc_realloc(old, n);
    if (p || n == 0) {
        if (old) __atomic_sub_fetch(&cur, was, __ATOMIC_RELAXED);
        up(p);
    }
    return p;
}
void *reallocarray(void *old, size_t a, size_t b) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) { errno = ENOMEM; return NULL; }
    return realloc(old, n);
}
void *memalign(size_t al, size_t n) { void *p = __libc_memalign(al, n); up(p); return p; }
void *aligned_alloc(size_t al, size_t n) { return memalign(al, n); }
void *valloc(size_t n) { return memalign((size_t)sysconf(_SC_PAGESIZE), n); }
void *pvalloc(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(page, (n + page - 1) & ~(page - 1));
}
int posix_memalign(void **out, size_t al, size_t n) {
    if (al % sizeof(void *) || (al & (al - 1))) return EINVAL;
    void *p = __libc_memalign(al, n);
    if (!p) return ENOMEM;
    up(p);
    *out = p;
    return 0;
}
