/* archwheel.binary._speedups: the scan of one whole, clean ELF64 binary or ar archive.
 *
 * An accelerator, never a second definition: scan/binary.py's streaming scan is the reference,
 * and this routine answers only when that scan would report nothing but the containers and
 * entries it returns. Whenever the bytes hold anything else (a damaged or truncated structure,
 * a limit reached, a raw cubin outside a container, unknown flag bits, extended section
 * numbering, a 32-bit or big-endian file, a cubin), it returns None and the Python scan reads
 * the binary as it always does, problems and all. tests/unit/binary/test_speedups.py compares
 * the two on generated and mutated binaries and on the real wheels.
 *
 * Every offset and size comes from the input: each is checked against the buffer before use,
 * with sums that cannot overflow (a 64-bit size near 2^64 is as likely as a small one).
 * Work and memory are linear in the buffer: at most as many container candidates,
 * entries and sections as the Python scan's bounds allow.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE 1 /* as pyconfig.h defines it (3.10 defines it again) */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <zlib.h>

/* The Python scan's bounds (elf.py, layout.py); those of scan/binary.py are arguments. */
#define MAX_SHSTRTAB (16u << 20)
#define MAX_NAME 1024
#define MAX_NEED (64u << 20)
#define ALIGNMENT_SLACK 16
#define DESCRIBE_CACHE_MAX 4096

#define EM_CUDA 190
#define SHT_NOBITS 8
#define PT_INTERP 3

#define ENTRY_HEADER_MIN 64
#define ENTRY_HEADER_MAX 4096
#define ENTRY_MARKER 0x0101
#define COMPRESS_LEGACY 0x1000ull
#define COMPRESS_LZ4 0x2000ull
#define COMPRESS_ZSTD 0x8000ull
#define COMPRESSION_BITS (COMPRESS_LEGACY | COMPRESS_LZ4 | COMPRESS_ZSTD)
#define ARCH_SPECIFIC 0x100000ull
#define FAMILY_SPECIFIC 0x200000ull
#define BOTH_VARIANTS (ARCH_SPECIFIC | FAMILY_SPECIFIC)
#define KNOWN_FLAGS                                                                       \
    (0x1ull | 0x2ull | 0x10ull | 0x20ull | 0x40ull | COMPRESSION_BITS | BOTH_VARIANTS | \
     0x1000000ull | 0x10000ull)

static const unsigned char CONTAINER_MAGIC[4] = {0x50, 0xED, 0x55, 0xBA};
static const unsigned char ELF_MAGIC[4] = {0x7F, 'E', 'L', 'F'};

/* Set once by configure(): the model's types and the function that names an entry's kind,
 * target, compression and PTX ISA (fatbin.py's shared values). */
static PyObject *entry_type = NULL;
static PyObject *container_type = NULL;
static PyObject *describe = NULL;
static PyObject *origin_fatbin = NULL;
static PyObject *describe_cache = NULL; /* int key -> (kind, target, compression, ptx_isa) */

static inline uint16_t u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t u64(const unsigned char *p) {
    return (uint64_t)u32(p) | ((uint64_t)u32(p + 4) << 32);
}

typedef struct {
    uint64_t offset, size, end; /* end: offset + size, checked against the file */
    uint32_t type;
    Py_ssize_t index;   /* position in the section table */
    int fatbin;         /* named .nv_fatbin or __nv_relfatbin */
    PyObject *label;    /* its name */
    Py_ssize_t acc_first, acc_count; /* the accepted containers it holds (index sections) */
} Sect;

typedef struct {
    uint64_t offset, end; /* the container: its header offset and the end it declares */
    Py_ssize_t first, count; /* its entries in the entry arrays */
    int error;               /* a header that failed, or the walk stopped early */
} Scan;

static int by_offset_then_size(const void *a, const void *b) {
    const Sect *x = *(const Sect *const *)a, *y = *(const Sect *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->size != y->size) return x->size > y->size ? -1 : 1; /* larger first */
    return x->index < y->index ? -1 : (x->index > y->index); /* as a stable sort */
}

/* The section holding offset, as layout.Unit.section_at answers it; NULL for none. */
static Sect *section_at(Sect **kept, Py_ssize_t n, uint64_t offset) {
    Py_ssize_t lo = 0, hi = n; /* bisect_right over the starts */
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (offset < kept[mid]->offset) hi = mid; else lo = mid + 1;
    }
    if (lo == 0) return NULL;
    Sect *s = kept[lo - 1];
    return offset < s->end ? s : NULL;
}

/* Whether the entry header at p (64 bytes) passes fatbin.walk_entries' checks. */
static int entry_ok(const unsigned char *p, uint64_t position, uint64_t end) {
    uint16_t kind = u16(p), marker = u16(p + 2);
    uint32_t header_size = u32(p + 4), compressed = u32(p + 16), sm = u32(p + 28);
    uint64_t padded = u64(p + 8), flags = u64(p + 40);
    if (!(kind == 1 || kind == 2 || kind == 8)) return 0;
    if (marker != ENTRY_MARKER) return 0;
    if (header_size < ENTRY_HEADER_MIN || header_size > ENTRY_HEADER_MAX || header_size & 7) return 0;
    if (sm < 10 || sm > 199) return 0;
    if (position + header_size > end || padded > end - position - header_size) return 0;
    if (compressed && compressed > padded) return 0;
    uint64_t bits = flags & COMPRESSION_BITS;
    if (bits & (bits - 1)) return 0;
    if ((flags & BOTH_VARIANTS) == BOTH_VARIANTS) return 0;
    return 1;
}

/* (kind, target, compression, ptx_isa) for the entry at p: new reference, NULL on error. */
static PyObject *described(const unsigned char *p) {
    uint16_t kind = u16(p), vminor = u16(p + 24), vmajor = u16(p + 26);
    uint32_t sm = u32(p + 28);
    uint64_t flags = u64(p + 40);
    uint64_t key = (uint64_t)kind | ((uint64_t)sm << 4) | (((flags & BOTH_VARIANTS) >> 20) << 12) |
                   (((flags & COMPRESSION_BITS) >> 12) << 14);
    if (kind == 1) key |= ((uint64_t)vmajor << 32) | ((uint64_t)vminor << 48);
    PyObject *k = PyLong_FromUnsignedLongLong(key);
    if (!k) return NULL;
    PyObject *found = PyDict_GetItemWithError(describe_cache, k);
    if (found) {
        Py_DECREF(k);
        Py_INCREF(found);
        return found;
    }
    if (PyErr_Occurred()) { Py_DECREF(k); return NULL; }
    found = PyObject_CallFunction(describe, "IIKII", (unsigned)kind, (unsigned)sm,
                                  (unsigned long long)flags, (unsigned)vmajor, (unsigned)vminor);
    if (!found) { Py_DECREF(k); return NULL; }
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 4) {
        PyErr_SetString(PyExc_TypeError, "describe() must return a 4-tuple");
        Py_DECREF(k); Py_DECREF(found);
        return NULL;
    }
    if (PyDict_GET_SIZE(describe_cache) >= DESCRIBE_CACHE_MAX) PyDict_Clear(describe_cache);
    if (PyDict_SetItem(describe_cache, k, found) < 0) { Py_DECREF(k); Py_DECREF(found); return NULL; }
    Py_DECREF(k);
    return found;
}

/* A tuple subclass instance (a NamedTuple of the model) holding items, stolen.
 *
 * Made untracked by the cyclic garbage collector: an entry or a container is immutable and
 * refers only to objects made before it (numbers, names, the shared kinds and targets, the
 * entries of a container), so it can be in no reference cycle, and the collector has nothing
 * to find in it. Tracked, the 2^18 entries one binary may hold made every collection while the
 * scan runs walk them all: half the compiled scan's time (docs/maintainers/performance.md). CPython untracks
 * its own tuples of untracked items for the same reason; freeing one works as for any tuple. */
static PyObject *named(PyObject *type, PyObject **items, Py_ssize_t n) {
    PyObject *obj = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    if (!obj) {
        for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!items[i]) { Py_DECREF(obj); for (Py_ssize_t j = i + 1; j < n; j++) Py_XDECREF(items[j]); return NULL; }
        PyTuple_SET_ITEM(obj, i, items[i]);
    }
    PyObject_GC_UnTrack(obj);
    return obj;
}

