/* vramscope's CPU heap counter (issues 19 and 21): the bytes malloc has handed out, counted at
   every allocation and free, so a reading is one load instead of glibc mallinfo2's walk of
   every free chunk (~20 ms on the heap a 10,000-module model leaves), and a cell's peak is
   the count's high-water mark instead of a sample.

   How: in every shared object loaded into the process (the Python executable, libpython,
   libtorch, numpy, ... and libc itself, which calls its own malloc and free through its GOT:
   strdup, stdio; not the dynamic loader, the vDSO or this library) the relocated entries of
   glibc's allocator functions (malloc, free, realloc, posix_memalign, ...) are pointed at the
   wrappers below: PLT entries, and the addresses a library takes (a deleter, a -fno-plt call)
   or keeps in data, so that the address of free compares equal everywhere and a block freed
   through it is counted. An entry is patched only while it holds glibc's own function (or a
   PLT entry is not bound yet): one bound to another allocator is left alone. Each wrapper
   calls glibc's function and then adds or subtracts the block's chunk size (what mallinfo2
   counts). The same blocks come back with the same errors. What differs: the address of
   free (or malloc) that code stored before the counter started, or that libc or the loader
   hand out, is glibc's and not equal to one taken since. The count is process-wide, like
   mallinfo2.

   Objects loaded later are patched as soon as Python's import machinery has loaded them
   (its dlopen entry points at vs_dlopen), or when vs_rescan sees that the loader's count of
   loaded objects moved (one dl_iterate_phdr callback otherwise). An object is patched while
   this library holds it open (dlopen RTLD_NOLOAD: an object that another thread is still
   loading or unloading is waited for, or skipped). What an object allocated before it was
   patched (static constructors, the loader's own records) is not counted, so the caller
   resynchronises its offset with one mallinfo2 reading when vs_rescan reports new objects.
   Not counted either: a free through a pointer to free taken before patching, or stored in
   data; glibc's per-thread cache makes mallinfo2 differ by a few KiB (it counts those
   chunks as in use). */
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
#define VS_ABS64 R_X86_64_64
#elif defined(__aarch64__)
#define VS_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define VS_GLOB_DAT R_AARCH64_GLOB_DAT
#define VS_ABS64 R_AARCH64_ABS64
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

static inline void add(long long n) {
    long long c = __atomic_add_fetch(&cur, n, __ATOMIC_RELAXED);
    long long k = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    while (c > k && !__atomic_compare_exchange_n(&peak, &k, c, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static inline void up(void *p) {
    if (p) add(chunk(p));
}

static inline void down(void *p) {
    if (p) __atomic_sub_fetch(&cur, chunk(p), __ATOMIC_RELAXED);
}

/* glibc's own functions (from libc.so.6 itself, whatever else the process interposes). */
static struct {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void (*free)(void *);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    struct mallinfo2 (*mallinfo2)(void);
} glibc;

/* The wrappers: glibc's function first, then the count; errno is left as glibc set it. */
#define COUNTED(name, params, args)                                                            \
    static void *vs_##name params {                                                            \
        void *p = glibc.name args;                                                             \
        up(p);                                                                                 \
        return p;                                                                              \
    }
COUNTED(malloc, (size_t n), (n))
COUNTED(calloc, (size_t a, size_t b), (a, b))
COUNTED(aligned_alloc, (size_t al, size_t n), (al, n))
COUNTED(memalign, (size_t al, size_t n), (al, n))
COUNTED(valloc, (size_t n), (n))
COUNTED(pvalloc, (size_t n), (n))

static void vs_free(void *p) {
    down(p);
    glibc.free(p);
}
static void *vs_realloc(void *old, size_t n) {
    long long was = old ? chunk(old) : 0;
    void *p = glibc.realloc(old, n);
    if (p || (old && n == 0)) { /* moved, grown, shrunk, or freed by realloc(p, 0) */
        if (was) __atomic_sub_fetch(&cur, was, __ATOMIC_RELAXED);
        up(p);
    }
    return p;
}
/* glibc's reallocarray calls realloc through libc's own (patched) entry: counted there. */
static void *vs_reallocarray(void *old, size_t a, size_t b) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return vs_realloc(old, n);
}
static int vs_posix_memalign(void **out, size_t al, size_t n) {
    int rc = glibc.posix_memalign(out, al, n);
    if (rc == 0) up(*out);
    return rc;
}

/* Python's own dlopen (importing an extension module, by its full path: the caller's RUNPATH,
   which this wrapper would change, plays no part): the new objects are patched as soon as
   they are loaded, before the module's init function runs. */
static void *vs_dlopen(const char *file, int mode);

struct hook {
    const char *name;
    void *fn;
    void *own; /* glibc's function: an entry is patched only while it holds this (or no binding) */
};
static struct hook HOOKS[] = {
    {"malloc", (void *)vs_malloc, NULL},
    {"calloc", (void *)vs_calloc, NULL},
    {"free", (void *)vs_free, NULL},
    {"realloc", (void *)vs_realloc, NULL},
    {"reallocarray", (void *)vs_reallocarray, NULL},
    {"posix_memalign", (void *)vs_posix_memalign, NULL},
    {"aligned_alloc", (void *)vs_aligned_alloc, NULL},
    {"memalign", (void *)vs_memalign, NULL},
    {"valloc", (void *)vs_valloc, NULL},
    {"pvalloc", (void *)vs_pvalloc, NULL},
};
#define N_HOOKS (sizeof(HOOKS) / sizeof(HOOKS[0]))
static struct hook DLOPEN = {"dlopen", (void *)vs_dlopen, NULL};

static const struct hook *find_hook(const char *name) {
    switch (name[0]) { /* most PLT entries are none of ours: one compare rules them out */
    case 'm': case 'c': case 'f': case 'r': case 'p': case 'a': case 'v':
        break;
    default:
        return NULL;
    }
    for (size_t i = 0; i < N_HOOKS; i++)
        if (strcmp(name, HOOKS[i].name) == 0) return &HOOKS[i];
    return NULL;
}

/* glibc's functions, looked up in libc.so.6 itself; 0 when that is not glibc. */
static int find_glibc(void) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc) return 0; /* it stays open: libc is never unloaded anyway */
    for (size_t i = 0; i < N_HOOKS; i++)
        if (!(HOOKS[i].own = dlsym(libc, HOOKS[i].name))) return 0;
    if (!(DLOPEN.own = dlsym(libc, "dlopen"))) return 0;
