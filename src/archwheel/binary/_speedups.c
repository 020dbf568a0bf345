/* archwheel.binary._speedups: the scan of one whole, clean ELF64 binary in one call.
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
#define _GNU_SOURCE
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    PyObject *label;    /* borrowed from labels */
    Py_ssize_t acc_first, acc_count; /* the accepted containers it holds (index sections) */
} Sect;

typedef struct {
    uint64_t offset, end; /* the container: its header offset and the end it declares */
    Py_ssize_t first, count; /* its entries in the entry arrays */
    int error;               /* a header that failed, or the walk stopped early */
} Scan;

typedef struct {
    uint64_t offset;
    unsigned char *header; /* points into the buffer: 64 bytes */
} Raw;

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

/* A tuple subclass instance (a NamedTuple of the model) holding items, stolen. */
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

#define FALLBACK() do { result = Py_None; Py_INCREF(result); goto done; } while (0)
#define FAIL() do { result = NULL; goto done; } while (0)

static PyObject *scan_elf(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t max_containers, max_per_container, max_entries, max_raw_cubins;
    if (!PyArg_ParseTuple(args, "y*nnnn", &view, &max_containers, &max_per_container,
                          &max_entries, &max_raw_cubins))
        return NULL;
    const unsigned char *buf = view.buf;
    uint64_t len = (uint64_t)view.len;
    PyObject *result = NULL, *labels = NULL, *containers = NULL, *entries = NULL;
    Sect *sects = NULL;
    Sect **kept = NULL;
    Scan *scans = NULL;
    uint64_t *errors = NULL, *elf_hits = NULL;
    uint64_t *acc_off = NULL, *acc_end = NULL, *acc_prefix = NULL; /* accepted containers */
    Py_ssize_t nacc = 0;
    Py_ssize_t nscans = 0, nerrors = 0, nelf = 0, nkept = 0;
    uint64_t *entry_at = NULL; /* each walked entry's offset */
    Py_ssize_t nentries = 0;

    if (!entry_type) { PyErr_SetString(PyExc_RuntimeError, "configure() first"); goto done; }
    /* The ELF header: 64-bit little-endian, no CUDA machine, a section table in the file. */
    if (len < 64 || memcmp(buf, ELF_MAGIC, 4) || buf[4] != 2 || buf[5] != 1) FALLBACK();
    uint16_t e_type = u16(buf + 16), e_machine = u16(buf + 18);
    uint64_t phoff = u64(buf + 32), shoff = u64(buf + 40);
    uint16_t phentsize = u16(buf + 54), phnum = u16(buf + 56);
    uint16_t shentsize = u16(buf + 58), shnum = u16(buf + 60), shstrndx = u16(buf + 62);
    if (e_machine == EM_CUDA) FALLBACK();
    if (shoff && shentsize != 64) FALLBACK();
    int interp = 0;
    if (e_type == 3 && phnum > 0 && phnum <= 4096 && phoff < len && phentsize >= 4) {
        uint64_t have = len - phoff, want = (uint64_t)phnum * phentsize;
        if (have > want) have = want;
        for (uint64_t i = 0; i < phnum && i < have / phentsize; i++)
            if (u32(buf + phoff + i * phentsize) == PT_INTERP) { interp = 1; break; }
    }
    if (shoff == 0 || shoff >= len) FALLBACK();
    if (shnum == 0 || shstrndx == 0xFFFF) FALLBACK(); /* extended numbering */
    if ((uint64_t)shnum * 64 > len - shoff) FALLBACK();
    if (!(shstrndx > 0 && shstrndx < shnum)) FALLBACK();
    const unsigned char *table = buf + shoff;
    const unsigned char *strtab = table + (uint64_t)shstrndx * 64;
    uint64_t names_at = u64(strtab + 24), names_len = u64(strtab + 32);
    if (names_at >= len) FALLBACK();
    if (names_len > MAX_SHSTRTAB) names_len = MAX_SHSTRTAB;
    if (names_len > len - names_at) names_len = len - names_at;
    const unsigned char *names = buf + names_at;

    /* The sections, named as elf.name_sections names them (each name offset decoded once). */
    sects = PyMem_Calloc(shnum, sizeof(Sect));
    kept = PyMem_Calloc(shnum, sizeof(Sect *));
    labels = PyDict_New();
    if (!sects || !kept || !labels) { PyErr_NoMemory(); FAIL(); }
    Py_ssize_t nsects = 0;
    for (Py_ssize_t i = 0; i < shnum; i++) {
        const unsigned char *r = table + i * 64;
        uint32_t name_off = u32(r), type = u32(r + 4);
        uint64_t offset = u64(r + 24), size = u64(r + 32);
        if (type != SHT_NOBITS && (offset > len || size > len - offset)) FALLBACK(); /* past the end */
        if (!size) continue;
        if (name_off >= names_len) FALLBACK(); /* "<section i>": left to the Python scan */
        PyObject *key = PyLong_FromUnsignedLong(name_off);
        if (!key) FAIL();
        PyObject *label = PyDict_GetItemWithError(labels, key);
        int fatbin = 0;
        uint64_t stop = names_len - name_off < MAX_NAME ? names_len : name_off + MAX_NAME;
        const unsigned char *start = names + name_off;
        const unsigned char *nul = memchr(start, 0, stop - name_off);
        uint64_t n = nul ? (uint64_t)(nul - start) : stop - name_off;
        if ((n == 10 && !memcmp(start, ".nv_fatbin", 10)) || (n == 14 && !memcmp(start, "__nv_relfatbin", 14)))
            fatbin = 1;
        if ((n == 8 && !memcmp(start, "(fatbin)", 8)) || (n == 12 && !memcmp(start, "(no section)", 12))) {
            Py_DECREF(key);
            FALLBACK(); /* a name the scan gives a meaning of its own */
        }
        if (!label) {
            if (PyErr_Occurred()) { Py_DECREF(key); FAIL(); }
            label = PyUnicode_DecodeUTF8((const char *)start, (Py_ssize_t)n, "replace");
            if (!label || PyDict_SetItem(labels, key, label) < 0) { Py_XDECREF(label); Py_DECREF(key); FAIL(); }
            Py_DECREF(label); /* labels holds it */
        }
        Py_DECREF(key);
        Sect *s = &sects[nsects++];
        s->offset = offset;
        s->size = size;
        s->end = offset + size; /* NOBITS sections may lie past the file; never read */
        if (type == SHT_NOBITS && (offset > UINT64_MAX - size)) FALLBACK();
        s->type = type;
        s->index = i;
        s->fatbin = fatbin;
        s->label = label;
    }
    /* The section index: sections with bytes in the file, by offset (larger first), none
     * overlapping one kept before it (layout.Unit._section_index). */
    Py_ssize_t nfile = 0;
    for (Py_ssize_t i = 0; i < nsects; i++)
        if (sects[i].type != SHT_NOBITS) kept[nfile++] = &sects[i];
    qsort(kept, (size_t)nfile, sizeof(Sect *), by_offset_then_size);
    for (Py_ssize_t i = 0; i < nfile; i++)
        if (!nkept || kept[i]->offset >= kept[nkept - 1]->end) kept[nkept++] = kept[i];

    /* Every container magic, walked as scan_stream walks it. */
    Py_ssize_t cap_scans = 16, cap_errors = 16, cap_entries = 64, cap_elf = 16;
    scans = PyMem_Malloc(cap_scans * sizeof(Scan));
    errors = PyMem_Malloc(cap_errors * sizeof(uint64_t));
    entry_at = PyMem_Malloc(cap_entries * sizeof(uint64_t));
    elf_hits = PyMem_Malloc(cap_elf * sizeof(uint64_t));
    if (!scans || !errors || !entry_at || !elf_hits) { PyErr_NoMemory(); FAIL(); }
    Py_ssize_t candidates = 0;
    const unsigned char *cursor = buf;
    while ((cursor = memmem(cursor, len - (uint64_t)(cursor - buf), CONTAINER_MAGIC, 4))) {
        uint64_t at = (uint64_t)(cursor - buf);
        cursor += 4;
        if (++candidates > max_containers) FALLBACK();
        int64_t size = container_size(buf, len, at);
        if (size == -1) {
            if (nerrors == cap_errors) {
                cap_errors *= 2;
                uint64_t *grown = PyMem_Realloc(errors, cap_errors * sizeof(uint64_t));
                if (!grown) { PyErr_NoMemory(); FAIL(); }
                errors = grown;
            }
            errors[nerrors++] = at;
            continue;
        }
        if (size < 0 || (uint64_t)size > len - at - 16) FALLBACK(); /* the file ends inside it */
        uint64_t end = at + 16 + (uint64_t)size, position = at + 16;
        if (nscans == cap_scans) {
            cap_scans *= 2;
            Scan *grown = PyMem_Realloc(scans, cap_scans * sizeof(Scan));
            if (!grown) { PyErr_NoMemory(); FAIL(); }
            scans = grown;
        }
        Scan *sc = &scans[nscans++];
        sc->offset = at;
        sc->end = end;
        sc->first = nentries;
        sc->count = 0;
        sc->error = 0;
        while (position < end) {
            if (end - position < ENTRY_HEADER_MIN) FALLBACK(); /* a header past the container */
            if (!entry_ok(buf + position, position, end)) { sc->error = 1; break; }
            if (sc->count >= max_per_container || nentries >= max_entries) FALLBACK();
            if (nentries == cap_entries) {
                cap_entries *= 2;
                uint64_t *grown = PyMem_Realloc(entry_at, cap_entries * sizeof(uint64_t));
                if (!grown) { PyErr_NoMemory(); FAIL(); }
                entry_at = grown;
            }
            entry_at[nentries++] = position;
            sc->count++;
            position += u32(buf + position + 4) + u64(buf + position + 8);
        }
    }
    /* Every embedded ELF magic: a raw cubin candidate. */
    Py_ssize_t elf_candidates = 0;
    cursor = buf + 1;
    while (len > 1 && (cursor = memmem(cursor, len - (uint64_t)(cursor - buf), ELF_MAGIC, 4))) {
        uint64_t at = (uint64_t)(cursor - buf);
        cursor += 4;
        if (++elf_candidates > max_raw_cubins) FALLBACK();
        if (!embedded_cubin(buf, len, at)) continue;
        if (nelf == cap_elf) {
            cap_elf *= 2;
            uint64_t *grown = PyMem_Realloc(elf_hits, cap_elf * sizeof(uint64_t));
            if (!grown) { PyErr_NoMemory(); FAIL(); }
            elf_hits = grown;
        }
        elf_hits[nelf++] = at;
    }

    /* Assembly, as scan/binary._assemble: containers in offset order, none inside one taken. */
    containers = PyList_New(0);
    entries = PyList_New(0);
    acc_off = PyMem_Malloc((nscans + 1) * sizeof(uint64_t));
    acc_end = PyMem_Malloc((nscans + 1) * sizeof(uint64_t));
    acc_prefix = PyMem_Malloc((nscans + 1) * sizeof(uint64_t));
    if (!containers || !entries) FAIL();
    if (!acc_off || !acc_end || !acc_prefix) { PyErr_NoMemory(); FAIL(); }
    acc_prefix[0] = 0;
    uint64_t accepted_end = 0;
    int any_accepted = 0;
    Py_ssize_t elf_next = 0;
    for (Py_ssize_t i = 0; i < nscans; i++) {
        Scan *sc = &scans[i];
        if (any_accepted && sc->offset < accepted_end) continue;
        Sect *s = section_at(kept, nkept, sc->offset);
        if (sc->error) {
            if (sc->count || (s && s->fatbin)) FALLBACK(); /* a damaged container: a problem */
            continue; /* random bytes that happened to hold the magic */
        }
        uint64_t limit = s ? s->end : len;
        if (sc->end > limit) FALLBACK();
        /* An embedded cubin header before this container and after the last: not inside any
         * container, so the Python scan would read it. */
        while (elf_next < nelf && elf_hits[elf_next] < sc->offset) {
            if (!any_accepted || elf_hits[elf_next] >= accepted_end) FALLBACK();
            elf_next++;
        }
        while (elf_next < nelf && elf_hits[elf_next] < sc->end) elf_next++; /* inside: data */
        PyObject *name = s ? s->label : NULL;
        if (!name) FALLBACK(); /* "(no section)": left to the Python scan */
        PyObject *kept_entries = PyTuple_New(sc->count);
        if (!kept_entries) FAIL();
        for (Py_ssize_t j = 0; j < sc->count; j++) {
            uint64_t at = entry_at[sc->first + j];
            if (u64(buf + at + 40) & ~KNOWN_FLAGS) { Py_DECREF(kept_entries); FALLBACK(); }
            PyObject *e = make_entry(buf + at, at, name);
            if (!e) { Py_DECREF(kept_entries); FAIL(); }
            PyTuple_SET_ITEM(kept_entries, j, e);
            if (PyList_Append(entries, e) < 0) { Py_DECREF(kept_entries); FAIL(); }
        }
        PyObject *items[4];
        Py_INCREF(name);
        items[0] = name;
        items[1] = PyLong_FromUnsignedLongLong(sc->offset);
        items[2] = PyLong_FromUnsignedLongLong(sc->end - sc->offset);
        items[3] = kept_entries;
        PyObject *c = named(container_type, items, 4);
        if (!c) FAIL();
        int appended = PyList_Append(containers, c);
        Py_DECREF(c);
        if (appended < 0) FAIL();
        accepted_end = sc->end;
        any_accepted = 1;
        if (!s->acc_count) s->acc_first = nacc;
        s->acc_count++;
        acc_off[nacc] = sc->offset;
        acc_end[nacc] = sc->end;
        acc_prefix[nacc + 1] = acc_prefix[nacc] + (sc->end - sc->offset);
        nacc++;
    }
    for (; elf_next < nelf; elf_next++)
        if (!any_accepted || elf_hits[elf_next] >= accepted_end) FALLBACK();
    /* A magic that is no container header, inside a fatbin section: a damaged header. */
    for (Py_ssize_t i = 0; i < nerrors; i++) {
        Sect *s = section_at(kept, nkept, errors[i]);
        if (s && s->fatbin) FALLBACK();
    }
    /* Fatbin sections whose bytes no container explains (scan/binary._uncovered): the
     * containers found in the index section at the same offset, clipped to this one. */
    for (Py_ssize_t i = 0; i < nsects; i++) {
        Sect *f = &sects[i];
        if (!f->fatbin) continue;
        uint64_t covered = 0;
        Sect *k = section_at(kept, nkept, f->offset);
        if (k && k->offset == f->offset && k->acc_count) {
            Py_ssize_t lo = k->acc_first, hi = k->acc_first + k->acc_count;
            while (lo < hi) { /* the first container starting at or after f's end */
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (acc_off[mid] < f->end) lo = mid + 1; else hi = mid;
            }
            covered = acc_prefix[lo] - acc_prefix[k->acc_first];
            if (lo > k->acc_first && acc_end[lo - 1] > f->end) covered -= acc_end[lo - 1] - f->end;
        }
        if (f->size - covered > ALIGNMENT_SLACK) FALLBACK();
    }
    result = Py_BuildValue("(iiOO)", (int)e_type, interp, containers, entries);

done:
    Py_XDECREF(labels);
    Py_XDECREF(containers);
    Py_XDECREF(entries);
    PyMem_Free(sects);
    PyMem_Free(kept);
    PyMem_Free(scans);
    PyMem_Free(errors);
    PyMem_Free(elf_hits);
    PyMem_Free(entry_at);
    PyMem_Free(acc_off);
    PyMem_Free(acc_end);
    PyMem_Free(acc_prefix);
    PyBuffer_Release(&view);
    return result;
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
    {"scan_elf", scan_elf, METH_VARARGS,
     "scan_elf(data, max_containers, max_entries_per_container, max_entries, max_raw_cubins)\n"
     "-> (e_type, has_interpreter, containers, entries) | None: one whole ELF64\n"
     "binary, when the full scan would report exactly that and no problem; else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "archwheel.binary._speedups",
                                    "The scan of a whole, clean ELF64 binary in C (an accelerator).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