static PyObject *make_entry(const unsigned char *p, uint64_t offset, PyObject *section) {
    PyObject *d = described(p);
    if (!d) return NULL;
    uint32_t header_size = u32(p + 4), compressed = u32(p + 16);
    uint64_t padded = u64(p + 8), flags = u64(p + 40), uncompressed = u64(p + 56);
    uint64_t bits = flags & COMPRESSION_BITS;
    if (!bits) uncompressed = padded;
    else if (!uncompressed) uncompressed = compressed;
    PyObject *items[10];
    Py_INCREF(section);
    items[0] = section;
    items[1] = PyLong_FromUnsignedLongLong(offset);
    for (int i = 0; i < 3; i++) { items[2 + i] = PyTuple_GET_ITEM(d, i); Py_INCREF(items[2 + i]); }
    items[5] = PyLong_FromUnsignedLongLong((uint64_t)header_size + padded);
    items[6] = PyLong_FromUnsignedLongLong(uncompressed);
    items[7] = PyTuple_GET_ITEM(d, 3);
    Py_INCREF(items[7]);
    items[8] = PyLong_FromUnsignedLongLong(flags);
    items[9] = origin_fatbin;
    Py_INCREF(items[9]);
    Py_DECREF(d);
    return named(entry_type, items, 10);
}

/* A magic's 16-byte container header: its entries' size, or -1 when it is not one (as
 * fatbin.container_entries_size). */
static int64_t container_size(const unsigned char *buf, uint64_t len, uint64_t at) {
    if (len - at < 16) return -1;
    const unsigned char *h = buf + at;
    if (u16(h + 4) != 1 || u16(h + 6) != 16) return -1;
    uint64_t size = u64(h + 8);
    if (size > 0 && size < ENTRY_HEADER_MIN) return -1;
    if (size > (uint64_t)INT64_MAX) return -2; /* valid, but past any buffer */
    return (int64_t)size;
}

/* parse_elf_header's verdict on the bytes at an embedded ELF magic, and whether the header
 * is a CUDA one (a raw cubin candidate, which only the Python scan reads). */
static int embedded_cubin(const unsigned char *buf, uint64_t len, uint64_t at) {
    uint64_t have = len - at < 64 ? len - at : 64;
    const unsigned char *h = buf + at;
    if (have < 16) return 0;
    int cls = h[4];
    if (cls != 1 && cls != 2) return 0;
    if (h[5] != 1) return 0;
    uint64_t need = cls == 2 ? 64 : 52;
    if (have < need) return 0;
    uint64_t shoff = cls == 2 ? u64(h + 40) : u32(h + 32);
    uint16_t shentsize = cls == 2 ? u16(h + 58) : u16(h + 46);
    if (shoff && shentsize != (cls == 2 ? 64 : 40)) return 0;
    return u16(h + 18) == EM_CUDA;
}

enum { OK = 0, LEAVE = 1, ERR = -1 }; /* LEAVE: the Python scan reads it; ERR: exception set */

/* Append to a growable array of PyMem memory; ERR (MemoryError) when it cannot grow. */
#define PUSH(array, count, cap, value)                                                   \
    do {                                                                                 \
        if ((count) == (cap)) {                                                          \
            Py_ssize_t grown_cap = (cap) ? 2 * (cap) : 16;                               \
            void *grown = PyMem_Realloc((array), (size_t)grown_cap * sizeof(*(array)));  \
            if (!grown) { PyErr_NoMemory(); return ERR; }                                \
            (array) = grown;                                                             \
            (cap) = grown_cap;                                                           \
        }                                                                                \
        (array)[(count)++] = (value);                                                    \
    } while (0)

typedef struct {
    uint64_t start, end; /* absolute */
    PyObject *name;      /* "" for the file itself, the member name in an archive */
    Sect *sects;
    Py_ssize_t nsects;
    Sect **kept; /* the section index */
    Py_ssize_t nkept;
    int e_type, interp;
    uint64_t debug_bytes; /* in .debug_* and .zdebug_* sections: what strip --strip-debug removes */
    PyObject *containers, *entries;
} Unit;

typedef struct {
    const unsigned char *buf;
    uint64_t len;
    Py_ssize_t max_containers, max_per_container, max_entries, max_raw_cubins;
    Unit *units;
    Py_ssize_t nunits, cap_units;
    PyObject *unit_names; /* a set: units of one name would share their lists (scan/binary) */
    Scan *scans;
    Py_ssize_t nscans, cap_scans;
    uint64_t *errors; /* magics that are no container header */
    Py_ssize_t nerrors, cap_errors;
    uint64_t *entry_at; /* every entry walked, in file order */
    Py_ssize_t nentries, cap_entries;
    uint64_t *cubins; /* embedded ELF headers that parse as CUDA ones */
    Py_ssize_t ncubins, cap_cubins;
    uint64_t *acc_off, *acc_end, *acc_prefix; /* the accepted containers, in file order */
    Py_ssize_t nacc;
} Ctx;

/* A section strip --strip-debug removes (elf.is_debug_section): .debug_*, .zdebug_*, and
 * .debug, .stab, .stabstr. */
static int is_debug_section(const unsigned char *name, uint64_t n) {
    return (n >= 7 && !memcmp(name, ".debug_", 7)) || (n >= 8 && !memcmp(name, ".zdebug_", 8)) ||
           (n == 6 && !memcmp(name, ".debug", 6)) || (n == 5 && !memcmp(name, ".stab", 5)) ||
           (n == 8 && !memcmp(name, ".stabstr", 8));
}

/* One ELF image at [base, base + size), as layout.elf_unit reads it, into u. Everything it
 * reads must lie inside the image (the Python scan may read past it: left to it). */
