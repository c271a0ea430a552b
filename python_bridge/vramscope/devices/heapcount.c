/* vramscope's CPU heap counter (issues 19 and 21): the bytes malloc has handed out, counted at
   every allocation and free, so a reading is one load instead of glibc mallinfo2's walk of
   every free chunk (~20 ms on the heap a 10,000-module model leaves), and a cell's peak is
   the count's high-water mark instead of a sample.

   How: in every shared object loaded into the process (the Python executable, libpython,
   libtorch, numpy, ...; not libc, the dynamic loader or this library) the GOT entries of
   glibc's allocator entry points (malloc, free, realloc, posix_memalign, ...) are pointed at
   the wrappers below. Each wrapper calls glibc's own function and then adds or subtracts
   the block's chunk size (what mallinfo2 counts). Nothing else changes: the same blocks come back, the same
   errors, and the library's own lookups; the count is process-wide, like mallinfo2.

   Objects loaded later (an ``import`` of an extension module) are patched when vs_rescan sees
   that the loader's count of loaded objects moved (one dl_iterate_phdr callback otherwise);
   what they allocated before that is not counted, so the caller resynchronises its offset
   with one mallinfo2 reading when vs_rescan reports new objects. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define VS_JUMP_SLOT R_X86_64_JUMP_SLOT
#define VS_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define VS_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define VS_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "vramscope heapcount: x86_64 and aarch64 only"
#endif

#if UINTPTR_MAX == 0xffffffffffffffffULL
#define VS_R_SYM ELF64_R_SYM
#define VS_R_TYPE ELF64_R_TYPE
#else
#error "vramscope heapcount: 64-bit only"
#endif

static long long cur, peak;

/* A block's chunk size, as mallinfo2 counts it: glibc's size word just before the block,
   without its three flag bits (what malloc_usable_size reads, and its header included). */
static inline long long chunk(void *p) {
    return (long long)(((size_t *)p)[-1] & ~(size_t)7);
}