#define LOOKUP(field) (*(void **)&glibc.field = dlsym(libc, #field))
    LOOKUP(mallinfo2); /* glibc >= 2.33; without it, an import's own loading is not counted */
    return LOOKUP(malloc) && LOOKUP(calloc) && LOOKUP(free) && LOOKUP(realloc) &&
           LOOKUP(posix_memalign) && LOOKUP(aligned_alloc) && LOOKUP(memalign) &&
           LOOKUP(valloc) && LOOKUP(pvalloc);
#undef LOOKUP
}

/* --- patching ------------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ready = -1; /* find_glibc's result, once */
static uintptr_t *seen; /* load addresses (with their program headers) already patched */
static const void **seen_phdr;
static size_t n_seen, cap_seen;
static unsigned long long last_adds = ~0ULL, last_subs = ~0ULL;
static uintptr_t self_base;
static long page_size;
static int n_new; /* objects patched by the current scan */

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
static int n_slots; /* entries pointed at a wrapper, all objects */

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

/* What the object being patched is: its load range (an unbound PLT entry points into it),
   its RELRO pages, and whether it is libc or Python's import machinery. */
struct object {
    uintptr_t base, lo, hi, relro_lo, relro_hi;
    int libc, python;
};

static void set_slot(void **slot, const struct hook *h, const struct object *o, int plt) {
    void *was = *slot;
    if (was == h->fn) return;
    if (was != h->own && !(plt && (uintptr_t)was >= o->lo && (uintptr_t)was < o->hi))
        return; /* bound to another allocator, or a pointer the program changed: left alone */
    if ((size_t)n_slots == cap_patched) {
        size_t cap = cap_patched ? cap_patched * 2 : 256;
        struct patched *p = realloc(patched, cap * sizeof(*p));
        if (!p) return; /* not patched: what cannot be put back is not changed */
        patched = p;
        cap_patched = cap;
    }
    int relro = (uintptr_t)slot >= o->relro_lo && (uintptr_t)slot < o->relro_hi;
    if (!store(slot, h->fn, relro)) return;
    patched[n_slots++] = (struct patched){slot, was, h->fn, relro};
}