static int elf_unit(Ctx *c, uint64_t base, uint64_t size, Unit *u) {
    const unsigned char *img = c->buf + base;
    u->start = base;
    u->end = base + size;
    if (size < 64 || memcmp(img, ELF_MAGIC, 4) || img[4] != 2 || img[5] != 1) return LEAVE;
    uint16_t e_type = u16(img + 16), e_machine = u16(img + 18);
    uint64_t phoff = u64(img + 32), shoff = u64(img + 40);
    uint16_t phentsize = u16(img + 54), phnum = u16(img + 56);
    uint16_t shentsize = u16(img + 58), shnum = u16(img + 60), shstrndx = u16(img + 62);
    if (e_machine == EM_CUDA) return LEAVE; /* a cubin */
    if (shoff && shentsize != 64) return LEAVE;
    u->e_type = e_type;
    u->interp = 0;
    if (e_type == 3 && phnum > 0 && phnum <= 4096 && phoff < size && phentsize >= 4) {
        if ((uint64_t)phnum * phentsize > size - phoff) return LEAVE;
        for (uint64_t i = 0; i < phnum; i++)
            if (u32(img + phoff + i * phentsize) == PT_INTERP) { u->interp = 1; break; }
    }
    if (shoff == 0 || shoff >= size) return LEAVE;
    if (shnum == 0 || shstrndx == 0xFFFF) return LEAVE; /* extended numbering */
    if ((uint64_t)shnum * 64 > size - shoff) return LEAVE;
    if (!(shstrndx > 0 && shstrndx < shnum)) return LEAVE;
    const unsigned char *table = img + shoff;
    const unsigned char *strtab = table + (uint64_t)shstrndx * 64;
    uint64_t names_at = u64(strtab + 24), names_len = u64(strtab + 32);
    if (names_at >= size) return LEAVE;
    if (names_len > MAX_SHSTRTAB) names_len = MAX_SHSTRTAB;
    if (names_len > size - names_at) names_len = size - names_at;
    const unsigned char *names = img + names_at;

    /* The sections, named as elf.name_sections names them (each name offset decoded once). */
    u->sects = PyMem_Calloc(shnum, sizeof(Sect));
    u->kept = PyMem_Calloc(shnum, sizeof(Sect *));
    if (!u->sects || !u->kept) { PyErr_NoMemory(); return ERR; }
    PyObject *labels = PyDict_New();
    if (!labels) return ERR;
    int status = OK;
    for (Py_ssize_t i = 0; i < shnum && status == OK; i++) {
        const unsigned char *r = table + i * 64;
        uint32_t name_off = u32(r), type = u32(r + 4);
        uint64_t offset = u64(r + 24), sh_size = u64(r + 32);
        if (type != SHT_NOBITS && (offset > size || sh_size > size - offset)) { status = LEAVE; break; }
        if (!sh_size) continue;
        if (name_off >= names_len) { status = LEAVE; break; } /* "<section i>" */
        if (sh_size > UINT64_MAX - base || offset > UINT64_MAX - base - sh_size) { status = LEAVE; break; }
        uint64_t stop = names_len - name_off < MAX_NAME ? names_len : name_off + MAX_NAME;
        const unsigned char *start = names + name_off;
        const unsigned char *nul = memchr(start, 0, stop - name_off);
        uint64_t n = nul ? (uint64_t)(nul - start) : stop - name_off;
        if ((n == 8 && !memcmp(start, "(fatbin)", 8)) || (n == 12 && !memcmp(start, "(no section)", 12))) {
            status = LEAVE; /* a name the scan gives a meaning of its own */
            break;
        }
        PyObject *key = PyLong_FromUnsignedLong(name_off);
        if (!key) { status = ERR; break; }
        PyObject *label = PyDict_GetItemWithError(labels, key);
        if (!label) {
            if (PyErr_Occurred()) { Py_DECREF(key); status = ERR; break; }
            label = PyUnicode_DecodeUTF8((const char *)start, (Py_ssize_t)n, "replace");
            if (!label || PyDict_SetItem(labels, key, label) < 0) {
                Py_XDECREF(label); Py_DECREF(key); status = ERR; break;
            }
            Py_DECREF(label); /* labels holds it */
        }
        Py_DECREF(key);
        Py_INCREF(label);
        Sect *s = &u->sects[u->nsects++];
        s->offset = base + offset;
        s->size = sh_size;
        s->end = base + offset + sh_size;
        s->type = type;
        s->index = i;
        s->fatbin = (n == 10 && !memcmp(start, ".nv_fatbin", 10)) ||
                    (n == 14 && !memcmp(start, "__nv_relfatbin", 14));
        if (type != SHT_NOBITS && is_debug_section(start, n))
            u->debug_bytes += sh_size; /* inside the image: checked above */
        s->label = label; /* a reference of its own */
    }
    Py_DECREF(labels);
    if (status != OK) return status;
    /* The section index: sections with bytes in the file, by offset (larger first), none
     * overlapping one kept before it (layout.Unit._section_index). */
    Py_ssize_t nfile = 0;
    for (Py_ssize_t i = 0; i < u->nsects; i++)
        if (u->sects[i].type != SHT_NOBITS) u->kept[nfile++] = &u->sects[i];
    qsort(u->kept, (size_t)nfile, sizeof(Sect *), by_offset_then_size);
    for (Py_ssize_t i = 0; i < nfile; i++)
        if (!u->nkept || u->kept[i]->offset >= u->kept[u->nkept - 1]->end) u->kept[u->nkept++] = u->kept[i];
    return OK;
}

static int add_unit(Ctx *c, uint64_t base, uint64_t size, PyObject *name) {
    /* name: a new reference, given to the unit */
    Unit blank;
    memset(&blank, 0, sizeof blank);
    int known = PySet_Contains(c->unit_names, name);
    if (known) { Py_DECREF(name); return known < 0 ? ERR : LEAVE; }
    if (PySet_Add(c->unit_names, name) < 0) { Py_DECREF(name); return ERR; }
    blank.name = name;
    if (c->nunits == c->cap_units) {
        Py_ssize_t cap = c->cap_units ? 2 * c->cap_units : 4;
        Unit *grown = PyMem_Realloc(c->units, (size_t)cap * sizeof(Unit));
        if (!grown) { Py_DECREF(name); PyErr_NoMemory(); return ERR; }
        c->units = grown;
        c->cap_units = cap;
    }
    c->units[c->nunits++] = blank; /* owned from here: freed with the context */
    return elf_unit(c, base, size, &c->units[c->nunits - 1]);
}

static int all_digits(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9') return 0;
    return 1;
}

static const char AR_SPACE[] = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"; /* what str.rstrip() strips */

/* A System V / GNU ar archive, as layout.ar_layout reads it: one unit per ELF member. */
static int ar_units(Ctx *c) {
    const unsigned char *buf = c->buf;
    uint64_t len = c->len;
    if (len < 8 || memcmp(buf, "!<arch>\n", 8)) return LEAVE; /* thin: a warning */
    const unsigned char *long_names = NULL;
    uint64_t long_len = 0;
    uint64_t pos = 8;
    while (len - pos >= 60) {
        const unsigned char *h = buf + pos;
        if (h[58] != '`' || h[59] != '\n') return LEAVE; /* a damaged header */
        Py_ssize_t rn = 16;
        for (int i = 0; i < 16; i++)
            if (h[i] >= 0x80) return LEAVE; /* decoded with replacement characters */
        while (rn > 0 && memchr(AR_SPACE, h[rn - 1], sizeof AR_SPACE - 1)) rn--;
        /* The size: ASCII digits between spaces (layout._decimal); anything else a problem. */
        Py_ssize_t lo = 48, hi = 58;
        while (lo < hi && h[lo] == ' ') lo++;
        while (hi > lo && h[hi - 1] == ' ') hi--;
        uint64_t member = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            if (h[i] < '0' || h[i] > '9') return LEAVE;
            if (member > len) return LEAVE; /* runs past the end, whatever the rest says */
            member = member * 10 + (uint64_t)(h[i] - '0');
        }
        if (c->nunits >= 65536) return LEAVE; /* layout.MAX_AR_MEMBERS */
        uint64_t data = pos + 60;
        if (member > len - data) return LEAVE; /* truncated */
        const unsigned char *name = NULL;
        uint64_t name_len = 0;
        int utf8 = 0, table = 0;
        if ((rn == 1 && h[0] == '/') || (rn == 7 && !memcmp(h, "/SYM64/", 7))) {
            table = 1; /* the symbol table */
        } else if (rn == 2 && h[0] == '/' && h[1] == '/') {
            table = 1;
            long_names = buf + data;
            long_len = member < MAX_SHSTRTAB ? member : MAX_SHSTRTAB;
        } else if (rn >= 3 && !memcmp(h, "#1/", 3)) {
            return LEAVE; /* BSD names */
        } else if (rn >= 2 && h[0] == '/' && all_digits(h + 1, rn - 1)) {
            uint64_t index = 0;
            int huge = 0;
            for (Py_ssize_t i = 1; i < rn; i++) {
                if (index > long_len) { huge = 1; break; }
                index = index * 10 + (uint64_t)(h[i] - '0');
            }
            if (!huge && index < long_len) {
                uint64_t stop = long_len - index < MAX_NAME ? long_len : index + MAX_NAME;
                name = long_names + index;
                name_len = stop - index;
                for (uint64_t i = 0; i + 1 < stop - index; i++)
                    if (name[i] == '/' && name[i + 1] == '\n') { name_len = i; break; }
                utf8 = 1;
            }
        } else {
            name = h;
            name_len = (uint64_t)rn;
            while (name_len > 0 && name[name_len - 1] == '/') name_len--;
        }
        /* A member without a name (a long name past the '//' table, an empty one): the Python
         * scan reports it by offset (the result is incomplete), never dropped here. */
        if (!table && !name_len && member > 0) return LEAVE;
        if (name_len && member > 0) {
            if (len - data >= 4 && !memcmp(buf + data, ELF_MAGIC, 4)) {
                PyObject *text = utf8 ? PyUnicode_DecodeUTF8((const char *)name, (Py_ssize_t)name_len, "replace")
                                      : PyUnicode_DecodeASCII((const char *)name, (Py_ssize_t)name_len, "strict");
                if (!text) return ERR;
                int status = add_unit(c, data, member, text);
                if (status != OK) return status;
            } else if (len - data >= 4 && !memcmp(buf + data, CONTAINER_MAGIC, 4)) {
                return LEAVE; /* a raw fatbin member */
            }
        }
        uint64_t next = data + member + (member & 1);
        pos = next > pos + 60 ? next : pos + 60;
        if (pos > len) break;
    }
    return OK;
}