static inline void up(void *p) {
    if (!p) return;
    long long c = __atomic_add_fetch(&cur, chunk(p), __ATOMIC_RELAXED);
    long long k = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    while (c > k && !__atomic_compare_exchange_n(&peak, &k, c, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static inline void down(void *p) {
    if (p) __atomic_sub_fetch(&cur, chunk(p), __ATOMIC_RELAXED);
}

/* The wrappers: glibc's function first, then the count; errno is left as glibc set it. */
static void *vs_malloc(size_t n) {
    void *p = malloc(n);
    up(p);
    return p;
}
static void *vs_calloc(size_t a, size_t b) {
    void *p = calloc(a, b);
    up(p);
    return p;
}
static void vs_free(void *p) {
    down(p);
    free(p);
}
static void *vs_realloc(void *old, size_t n) {
    long long was = old ? chunk(old) : 0;
    void *p = realloc(old, n);
    if (p || (old && n == 0)) { /* moved, grown, shrunk, or freed by realloc(p, 0) */
        if (was) __atomic_sub_fetch(&cur, was, __ATOMIC_RELAXED);
        up(p);
    }
    return p;
}
static void *vs_reallocarray(void *old, size_t a, size_t b) {
    long long was = old ? chunk(old) : 0;
    void *p = reallocarray(old, a, b);
    if (p) {
        if (was) __atomic_sub_fetch(&cur, was, __ATOMIC_RELAXED);
        up(p);
    }
    return p;
}
static int vs_posix_memalign(void **out, size_t al, size_t n) {
    int rc = posix_memalign(out, al, n);
    if (rc == 0) up(*out);
    return rc;
}
static void *vs_aligned_alloc(size_t al, size_t n) {
    void *p = aligned_alloc(al, n);
    up(p);
    return p;
}
static void *vs_memalign(size_t al, size_t n) {
    void *p = memalign(al, n);
    up(p);
    return p;
}
static void *vs_valloc(size_t n) {
    void *p = valloc(n);
    up(p);
    return p;
}
static void *vs_pvalloc(size_t n) {
    void *p = pvalloc(n);
    up(p);
    return p;
}

struct hook {
    const char *name;
    void *fn;
};
static const struct hook HOOKS[] = {
    {"malloc", (void *)vs_malloc},
    {"calloc", (void *)vs_calloc},
    {"free", (void *)vs_free},
    {"realloc", (void *)vs_realloc},
    {"reallocarray", (void *)vs_reallocarray},
    {"posix_memalign", (void *)vs_posix_memalign},
    {"aligned_alloc", (void *)vs_aligned_alloc},
    {"memalign", (void *)vs_memalign},
    {"valloc", (void *)vs_valloc},
    {"pvalloc", (void *)vs_pvalloc},
};
#define N_HOOKS (sizeof(HOOKS) / sizeof(HOOKS[0]))

static const struct hook *find_hook(const char *name) {
    switch (name[0]) { /* most GOT entries are none of ours: one compare rules them out */
    case 'm': case 'c': case 'f': case 'r': case 'p': case 'a': case 'v':
        break;
    default:
        return NULL;
    }
    for (size_t i = 0; i < N_HOOKS; i++)
        if (strcmp(name, HOOKS[i].name) == 0) return &HOOKS[i];
    return NULL;
}

/* --- patching ------------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *seen; /* load addresses (with their program headers) already patched */
static const void **seen_phdr;
static size_t n_seen, cap_seen;
static unsigned long long last_adds = ~0ULL, last_subs = ~0ULL;
static uintptr_t self_base;
static long page_size;
static int n_slots; /* GOT entries pointed at a wrapper, all objects (see ``patched``) */
static int n_new;   /* objects patched by the current scan */

static int already_seen(uintptr_t base, const void *phdr) {
    for (size_t i = 0; i < n_seen; i++)
        if (seen[i] == base && seen_phdr[i] == phdr) return 1;
    return 0;
}

static void remember(uintptr_t base, const void *phdr) {
    if (n_seen == cap_seen) {
        size_t cap = cap_seen ? cap_seen * 2 : 256;
        uintptr_t *s = realloc(seen, cap * sizeof(*s));
        if (!s) return;
        seen = s;
        const void **p = realloc(seen_phdr, cap * sizeof(*p));
        if (!p) return;
        seen_phdr = p;
        cap_seen = cap;
    }
    seen[n_seen] = base;
    seen_phdr[n_seen] = phdr;
    n_seen++;
}

/* A dynamic-section address: already relocated by the loader (x86_64, aarch64), except where
   the section is read-only (the vDSO), where it is relative to the load address. */
static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) ptr) {
    return ptr < base ? base + ptr : ptr;
}

/* Every entry pointed at a wrapper, with what it held before (vs_unpatch puts that back). */
struct patched {
    void **slot;
    void *was, *fn;
    int relro;
};
static struct patched *patched;
static size_t cap_patched;

static int store(void **slot, void *value, int relro) {
    if (!relro) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return 1;
    }
    /* made read-only by the loader after relocation: writable for this one store */
    uintptr_t pg = (uintptr_t)slot & ~(uintptr_t)(page_size - 1);
    if (mprotect((void *)pg, (size_t)page_size, PROT_READ | PROT_WRITE) != 0) return 0;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    mprotect((void *)pg, (size_t)page_size, PROT_READ);
    return 1;
}

static void set_slot(void **slot, void *fn, uintptr_t relro_lo, uintptr_t relro_hi) {
    void *was = *slot;
    if (was == fn) return;
    if ((size_t)n_slots == cap_patched) {
        size_t cap = cap_patched ? cap_patched * 2 : 256;
        struct patched *p = realloc(patched, cap * sizeof(*p));
        if (!p) return; /* not patched: what cannot be put back is not changed */
        patched = p;
        cap_patched = cap;
    }
    int relro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
    if (!store(slot, fn, relro)) return;
    patched[n_slots++] = (struct patched){slot, was, fn, relro};
}

static void patch_relocs(uintptr_t base, const ElfW(Rela) *rel, size_t count, const ElfW(Sym) *symtab,
                         const char *strtab, uintptr_t relro_lo, uintptr_t relro_hi, int own) {
    for (size_t i = 0; i < count; i++) {
        unsigned long type = VS_R_TYPE(rel[i].r_info);
        if (type != VS_JUMP_SLOT && type != VS_GLOB_DAT) continue;
        const ElfW(Sym) *sym = &symtab[VS_R_SYM(rel[i].r_info)];
        if (sym->st_name == 0 || (sym->st_shndx != SHN_UNDEF && !own)) continue; /* its own malloc */
        const struct hook *h = find_hook(strtab + sym->st_name);
        if (h) set_slot((void **)(base + rel[i].r_offset), h->fn, relro_lo, relro_hi);
    }
}

static const char *file_name(const char *name) {
    const char *slash = name ? strrchr(name, '/') : NULL;
    return slash ? slash + 1 : (name ? name : "");
}