static void patch_relocs(const struct object *o, const ElfW(Rela) *rel, size_t count,
                         const ElfW(Sym) *symtab, const char *strtab) {
    for (size_t i = 0; i < count; i++) {
        unsigned long type = VS_R_TYPE(rel[i].r_info);
        /* calls (JUMP_SLOT), and the address of free a library takes (GLOB_DAT: a deleter, or
           a -fno-plt call) or keeps in data (ABS64): all of them, so that the address compares
           equal everywhere and a block freed through it is counted */
        int plt = type == VS_JUMP_SLOT;
        if (!plt && type != VS_GLOB_DAT && !(type == VS_ABS64 && rel[i].r_addend == 0)) continue;
        const ElfW(Sym) *sym = &symtab[VS_R_SYM(rel[i].r_info)];
        if (sym->st_name == 0 || (sym->st_shndx != SHN_UNDEF && !o->libc)) continue;
        const char *name = strtab + sym->st_name;
        int dl = o->python && plt && strcmp(name, "dlopen") == 0;
        const struct hook *h = dl ? &DLOPEN : find_hook(name);
        if (h) set_slot((void **)(o->base + rel[i].r_offset), h, o, plt);
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

static void patch_object(const struct dl_phdr_info *info) {
    const char *file = file_name(info->dlpi_name);
    struct object o = {info->dlpi_addr, UINTPTR_MAX, 0, 0, 0, 0, 0};
    o.libc = strncmp(file, "libc.so", 7) == 0;
    o.python = !*file || strncmp(file, "libpython", 9) == 0; /* the executable, or libpython */
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = o.base + ph->p_vaddr, end = start + ph->p_memsz;
        if (ph->p_type == PT_LOAD) {
            o.lo = start < o.lo ? start : o.lo;
            o.hi = end > o.hi ? end : o.hi;
        }
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)start;
        if (ph->p_type == PT_GNU_RELRO) { /* as the loader protects it: whole pages only */
            uintptr_t mask = ~(uintptr_t)(page_size - 1);
            o.relro_lo = start & mask;
            o.relro_hi = end & mask;
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
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_addr(o.base, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_addr(o.base, d->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_addr(o.base, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_PLTREL: pltrel = (long)d->d_un.d_val; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_addr(o.base, d->d_un.d_ptr); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_RELAENT: relaent = d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab || relaent != sizeof(ElfW(Rela))) return;
    if (jmprel && pltrel == DT_RELA) patch_relocs(&o, jmprel, pltrelsz / sizeof(ElfW(Rela)), symtab, strtab);
    if (rela) patch_relocs(&o, rela, relasz / sizeof(ElfW(Rela)), symtab, strtab);
}

/* Objects found by a walk, patched after it (dlopen may not be called inside one). */
struct found {
    char *name; /* NULL: the executable */
    struct dl_phdr_info info;
};
static struct found *found;
static size_t n_found, cap_found;

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
    if (n_found == cap_found) {
        size_t cap = cap_found ? cap_found * 2 : 64;
        struct found *f = realloc(found, cap * sizeof(*f));
        if (!f) return 0;
        found = f;
        cap_found = cap;
    }
    const char *name = info->dlpi_name;
    found[n_found].name = name && *name ? strdup(name) : NULL;
    if (name && *name && !found[n_found].name) return 0;
    found[n_found].info = *info;
    found[n_found].info.dlpi_name = NULL;
    n_found++;
    return 0;
}

/* Patch what a walk found, each object held open meanwhile: RTLD_NOLOAD waits for an object
   another thread is loading (its relocation, and its RELRO pages' protection, are done by
   then) and fails for one being unloaded, which is left unpatched. */
static void patch_found(void) {
    for (size_t i = 0; i < n_found; i++) {
        struct found *f = &found[i];
        void *hold = dlopen(f->name, RTLD_LAZY | RTLD_NOLOAD);
        if (hold) {
            patch_object(&f->info);
            remember(f->info.dlpi_addr, f->info.dlpi_phdr);
            n_new++;
            dlclose(hold);
        } else { /* being unloaded (or not found by its name): left as it is */
            remember(f->info.dlpi_addr, f->info.dlpi_phdr);
        }
        free(f->name);
    }
    n_found = 0;
}

static int patched_by_dlopen; /* objects vs_dlopen patched since the last vs_rescan */

static int scan_locked(void) {
    if (ready < 0) {
        page_size = sysconf(_SC_PAGESIZE);
        Dl_info me;
        if (dladdr((void *)vs_malloc, &me)) self_base = (uintptr_t)me.dli_fbase;
        ready = find_glibc();
    }
    if (!ready) return 0;
    int first = 1;
    n_new = 0;
    dl_iterate_phdr(scan_cb, &first);
    patch_found();
    return n_new;
}

/* Start (0: libc is not glibc, nothing patched) or patch every object loaded since the last
   call (other than by Python's import: vs_imported); returns how many it patched (0: none, the
   usual case, one callback). What they allocated before is not in the count. */
int vs_rescan(void) {
    pthread_mutex_lock(&lock);
    int n = scan_locked();
    pthread_mutex_unlock(&lock);
    return n;
}

/* How many objects Python's import loaded (and vs_dlopen patched, their loading counted)
   since the last call. */
int vs_imported(void) {
    pthread_mutex_lock(&lock);
    int n = patched_by_dlopen;
    patched_by_dlopen = 0;
    pthread_mutex_unlock(&lock);
    return n;
}

int vs_ready(void) { return ready > 0; }

static long long heap_used(void) {
    struct mallinfo2 m = glibc.mallinfo2();
    return (long long)(m.uordblks + m.hblkhd);
}

/* What the load itself allocated where nothing counted it (the loader's records, the new
   objects' static constructors) is read from two mallinfo2 walks around it and added to the
   count then, so a cell that imports an extension module keeps an exact count and peak. */
static void *vs_dlopen(const char *file, int mode) {
    int walk = ready > 0 && glibc.mallinfo2;
    long long heap0 = walk ? heap_used() : 0, count0 = __atomic_load_n(&cur, __ATOMIC_RELAXED);
    void *handle = ((void *(*)(const char *, int))DLOPEN.own)(file, mode);
    if (handle) {
        pthread_mutex_lock(&lock);
        int n = scan_locked();
        patched_by_dlopen += n;
        pthread_mutex_unlock(&lock);
        if (n && walk) {
            long long missed = (heap_used() - heap0) - (__atomic_load_n(&cur, __ATOMIC_RELAXED) - count0);
            if (missed > 0) add(missed);
        }
    }
    return handle;
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