/* Every container magic in the file, walked as scan_stream walks it (each one, even those
 * inside another container or outside any unit: the entry bound counts them all). */
static int walk_containers(Ctx *c) {
    const unsigned char *buf = c->buf, *cursor = buf;
    uint64_t len = c->len;
    Py_ssize_t candidates = 0;
    while ((cursor = memmem(cursor, len - (uint64_t)(cursor - buf), CONTAINER_MAGIC, 4))) {
        uint64_t at = (uint64_t)(cursor - buf);
        cursor += 4;
        if (++candidates > c->max_containers) return LEAVE;
        int64_t size = container_size(buf, len, at);
        if (size == -1) {
            PUSH(c->errors, c->nerrors, c->cap_errors, at);
            continue;
        }
        if (size < 0 || (uint64_t)size > len - at - 16) return LEAVE; /* the file ends inside */
        uint64_t end = at + 16 + (uint64_t)size, position = at + 16;
        Scan scan = {at, end, c->nentries, 0, 0};
        while (position < end) {
            if (end - position < ENTRY_HEADER_MIN) return LEAVE; /* a header past the container */
            if (!entry_ok(buf + position, position, end)) { scan.error = 1; break; }
            if (scan.count >= c->max_per_container || c->nentries >= c->max_entries) return LEAVE;
            PUSH(c->entry_at, c->nentries, c->cap_entries, position);
            scan.count++;
            position += u32(buf + position + 4) + u64(buf + position + 8);
        }
        PUSH(c->scans, c->nscans, c->cap_scans, scan);
    }
    /* Every embedded ELF magic: a raw cubin candidate (counted, as the Python scan's bound). */
    Py_ssize_t elf_candidates = 0;
    cursor = buf + 1;
    while (len > 1 && (cursor = memmem(cursor, len - (uint64_t)(cursor - buf), ELF_MAGIC, 4))) {
        uint64_t at = (uint64_t)(cursor - buf);
        cursor += 4;
        if (++elf_candidates > c->max_raw_cubins) return LEAVE;
        if (embedded_cubin(buf, len, at)) PUSH(c->cubins, c->ncubins, c->cap_cubins, at);
    }
    return OK;
}

static Unit *unit_at(Ctx *c, uint64_t offset) {
    Py_ssize_t lo = 0, hi = c->nunits;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (offset < c->units[mid].start) hi = mid; else lo = mid + 1;
    }
    if (lo == 0) return NULL;
    Unit *u = &c->units[lo - 1];
    return offset < u->end ? u : NULL;
}

static int inside_accepted(Ctx *c, uint64_t offset) {
    Py_ssize_t lo = 0, hi = c->nacc;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (offset < c->acc_off[mid]) hi = mid; else lo = mid + 1;
    }
    return lo > 0 && offset < c->acc_end[lo - 1];
}

/* Assembly, as scan/binary._assemble: containers in offset order, none inside one taken, each
 * in its unit and section; then what would be a problem there sends the binary back. */
static int assemble(Ctx *c) {
    const unsigned char *buf = c->buf;
    for (Py_ssize_t i = 0; i < c->nunits; i++) {
        if (!(c->units[i].containers = PyList_New(0)) || !(c->units[i].entries = PyList_New(0))) return ERR;
    }
    c->acc_off = PyMem_Malloc((size_t)(c->nscans + 1) * sizeof(uint64_t));
    c->acc_end = PyMem_Malloc((size_t)(c->nscans + 1) * sizeof(uint64_t));
    c->acc_prefix = PyMem_Malloc((size_t)(c->nscans + 1) * sizeof(uint64_t));
    if (!c->acc_off || !c->acc_end || !c->acc_prefix) { PyErr_NoMemory(); return ERR; }
    c->acc_prefix[0] = 0;
    uint64_t accepted_end = 0;
    int any_accepted = 0;
    for (Py_ssize_t i = 0; i < c->nscans; i++) {
        Scan *sc = &c->scans[i];
        if (any_accepted && sc->offset < accepted_end) continue;
        Unit *u = unit_at(c, sc->offset);
        if (!u) continue;
        Sect *s = section_at(u->kept, u->nkept, sc->offset);
        if (sc->error) {
            if (sc->count || (s && s->fatbin)) return LEAVE; /* a damaged container */
            continue; /* random bytes that happened to hold the magic */
        }
        if (!s) return LEAVE; /* "(no section)" */
        if (sc->end > s->end) return LEAVE; /* past its section */
        PyObject *kept_entries = PyTuple_New(sc->count);
        if (!kept_entries) return ERR;
        for (Py_ssize_t j = 0; j < sc->count; j++) {
            uint64_t at = c->entry_at[sc->first + j];
            if (u64(buf + at + 40) & ~KNOWN_FLAGS) { Py_DECREF(kept_entries); return LEAVE; }
            PyObject *e = make_entry(buf + at, at - u->start, s->label);
            if (!e) { Py_DECREF(kept_entries); return ERR; }
            PyTuple_SET_ITEM(kept_entries, j, e);
            if (PyList_Append(u->entries, e) < 0) { Py_DECREF(kept_entries); return ERR; }
        }
        PyObject_GC_UnTrack(kept_entries); /* entries only: no cycle through it (see named) */
        PyObject *items[4];
        Py_INCREF(s->label);
        items[0] = s->label;
        items[1] = PyLong_FromUnsignedLongLong(sc->offset - u->start);
        items[2] = PyLong_FromUnsignedLongLong(sc->end - sc->offset);
        items[3] = kept_entries;
        PyObject *made = named(container_type, items, 4);
        if (!made) return ERR;
        int appended = PyList_Append(u->containers, made);
        Py_DECREF(made);
        if (appended < 0) return ERR;
        accepted_end = sc->end;
        any_accepted = 1;
        if (!s->acc_count) s->acc_first = c->nacc;
        s->acc_count++;
        c->acc_off[c->nacc] = sc->offset;
        c->acc_end[c->nacc] = sc->end;
        c->acc_prefix[c->nacc + 1] = c->acc_prefix[c->nacc] + (sc->end - sc->offset);
        c->nacc++;
    }
    /* A CUDA ELF header in a unit, not its own and not inside a container: a raw cubin. */
    for (Py_ssize_t i = 0; i < c->ncubins; i++) {
        Unit *u = unit_at(c, c->cubins[i]);
        if (u && c->cubins[i] != u->start && !inside_accepted(c, c->cubins[i])) return LEAVE;
    }
    /* A magic that is no container header, inside a fatbin section: a damaged header. */
    for (Py_ssize_t i = 0; i < c->nerrors; i++) {
        Unit *u = unit_at(c, c->errors[i]);
        Sect *s = u ? section_at(u->kept, u->nkept, c->errors[i]) : NULL;
        if (s && s->fatbin) return LEAVE;
    }
    /* Fatbin sections whose bytes no container explains (scan/binary._uncovered): the
     * containers found in the index section at the same offset, clipped to this one. */
    for (Py_ssize_t k = 0; k < c->nunits; k++) {
        Unit *u = &c->units[k];
        for (Py_ssize_t i = 0; i < u->nsects; i++) {
            Sect *f = &u->sects[i];
            if (!f->fatbin) continue;
            uint64_t covered = 0;
            Sect *x = section_at(u->kept, u->nkept, f->offset);
            if (x && x->offset == f->offset && x->acc_count) {
                Py_ssize_t lo = x->acc_first, hi = x->acc_first + x->acc_count;
                while (lo < hi) { /* the first container starting at or after f's end */
                    Py_ssize_t mid = lo + (hi - lo) / 2;
                    if (c->acc_off[mid] < f->end) lo = mid + 1; else hi = mid;
                }
                covered = c->acc_prefix[lo] - c->acc_prefix[x->acc_first];
                if (lo > x->acc_first && c->acc_end[lo - 1] > f->end) covered -= c->acc_end[lo - 1] - f->end;
            }
            if (f->size - covered > ALIGNMENT_SLACK) return LEAVE;
        }
    }
    return OK;
}