static int skip_object(const char *name) {
    const char *file = file_name(name);
    return strncmp(file, "ld-linux", 8) == 0 || strncmp(file, "ld-musl", 7) == 0 ||
           strncmp(file, "linux-vdso", 10) == 0 || strncmp(file, "linux-gate", 10) == 0;
}

/* libc calls its own malloc and free through its GOT (so that an interposed malloc sees them:
   strdup, stdio buffers, thread-local destructors); those entries name symbols it defines. */
static int is_libc(const char *name) { return strncmp(file_name(name), "libc.so", 7) == 0; }

static void patch_object(struct dl_phdr_info *info) {
    int own = is_libc(info->dlpi_name);
    uintptr_t base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t relro_lo = 0, relro_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) { /* as the loader protects it: whole pages only */
            uintptr_t mask = ~(uintptr_t)(page_size - 1);
            relro_lo = (base + ph->p_vaddr) & mask;
            relro_hi = (base + ph->p_vaddr + ph->p_memsz) & mask;
        }
    }
    if (!dyn) return;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t pltrelsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela));
    long pltrel = DT_RELA;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_addr(base, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_addr(base, d->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_addr(base, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_PLTREL: pltrel = (long)d->d_un.d_val; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_addr(base, d->d_un.d_ptr); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_RELAENT: relaent = d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab || relaent != sizeof(ElfW(Rela))) return;
    if (jmprel && pltrel == DT_RELA)
        patch_relocs(base, jmprel, pltrelsz / sizeof(ElfW(Rela)), symtab, strtab, relro_lo, relro_hi, own);
    if (rela) patch_relocs(base, rela, relasz / sizeof(ElfW(Rela)), symtab, strtab, relro_lo, relro_hi, own);
}

static int scan_cb(struct dl_phdr_info *info, size_t size, void *data) {
    int *first = (int *)data;
    if (*first) { /* the loader's counters are the same in every callback of one walk */
        *first = 0;
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
            if (info->dlpi_adds == last_adds && info->dlpi_subs == last_subs) return 1; /* nothing new */
            if (info->dlpi_subs != last_subs) n_seen = 0; /* something unloaded: addresses may be reused */
            last_adds = info->dlpi_adds;
            last_subs = info->dlpi_subs;
        }
    }
    if (info->dlpi_addr == self_base && self_base) return 0;
    if (skip_object(info->dlpi_name) || already_seen(info->dlpi_addr, info->dlpi_phdr)) return 0;
    patch_object(info);
    remember(info->dlpi_addr, info->dlpi_phdr);
    n_new++;
    return 0;
}

/* Patch every object loaded since the last call; returns how many were new (0: none, the
   usual case, one callback). */
int vs_rescan(void) {
    pthread_mutex_lock(&lock);
    if (!page_size) {
        page_size = sysconf(_SC_PAGESIZE);
        Dl_info me;
        if (dladdr((void *)vs_malloc, &me)) self_base = (uintptr_t)me.dli_fbase;
    }
    int first = 1;
    n_new = 0;
    dl_iterate_phdr(scan_cb, &first);
    int n = n_new;
    pthread_mutex_unlock(&lock);
    return n;
}

/* --- readings ------------------------------------------------------------------------- */

long long vs_current(void) { return __atomic_load_n(&cur, __ATOMIC_RELAXED); }
long long vs_peak(void) { return __atomic_load_n(&peak, __ATOMIC_RELAXED); }
/* Start a high-water mark at the count now; returns the count. */
long long vs_mark(void) {
    long long c = __atomic_load_n(&cur, __ATOMIC_RELAXED);
    __atomic_store_n(&peak, c, __ATOMIC_RELAXED);
    return c;
}
int vs_slots(void) { return n_slots; }

/* Put every patched entry back as it was (an entry of an object unloaded since, or one that
   someone else changed since, is left); the next vs_rescan patches every object again.
   Returns how many were put back. */
int vs_unpatch(void) {
    pthread_mutex_lock(&lock);
    int restored = 0;
    Dl_info owner;
    for (int i = 0; i < n_slots; i++)
        if (dladdr((void *)patched[i].slot, &owner) && *patched[i].slot == patched[i].fn)
            restored += store(patched[i].slot, patched[i].was, patched[i].relro);
    n_slots = 0;
    n_seen = 0;
    last_adds = last_subs = ~0ULL;
    pthread_mutex_unlock(&lock);
    return restored;
}