static void release(Ctx *c) {
    for (Py_ssize_t i = 0; i < c->nunits; i++) {
        Unit *u = &c->units[i];
        Py_XDECREF(u->name);
        Py_XDECREF(u->containers);
        Py_XDECREF(u->entries);
        for (Py_ssize_t j = 0; j < u->nsects; j++) Py_XDECREF(u->sects[j].label);
        PyMem_Free(u->sects);
        PyMem_Free(u->kept);
    }
    PyMem_Free(c->units);
    Py_XDECREF(c->unit_names);
    PyMem_Free(c->scans);
    PyMem_Free(c->errors);
    PyMem_Free(c->entry_at);
    PyMem_Free(c->cubins);
    PyMem_Free(c->acc_off);
    PyMem_Free(c->acc_end);
    PyMem_Free(c->acc_prefix);
}

/* elf.ElfHeader.file_kind, and layout.elf_unit's PIE executable: a borrowed reference. */
static PyObject *kind_names[6];
static PyObject *file_kind(int e_type, int interp) {
    if (e_type == 3) return kind_names[interp ? 2 : 3];
    return kind_names[e_type >= 1 && e_type <= 4 ? e_type : 5];
}

typedef struct {
    Py_ssize_t max_containers, max_per_container, max_entries, max_raw_cubins;
} Bounds;

/* The scan of buf as one whole binary: a new reference to its list of units, to None (LEAVE:
 * the Python scan reads it), or NULL with an exception set. */
static PyObject *scan_buffer(const unsigned char *buf, uint64_t len, const Bounds *b) {
    Ctx c;
    memset(&c, 0, sizeof c);
    c.max_containers = b->max_containers;
    c.max_per_container = b->max_per_container;
    c.max_entries = b->max_entries;
    c.max_raw_cubins = b->max_raw_cubins;
    c.buf = buf;
    c.len = len;
    PyObject *result = NULL;
    int status = (c.unit_names = PySet_New(NULL)) ? OK : ERR;
    if (status == OK) {
        if (c.len >= 4 && !memcmp(c.buf, ELF_MAGIC, 4)) {
            PyObject *none = PyUnicode_FromStringAndSize("", 0);
            status = none ? add_unit(&c, 0, c.len, none) : ERR;
        } else {
            status = ar_units(&c);
        }
    }
    if (status == OK) status = walk_containers(&c);
    if (status == OK) status = assemble(&c);
    if (status == OK) {
        result = PyList_New(c.nunits);
        for (Py_ssize_t i = 0; result && i < c.nunits; i++) {
            Unit *u = &c.units[i];
            PyObject *containers = PyList_AsTuple(u->containers);
            PyObject *entries = PyList_AsTuple(u->entries);
            PyObject *row = NULL;
            if (containers && entries) {
                PyObject_GC_UnTrack(containers); /* containers only (see named) */
                PyObject_GC_UnTrack(entries);
                row = Py_BuildValue("(OOKOOK)", u->name, file_kind(u->e_type, u->interp),
                                    (unsigned long long)(u->end - u->start), containers, entries,
                                    (unsigned long long)u->debug_bytes);
            }
            Py_XDECREF(containers);
            Py_XDECREF(entries);
            if (!row) Py_CLEAR(result);
            else PyList_SET_ITEM(result, i, row);
        }
    } else if (status == LEAVE) {
        result = Py_None;
        Py_INCREF(result);
    }
    release(&c);
    return result;
}

static PyObject *scan_whole(PyObject *self, PyObject *args) {
    Py_buffer view;
    Bounds b;
    if (!PyArg_ParseTuple(args, "y*nnnn", &view, &b.max_containers, &b.max_per_container,
                          &b.max_entries, &b.max_raw_cubins))
        return NULL;
    if (!entry_type) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "configure() first");
        return NULL;
    }
    PyObject *result = scan_buffer(view.buf, (uint64_t)view.len, &b);
    PyBuffer_Release(&view);
    return result;
}

/* ---- Small wheel members, read, inflated and scanned in one call ----------------------------
 *
 * As zipmember.small_member reads one (one pread of its local header, name, some extra-field
 * slack and its data; one inflate; its CRC), then as scan_stream scans the bytes whole. The
 * inflater is zlib's, the one CPython's zipfile (and so pip) inflates wheels with. Anything
 * irregular about a member is left: the Python path reads it again and says what is wrong. */

#define LOCAL_HEADER_SIZE 30

typedef struct {
    unsigned char *block, *out;
    size_t block_cap, out_cap;
    z_stream z;
    int z_ready;
} Reader;

/* A member's integer field, or -1 (error cleared) when it is none or does not fit. */
static int64_t field(PyObject *member, Py_ssize_t i) {
    PyObject *v = PyTuple_GET_ITEM(member, i);
    if (!PyLong_Check(v)) return -1;
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    return x < 0 ? -1 : (int64_t)x;
}

static int grow(unsigned char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    unsigned char *grown = PyMem_Realloc(*buf, need);
    if (!grown) { PyErr_NoMemory(); return -1; }
    *buf = grown;
    *cap = need;
    return 0;
}

/* The bytes of one member (into r->out, *n of them) when all is regular about it: 1; 0 when
 * it is left to the Python path; -1 with an exception set. */
static int read_member(Reader *r, int fd, uint64_t archive_size, PyObject *member,
                       uint64_t small_max, uint64_t slack, const unsigned char **data, uint64_t *n) {
    PyObject *name = PyTuple_GET_ITEM(member, 6); /* the name its headers hold */
    int64_t size = field(member, 1), csize = field(member, 2), method = field(member, 3);
    int64_t crc = field(member, 4), offset = field(member, 5);
    if (!PyUnicode_Check(name) || size < 0 || csize < 0 || method < 0 || crc < 0 || offset < 0)
        return 0;
    if ((uint64_t)size > small_max || (uint64_t)csize > small_max || (method != 0 && method != 8))
        return 0;
    Py_ssize_t name_len;
    const char *name_bytes = PyUnicode_AsUTF8AndSize(name, &name_len);
    PyObject *encoded = NULL;
    if (!name_bytes) { /* surrogates: the bytes they stand for (surrogateescape) */
        PyErr_Clear();
        encoded = PyUnicode_AsEncodedString(name, "utf-8", "surrogateescape");
        if (!encoded) { PyErr_Clear(); return 0; }
        name_bytes = PyBytes_AS_STRING(encoded);
        name_len = PyBytes_GET_SIZE(encoded);
    }
    size_t want = LOCAL_HEADER_SIZE + (size_t)name_len + (size_t)slack + (size_t)csize;
    int verdict = 0;
    if (grow(&r->block, &r->block_cap, want) < 0) { verdict = -1; goto done; }
    ssize_t got;
    do {
        got = pread(fd, r->block, want, (off_t)offset);
    } while (got < 0 && errno == EINTR);
    if (got < LOCAL_HEADER_SIZE || memcmp(r->block, "PK\x03\x04", 4)) goto done;
    uint64_t local_name = u16(r->block + 26), local_extra = u16(r->block + 28);
    uint64_t start = LOCAL_HEADER_SIZE + local_name + local_extra, end = start + (uint64_t)csize;
    if (local_name != (uint64_t)name_len || LOCAL_HEADER_SIZE + local_name > (uint64_t)got ||
        memcmp(r->block + LOCAL_HEADER_SIZE, name_bytes, (size_t)name_len))
        goto done;
    if (end > (uint64_t)got || (uint64_t)offset > archive_size || end > archive_size - (uint64_t)offset)
        goto done;
    const unsigned char *bytes;
    if (method == 0) {
        if (csize != size) goto done;
        bytes = r->block + start;
    } else {
        if (grow(&r->out, &r->out_cap, (size_t)size + 1) < 0) { verdict = -1; goto done; }
        if (!r->z_ready) {
            memset(&r->z, 0, sizeof r->z);
            if (inflateInit2(&r->z, -MAX_WBITS) != Z_OK) { PyErr_NoMemory(); verdict = -1; goto done; }
            r->z_ready = 1;
        } else if (inflateReset(&r->z) != Z_OK) {
            goto done;
        }
        r->z.next_in = r->block + start;
        r->z.avail_in = (uInt)csize;
        r->z.next_out = r->out;
        r->z.avail_out = (uInt)size + 1;
        /* The stream must end, having made exactly the declared size; bytes after its end are
         * allowed, as zlib's decompressobj keeps them as unused_data. */
        if (inflate(&r->z, Z_FINISH) != Z_STREAM_END || r->z.total_out != (uLong)size) goto done;
        bytes = r->out;
    }
    if (crc32(0L, bytes, (uInt)size) != (uLong)crc) goto done;
    *data = bytes;
    *n = (uint64_t)size;
    verdict = 1;
done:
    Py_XDECREF(encoded);
    return verdict;
}

/* layout.sniff: whether the scan reads these bytes at all (ELF, ar, a fatbin). */
static int binary_kind(const unsigned char *p, uint64_t n) {
    if (n >= 4 && !memcmp(p, ELF_MAGIC, 4)) return 1;
    if (n >= 8 && (!memcmp(p, "!<arch>\n", 8) || !memcmp(p, "!<thin>\n", 8))) return 1;
    if (n >= 4 && !memcmp(p, CONTAINER_MAGIC, 4)) return 2;
    return 0;
}

static PyObject *scan_members(PyObject *self, PyObject *args) {
    int fd;
    unsigned long long archive_size, small_max, slack;
    PyObject *members;
    Bounds b;
    if (!PyArg_ParseTuple(args, "iKOKKnnnn", &fd, &archive_size, &members, &small_max, &slack,
                          &b.max_containers, &b.max_per_container, &b.max_entries, &b.max_raw_cubins))
        return NULL;
    if (!entry_type) {
        PyErr_SetString(PyExc_RuntimeError, "configure() first");
        return NULL;
    }
    if (small_max > (1u << 24) || slack > (1u << 16)) {
        PyErr_SetString(PyExc_ValueError, "small members are at most 16 MiB, slack at most 64 KiB");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(members, "members must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *result = PyList_New(count);
    Reader r;
    memset(&r, 0, sizeof r);
    for (Py_ssize_t i = 0; result && i < count; i++) {
        PyObject *member = items[i], *answer = NULL;
        if (!PyTuple_Check(member) || PyTuple_GET_SIZE(member) < 7) {
            PyErr_SetString(PyExc_TypeError, "a member is a (name, size, compressed size, method, crc, "
                                             "offset, header name) tuple");
            Py_CLEAR(result);
            break;
        }
        const unsigned char *data = NULL;
        uint64_t n = 0;
        int read = read_member(&r, fd, archive_size, member, small_max, slack, &data, &n);
        if (read < 0) { Py_CLEAR(result); break; }
        if (read == 0) {
            answer = Py_None; /* left: the Python path reads it and says why */
            Py_INCREF(answer);
        } else {
            int kind = binary_kind(data, n);
            if (kind == 0) {
                answer = Py_False; /* no binary: nothing to scan */
                Py_INCREF(answer);
            } else {
                answer = kind == 1 ? scan_buffer(data, n, &b) : (Py_INCREF(Py_None), Py_None);
                if (answer == Py_None) { /* read, but the Python scan reads the bytes */
                    Py_DECREF(answer);
                    answer = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)n);
                }
            }
        }
        if (!answer) { Py_CLEAR(result); break; }
        PyList_SET_ITEM(result, i, answer);
    }
    if (r.z_ready) inflateEnd(&r.z);
    PyMem_Free(r.block);
    PyMem_Free(r.out);
    Py_DECREF(seq);
    return result;
}

/* ---- A zip's central directory, when it is plain -----------------------------------------
 *
 * zipread.WheelReader reads a wheel's directory with CPython's zipfile, then checks every
 * member (its name, flags, overlaps, duplicates). This reads the directory bytes the end
 * record points at and answers only for a plain one, where zipfile (3.10 on) reads exactly
 * these fields and the checks find nothing: every record whole and in place, the records
 * filling the directory exactly, names that decode (UTF-8 where flag 0x800 says so, else
 * cp437, as zipfile decodes them) and hold no NUL (zipfile would cut them), no zip64 field or
 * sentinel, no extra field of a kind zipfile interprets,
 * an extract version zipfile reads, no encrypted or patched member, no unsafe or duplicate
 * name, no member overlapping the next or the directory. Anything else: None, and zipfile
 * reads the archive as before. */

#define CENTRAL_SIZE 46

typedef struct {
    uint64_t offset, end;
    Py_ssize_t index;
} Span;

static int by_span_offset(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* What zipread.unsafe_name_reason refuses: text is the name decoded, name its bytes (where
 * '/', '\\' and '.' are those characters in UTF-8 and cp437 alike). */
static int unsafe_name(PyObject *text, const unsigned char *name, uint64_t n) {
    Py_UCS4 first = PyUnicode_READ_CHAR(text, 0);
    if (first == '/' || first == '\\') return 1;
    if (PyUnicode_GET_LENGTH(text) > 1 && PyUnicode_READ_CHAR(text, 1) == ':') return 1;
    uint64_t part = 0; /* the start of the current component ('/' and '\\' both divide) */
    for (uint64_t i = 0; i <= n; i++) {
        if (i == n || name[i] == '/' || name[i] == '\\') {
            if (i - part == 2 && name[part] == '.' && name[part + 1] == '.') return 1;
            part = i + 1;
        }
    }
    return 0;
}

/* What zipread.unsafe_name_reason refuses, for a name known only as text (a Unicode Path). */
static int unsafe_text(PyObject *text) {
    PyObject *bytes = PyUnicode_AsUTF8String(text);
    if (!bytes) { PyErr_Clear(); return 1; }
    int unsafe = unsafe_name(text, (const unsigned char *)PyBytes_AS_STRING(bytes), (uint64_t)PyBytes_GET_SIZE(bytes));
    Py_DECREF(bytes);
    return unsafe;
}

/* Extra fields as zipfile reads them: a sequence of (kind, length) blocks, which must fill the
 * field exactly here. zipfile interprets two kinds. Zip64 sizes and offsets (0x0001, every
 * version) leave the directory to zipfile. The Info-ZIP Unicode Path (0x7075) renames the
 * member where this Python's zipfile reads it (unicode_path: 3.12 on) and its version is 1 and
 * its CRC that of the name's bytes: *renamed is then that name (a new reference), and anything
 * zipfile would fail or warn on leaves it. Every other kind (timestamps, Unix owners, NTFS
 * times, alignment padding ...) only adds to a member's metadata, which nothing here reads.
 * 1: plain; 0: left; -1: an exception is set. */
static int plain_extra(const unsigned char *p, uint64_t n, int unicode_path, const unsigned char *name,
                       uint64_t nlen, PyObject **renamed) {
    while (n >= 4) {
        uint16_t tp = u16(p), ln = u16(p + 2);
        if ((uint64_t)ln + 4 > n) return 0;
        if (tp == 0x0001) return 0;
        if (tp == 0x7075 && unicode_path) {
            if (ln < 5) return 0; /* zipfile: "Corrupt unicode path extra field" */
            if (p[4] == 1 && u32(p + 5) == (uint32_t)crc32(0L, name, (uInt)nlen)) {
                PyObject *text = PyUnicode_DecodeUTF8((const char *)p + 9, (Py_ssize_t)ln - 5, "strict");
                if (!text) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
                    PyErr_Clear();
                    return 0;
                }
                if (!PyUnicode_GET_LENGTH(text) || PyUnicode_FindChar(text, 0, 0, PyUnicode_GET_LENGTH(text), 1) != -1) {
                    Py_DECREF(text); /* empty: a warning; a NUL: cut short */
                    return 0;
                }
                Py_XSETREF(*renamed, text); /* the last such field names it */
            }
        }
        p += 4 + ln;
        n -= 4 + (uint64_t)ln;
    }
    return n == 0;
}

static PyObject *plain_directory(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long start_dir, concat, archive_size;
    PyObject *member_type;
    int unicode_path;
    Py_ssize_t entries; /* as the end record declares: more or fewer records are not plain */
    if (!PyArg_ParseTuple(args, "y*KKKOpn", &view, &start_dir, &concat, &archive_size, &member_type,
                          &unicode_path, &entries))
        return NULL;
    if (!PyType_Check(member_type) || !PyType_IsSubtype((PyTypeObject *)member_type, &PyTuple_Type)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "the member type must be a tuple subclass");
        return NULL;
    }
    const unsigned char *buf = view.buf;
    uint64_t len = (uint64_t)view.len, pos = 0, declared = 0;
    Span *spans = NULL;
    Py_ssize_t nspans = 0, cap = 0;
    PyObject *members = PyList_New(0), *names = PySet_New(NULL), *result = NULL;
    int status = members && names ? OK : ERR;
    while (status == OK && pos < len) {
        const unsigned char *r = buf + pos;
        if (len - pos < CENTRAL_SIZE || memcmp(r, "PK\x01\x02", 4) || nspans >= entries) {
            status = LEAVE;
            break;
        }
        uint16_t flags = u16(r + 8), method = u16(r + 10);
        uint32_t crc = u32(r + 16), csize = u32(r + 20), usize = u32(r + 24), offset = u32(r + 42);
        uint64_t nlen = u16(r + 28), xlen = u16(r + 30), clen = u16(r + 32);
        if (r[6] > 63 || CENTRAL_SIZE + nlen + xlen + clen > len - pos) { status = LEAVE; break; }
        if (csize == 0xFFFFFFFFu || usize == 0xFFFFFFFFu || offset == 0xFFFFFFFFu) { status = LEAVE; break; }
        if (flags & (0x1 | 0x20 | 0x40)) { status = LEAVE; break; } /* encrypted, patched */
        const unsigned char *name = r + CENTRAL_SIZE;
        if (nlen == 0 || memchr(name, 0, nlen)) { status = LEAVE; break; }
        PyObject *renamed = NULL;
        int extra = plain_extra(name + nlen, xlen, unicode_path, name, nlen, &renamed);
        if (extra <= 0) { Py_XDECREF(renamed); status = extra < 0 ? ERR : LEAVE; break; }
        int ascii = 1;
        for (uint64_t i = 0; i < nlen && ascii; i++) ascii = name[i] < 0x80;
        PyObject *text = ascii ? PyUnicode_DecodeASCII((const char *)name, (Py_ssize_t)nlen, "strict")
                         : PyUnicode_Decode((const char *)name, (Py_ssize_t)nlen,
                                            flags & 0x800 ? "utf-8" : "cp437", "strict");
        if (!text) { /* zipfile fails on it too (bad UTF-8): its message, not ours */
            Py_XDECREF(renamed);
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { status = ERR; break; }
            PyErr_Clear();
            status = LEAVE;
            break;
        }
        PyObject *called = renamed ? renamed : text; /* what zipfile names it */
        if (unsafe_name(text, name, nlen) || (renamed && unsafe_text(renamed))) {
            Py_DECREF(text); Py_XDECREF(renamed); status = LEAVE; break;
        }
        int seen = PySet_Contains(names, called);
        if (seen != 0 || PySet_Add(names, called) < 0) {
            Py_DECREF(text);
            Py_XDECREF(renamed);
            status = seen > 0 ? LEAVE : ERR;
            break;
        }
        if (nspans == cap) {
            Py_ssize_t grown_cap = cap ? 2 * cap : 64;
            Span *grown = PyMem_Realloc(spans, (size_t)grown_cap * sizeof(Span));
            if (!grown) { Py_DECREF(text); Py_XDECREF(renamed); PyErr_NoMemory(); status = ERR; break; }
            spans = grown;
            cap = grown_cap;
        }
        uint64_t at = (uint64_t)offset + concat; /* concat < 2^63: no wrap */
        spans[nspans].offset = at;
        spans[nspans].end = at + 30 + nlen + csize; /* header, name, data */
        spans[nspans].index = nspans;
        nspans++;
        declared += usize;
        if (PyUnicode_READ_CHAR(called, PyUnicode_GET_LENGTH(called) - 1) == '/') {
            Py_DECREF(text); /* a folder: not a member to read */
            Py_XDECREF(renamed);
        } else {
            if (!renamed) Py_INCREF(text); /* the name and the header name: one string */
            PyObject *items[7] = {called, PyLong_FromUnsignedLong(usize), PyLong_FromUnsignedLong(csize),
                                  PyLong_FromUnsignedLong(method), PyLong_FromUnsignedLong(crc),
                                  PyLong_FromUnsignedLongLong(at), text};
            PyObject *member = named(member_type, items, 7);
            if (!member || PyList_Append(members, member) < 0) { Py_XDECREF(member); status = ERR; break; }
            Py_DECREF(member);
        }
        pos += CENTRAL_SIZE + nlen + xlen + clen;
    }
    if (status == OK && nspans != entries) status = LEAVE;
    if (status == OK) { /* zipread.overlaps finds nothing */
        if (nspans > 1) qsort(spans, (size_t)nspans, sizeof(Span), by_span_offset);
        for (Py_ssize_t i = 0; i < nspans; i++) {
            if (i + 1 < nspans && spans[i + 1].offset < spans[i].end) { status = LEAVE; break; }
            if (spans[i].offset < start_dir && start_dir < spans[i].end && spans[i].end <= archive_size) {
                status = LEAVE;
                break;
            }
        }
    }
    if (status == OK) result = Py_BuildValue("(OK)", members, (unsigned long long)declared);
    else if (status == LEAVE) { result = Py_None; Py_INCREF(result); }
    Py_XDECREF(members);
    Py_XDECREF(names);
    PyMem_Free(spans);
    PyBuffer_Release(&view);
    return result;
}

/* ---- The magics of a streamed chunk -----------------------------------------------------
 *
 * scan_stream searches every chunk of a big binary for the container magic and the ELF magic
 * (each hit is a candidate it then reads in Python). One pass finds both: at each position the
 * first and last byte of either magic are compared 16 positions at a time (SSE2, the x86-64
 * baseline), and each position where a pair agrees is confirmed byte by byte; elsewhere memmem
 * twice. The offsets come back in increasing order, as re.finditer gives them. */

static int append_offset(PyObject *list, Py_ssize_t at) {
    PyObject *v = PyLong_FromSsize_t(at);
    if (!v) return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__SSE2__) || (defined(__x86_64__) && defined(__GNUC__))
/* Each set bit of mask is a candidate at buf + i + bit (first and last byte of the magic
 * matched): confirm the whole magic and append its offset. */
static inline int drain_hits(unsigned mask, const unsigned char *buf, Py_ssize_t i, const unsigned char *magic,
                      PyObject *offsets) {
    while (mask) {
        Py_ssize_t at = i + __builtin_ctz(mask);
        mask &= mask - 1;
        if (memcmp(buf + at, magic, 4) == 0 && append_offset(offsets, at) < 0) return -1;
    }
    return 0;
}
#endif

/* The hits among the 32 positions from buf + i (AVX2, chosen at run time where the CPU has it). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
__attribute__((target("avx2"))) static Py_ssize_t magic_hits_avx2(const unsigned char *buf, Py_ssize_t len,
                                                                  PyObject *containers, PyObject *elves) {
    Py_ssize_t i = 0;
    const __m256i c0 = _mm256_set1_epi8((char)CONTAINER_MAGIC[0]), c3 = _mm256_set1_epi8((char)CONTAINER_MAGIC[3]);
    const __m256i e0 = _mm256_set1_epi8((char)ELF_MAGIC[0]), e3 = _mm256_set1_epi8((char)ELF_MAGIC[3]);
    for (; i + 35 <= len; i += 32) {
        __m256i first = _mm256_loadu_si256((const __m256i *)(buf + i));
        __m256i last = _mm256_loadu_si256((const __m256i *)(buf + i + 3));
        unsigned mask_c = (unsigned)_mm256_movemask_epi8(
            _mm256_and_si256(_mm256_cmpeq_epi8(first, c0), _mm256_cmpeq_epi8(last, c3)));
        unsigned mask_e = (unsigned)_mm256_movemask_epi8(
            _mm256_and_si256(_mm256_cmpeq_epi8(first, e0), _mm256_cmpeq_epi8(last, e3)));
        if ((mask_c && drain_hits(mask_c, buf, i, CONTAINER_MAGIC, containers) < 0) ||
            (mask_e && drain_hits(mask_e, buf, i, ELF_MAGIC, elves) < 0))
            return -1;
    }
    return i;
}
#endif

static int magic_hits(const unsigned char *buf, Py_ssize_t len, PyObject *containers,
                      PyObject *elves) {
    Py_ssize_t i = 0;
#if defined(HAVE_AVX2_PATH)
    if (__builtin_cpu_supports("avx2")) {
        i = magic_hits_avx2(buf, len, containers, elves);
        if (i < 0) return -1;
    }
#endif
#if defined(__SSE2__)
    const __m128i c0 = _mm_set1_epi8((char)CONTAINER_MAGIC[0]), c3 = _mm_set1_epi8((char)CONTAINER_MAGIC[3]);
    const __m128i e0 = _mm_set1_epi8((char)ELF_MAGIC[0]), e3 = _mm_set1_epi8((char)ELF_MAGIC[3]);
    for (; i + 19 <= len; i += 16) {
        __m128i first = _mm_loadu_si128((const __m128i *)(buf + i));
        __m128i last = _mm_loadu_si128((const __m128i *)(buf + i + 3));
        __m128i hit_c = _mm_and_si128(_mm_cmpeq_epi8(first, c0), _mm_cmpeq_epi8(last, c3));
        __m128i hit_e = _mm_and_si128(_mm_cmpeq_epi8(first, e0), _mm_cmpeq_epi8(last, e3));
        unsigned mask_c = (unsigned)_mm_movemask_epi8(hit_c);
        unsigned mask_e = (unsigned)_mm_movemask_epi8(hit_e);
        if ((mask_c && drain_hits(mask_c, buf, i, CONTAINER_MAGIC, containers) < 0) ||
            (mask_e && drain_hits(mask_e, buf, i, ELF_MAGIC, elves) < 0))
            return -1;
    }
#endif
    /* The rest (all of it without SSE2): each magic by memmem from i, in order. */
    const unsigned char *found;
    for (Py_ssize_t at = i; at + 4 <= len && (found = memmem(buf + at, (size_t)(len - at), CONTAINER_MAGIC, 4));) {
        at = (Py_ssize_t)(found - buf);
        if (append_offset(containers, at) < 0) return -1;
        at += 1;
    }
    for (Py_ssize_t at = i; at + 4 <= len && (found = memmem(buf + at, (size_t)(len - at), ELF_MAGIC, 4));) {
        at = (Py_ssize_t)(found - buf);
        if (append_offset(elves, at) < 0) return -1;
        at += 1;
    }
    return 0;
}

static PyObject *find_magics(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    PyObject *containers = PyList_New(0), *elves = PyList_New(0), *result = NULL;
    if (containers && elves && magic_hits(view.buf, view.len, containers, elves) == 0)
        result = PyTuple_Pack(2, containers, elves);
    Py_XDECREF(containers);
    Py_XDECREF(elves);
    PyBuffer_Release(&view);
    return result;
}

/* ---- The allocator of a scanning process ----------------------------------------------------
 *
 * A streamed member arrives as inflated chunks of a few MiB, each a new bytes object made while
 * the one before is still held (the stream keeps its window). glibc's malloc gives such blocks
 * back to the kernel when they are freed at the top of the heap (its trim threshold follows the
 * block size), so every chunk is faulted in again, page by page: a quarter of the inflate's time
 * on torch's libraries (docs/maintainers/performance.md, "Audit"). A process that only scans (a forked
 * worker) keeps them instead. */

#if defined(__GLIBC__)
#include <malloc.h>
#endif

static PyObject *retain_freed_memory(PyObject *self, PyObject *args) {
    Py_ssize_t mmap_threshold, trim_threshold;
    if (!PyArg_ParseTuple(args, "nn", &mmap_threshold, &trim_threshold)) return NULL;
#if defined(__GLIBC__)
    if (mmap_threshold > 0 && mmap_threshold <= INT32_MAX && trim_threshold > 0 &&
        trim_threshold <= INT32_MAX && mallopt(M_MMAP_THRESHOLD, (int)mmap_threshold) &&
        mallopt(M_TRIM_THRESHOLD, (int)trim_threshold))
        Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

/* What such a process retains grows: ISA-L's inflater (python-isal 1.9) leaves the heap
 * fragmented, every freed hole kept, about 70 MB over libtorch_cuda.so's 480 MB (stdlib zlib
 * under the same loop: none; malloc_trim gives it all back: measured, docs/maintainers/performance.md).
 * The worker gives its free pages back now and then (trim_freed_memory), not per chunk. */
static PyObject *trim_freed_memory(PyObject *self, PyObject *unused) {
#if defined(__GLIBC__)
    if (malloc_trim(0)) Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *e, *c, *d, *o;
    if (!PyArg_ParseTuple(args, "OOOO", &e, &c, &d, &o)) return NULL;
    if (!PyType_Check(e) || !PyType_IsSubtype((PyTypeObject *)e, &PyTuple_Type) || !PyType_Check(c) ||
        !PyType_IsSubtype((PyTypeObject *)c, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the entry and container types must be tuple subclasses");
        return NULL;
    }
    Py_INCREF(e); Py_INCREF(c); Py_INCREF(d); Py_INCREF(o);
    Py_XSETREF(entry_type, e);
    Py_XSETREF(container_type, c);
    Py_XSETREF(describe, d);
    Py_XSETREF(origin_fatbin, o);
    if (!describe_cache && !(describe_cache = PyDict_New())) return NULL;
    PyDict_Clear(describe_cache);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(entry_type, container_type, describe, origin): the model the scan returns."},
    {"scan_whole", scan_whole, METH_VARARGS,
     "scan_whole(data, max_containers, max_entries_per_container, max_entries, max_raw_cubins)\n"
     "-> [(unit name, file kind, size, containers, entries)] | None: a whole ELF64\n"
     "binary or ar archive, when the Python scan would report exactly that and no problem."},
    {"plain_directory", plain_directory, METH_VARARGS,
     "plain_directory(directory, start_dir, concat, archive_size, member_type, unicode_path,\n"
     "entries)\n"
     "-> ([member], declared) | None:\n"
     "a zip's central directory, when zipfile would read exactly these members and\n"
     "zipread.WheelReader's checks would find nothing; None for anything else."},
    {"scan_members", scan_members, METH_VARARGS,
     "scan_members(fd, archive_size, members, small_max, slack, max_containers,\n"
     "max_entries_per_container, max_entries, max_raw_cubins) -> [None | False | bytes | units]:\n"
     "small wheel members read, inflated and scanned; None: left to the Python path, False:\n"
     "no binary, bytes: read whole for the Python scan, units: as scan_whole's."},
    {"retain_freed_memory", retain_freed_memory, METH_VARARGS,
     "retain_freed_memory(mmap_threshold, trim_threshold) -> bool: glibc's malloc serves blocks\n"
     "below mmap_threshold from its heap and keeps up to trim_threshold freed bytes there (for\n"
     "a process that only scans); False where that cannot be set."},
    {"trim_freed_memory", trim_freed_memory, METH_NOARGS,
     "trim_freed_memory() -> bool: glibc's malloc gives the free pages of its heap back to the\n"
     "kernel (malloc_trim); False where nothing was given back or the C library is not glibc."},
    {"find_magics", find_magics, METH_VARARGS,
     "find_magics(chunk) -> (container magic offsets, ELF magic offsets): every occurrence of\n"
     "each magic in the chunk, in increasing order, as re.finditer finds them (neither\n"
     "magic can overlap itself)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "archwheel.binary._speedups",
                                    "The scan of a whole, clean ELF64 binary or ar archive in C (an accelerator).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__speedups(void) {
    static const char *names[6] = {"", "relocatable", "executable", "shared-object", "core", "unknown-elf"};
    for (int i = 0; i < 6; i++)
        if (!kind_names[i] && !(kind_names[i] = PyUnicode_InternFromString(names[i]))) return NULL;
    return PyModule_Create(&module);
}
