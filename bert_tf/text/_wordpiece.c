/* Native engine of the fast tokenizer: the original BasicTokenizer + WordPiece, driven by tables.
 *
 * Every Unicode decision is made in Python, once per process, by the exact tokenizer's own rules
 * (bert_tf/text/native_wordpiece.py builds the tables from `unicodedata`); this file only walks code
 * points through them and does the greedy longest-match-first WordPiece lookups. Lines whose
 * result would depend on context (with do_lower_case: 'Σ', and the few marks that NFD reorders
 * without stripping them) are flagged and tokenized by the exact Python path instead.
 *
 * The work runs without the GIL, so Python threads tokenize parts of a batch in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Character classes (must match native_wordpiece.py). */
enum {
    C_WORD = 0,      /* part of a word, unchanged */
    C_DROP = 1,      /* removed by the original's cleaning (NUL, U+FFFD, Cc, Cf) */
    C_SPACE = 2,     /* ends a word */
    C_PUNCT = 3,     /* a token of its own */
    C_CJK = 4,       /* a word of its own (its normalised form, when mapped) */
    C_MAPPED = 5,    /* replaced by its normalised form (lower-case, NFD, marks stripped) */
    C_FALLBACK = 6,  /* the line goes to the exact path */
    C_UPPER = 7      /* ASCII A-Z when lower-casing */
};
#define NUM_CODE_POINTS 0x110000
#define PUNCT_BIT 0x80000000u
#define MAX_WORD_CHARS 200

typedef struct {
    uint64_t hash;
    uint32_t offset, length;
    int32_t id;
} Slot;

typedef struct {
    Slot *slots;  /* open addressing, id < 0 marks an empty slot */
    size_t mask;
    char *keys;
    int max_chars;  /* longest key in code points */
} Table;

typedef struct {
    Table head, tail;  /* tokens as they are; "##" tokens without their prefix */
    int32_t unk_id;
    uint8_t classes[NUM_CODE_POINTS];
    uint32_t map_count;
    uint32_t *map_cps;      /* sorted code points of class C_MAPPED / mapped C_CJK */
    uint32_t *map_offsets;  /* map_count + 1 offsets into map_out */
    uint32_t *map_out;      /* normalised code points, PUNCT_BIT set on punctuation */
} Engine;

typedef struct {
    int32_t *data;
    size_t length, capacity;
    int failed;
} IdBuffer;

static uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int count_code_points(const unsigned char *p, size_t n) {
    int count = 0;
    for (size_t i = 0; i < n; i++) count += (p[i] & 0xC0) != 0x80;
    return count;
}

static void table_free(Table *t) {
    free(t->slots);
    free(t->keys);
    memset(t, 0, sizeof(*t));
}

/* Builds a table from (key bytes, id) pairs; keys are copied. Returns -1 when out of memory. */
static int table_build(Table *t, const char **keys, const size_t *lengths, const int32_t *ids, size_t n) {
    size_t size = 16, total = 0;
    while (size < 2 * n + 16) size <<= 1;
    for (size_t i = 0; i < n; i++) total += lengths[i];
    t->slots = malloc(size * sizeof(Slot));
    t->keys = malloc(total + 1);
    if (!t->slots || !t->keys) return -1;
    t->mask = size - 1;
    t->max_chars = 0;
    for (size_t i = 0; i < size; i++) t->slots[i].id = -1;
    size_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *key = (const unsigned char *)keys[i];
        uint64_t h = hash_bytes(key, lengths[i]);
        size_t j = h & t->mask;
        while (t->slots[j].id >= 0) {
            Slot *s = &t->slots[j];
            if (s->hash == h && s->length == lengths[i] && !memcmp(t->keys + s->offset, key, lengths[i])) break;
            j = (j + 1) & t->mask;
        }
        Slot *s = &t->slots[j];
        if (s->id < 0) {  /* a new key; an equal key keeps the later id, as load_vocab does */
            memcpy(t->keys + offset, key, lengths[i]);
            s->hash = h;
            s->offset = (uint32_t)offset;
            s->length = (uint32_t)lengths[i];
            offset += lengths[i];
        }
        s->id = ids[i];
        int chars = count_code_points(key, lengths[i]);
        if (chars > t->max_chars) t->max_chars = chars;
    }
    return 0;
}

static int32_t table_find(const Table *t, const unsigned char *key, size_t n) {
    uint64_t h = hash_bytes(key, n);
    for (size_t j = h & t->mask;; j = (j + 1) & t->mask) {
        const Slot *s = &t->slots[j];
        if (s->id < 0) return -1;
        if (s->hash == h && s->length == n && !memcmp(t->keys + s->offset, key, n)) return s->id;
    }
}

static void push_id(IdBuffer *b, int32_t id) {
    if (b->length == b->capacity) {
        size_t capacity = b->capacity ? 2 * b->capacity : 4096;
        int32_t *data = realloc(b->data, capacity * sizeof(int32_t));
        if (!data) {
            b->failed = 1;
            return;
        }
        b->data = data;
        b->capacity = capacity;
    }
    b->data[b->length++] = id;
}

static size_t encode_utf8(uint32_t cp, unsigned char *out) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {  /* lone surrogates too: they match no vocab entry, as in Python */
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The word being collected: at most MAX_WORD_CHARS code points, else it becomes [UNK]. */
typedef struct {
    uint32_t chars[MAX_WORD_CHARS];
    int length;
    int too_long;
} Word;

/* Greedy longest-match-first WordPiece of one word, appended to `out` ([UNK] if not covered). */
static void wordpiece(const Engine *e, const uint32_t *chars, int n, IdBuffer *out) {
    unsigned char bytes[MAX_WORD_CHARS * 4];
    size_t offsets[MAX_WORD_CHARS + 1];
    offsets[0] = 0;
    for (int i = 0; i < n; i++) offsets[i + 1] = offsets[i] + encode_utf8(chars[i], bytes + offsets[i]);
    size_t mark = out->length;
    for (int start = 0; start < n;) {
        const Table *t = start ? &e->tail : &e->head;
        int end = start + t->max_chars < n ? start + t->max_chars : n;
        int32_t id = -1;
        for (; end > start; end--) {
            id = table_find(t, bytes + offsets[start], offsets[end] - offsets[start]);
            if (id >= 0) break;
        }
        if (id < 0) {
            out->length = mark;
            push_id(out, e->unk_id);
            return;
        }
        push_id(out, id);
        start = end;
    }
}

static void end_word(const Engine *e, Word *w, IdBuffer *out) {
    if (w->too_long)
        push_id(out, e->unk_id);
    else if (w->length)
        wordpiece(e, w->chars, w->length, out);
    w->length = 0;
    w->too_long = 0;
}

static inline void add_char(Word *w, uint32_t cp) {
    if (w->length < MAX_WORD_CHARS)
        w->chars[w->length++] = cp;
    else
        w->too_long = 1;
}

static void standalone(const Engine *e, Word *w, uint32_t cp, IdBuffer *out) {
    end_word(e, w, out);
    wordpiece(e, &cp, 1, out);
}

/* Index of `cp` in the mapping, or -1. */
static long find_mapping(const Engine *e, uint32_t cp) {
    long lo = 0, hi = (long)e->map_count - 1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if (e->map_cps[mid] == cp) return mid;
        if (e->map_cps[mid] < cp) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

static void add_mapped(const Engine *e, Word *w, long index, IdBuffer *out) {
    for (uint32_t k = e->map_offsets[index]; k < e->map_offsets[index + 1]; k++) {
        uint32_t m = e->map_out[k];
        if (m & PUNCT_BIT)
            standalone(e, w, m & ~PUNCT_BIT, out);
        else
            add_char(w, m);
    }
}

/* Tokenizes one line into `out`. Returns 1 when the line must take the exact path (nothing added). */
static int tokenize_line(const Engine *e, int kind, const void *data, Py_ssize_t n, IdBuffer *out) {
    Word w;
    w.length = 0;
    w.too_long = 0;
    size_t mark = out->length;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t cp = PyUnicode_READ(kind, data, i);
        switch (e->classes[cp]) {
            case C_WORD: add_char(&w, cp); break;
            case C_UPPER: add_char(&w, cp + 32); break;
            case C_DROP: break;
            case C_SPACE: end_word(e, &w, out); break;
            case C_PUNCT: standalone(e, &w, cp, out); break;
            case C_MAPPED: {
                long index = find_mapping(e, cp);
                if (index >= 0) add_mapped(e, &w, index, out); else add_char(&w, cp);
                break;
            }
            case C_CJK: {
                long index = find_mapping(e, cp);
                end_word(e, &w, out);
                if (index >= 0) add_mapped(e, &w, index, out); else add_char(&w, cp);
                end_word(e, &w, out);
                break;
            }
            default:  /* C_FALLBACK */
                out->length = mark;
                return 1;
        }
    }
    end_word(e, &w, out);
    return 0;
}

/* ---- Python interface ------------------------------------------------------------------------ */

static void engine_free(Engine *e) {
    table_free(&e->head);
    table_free(&e->tail);
    free(e->map_cps);
    free(e->map_offsets);
    free(e->map_out);
    free(e);
}

static void capsule_destructor(PyObject *capsule) {
    engine_free(PyCapsule_GetPointer(capsule, "bert_tf.text._wordpiece.Engine"));
}

static uint32_t *copy_u32(Py_buffer *view, size_t *count) {
    *count = (size_t)view->len / sizeof(uint32_t);
    uint32_t *copy = malloc(view->len ? (size_t)view->len : 1);
    if (copy) memcpy(copy, view->buf, (size_t)view->len);
    return copy;
}

/* new_engine(tokens: list[tuple[bytes, int]], unk_id, classes: bytes, map_cps, map_offsets, map_out) */
static PyObject *new_engine(PyObject *self, PyObject *args) {
    PyObject *tokens;
    int unk_id;
    Py_buffer classes, cps, offsets, outs;
    if (!PyArg_ParseTuple(args, "O!iy*y*y*y*", &PyList_Type, &tokens, &unk_id, &classes, &cps, &offsets, &outs))
        return NULL;
    PyObject *result = NULL;
    Engine *e = calloc(1, sizeof(Engine));
    Py_ssize_t n = PyList_GET_SIZE(tokens);
    const char **keys = malloc((n + 1) * 2 * sizeof(char *));
    size_t *lengths = malloc((n + 1) * 2 * sizeof(size_t));
    int32_t *ids = malloc((n + 1) * 2 * sizeof(int32_t));
    if (!e || !keys || !lengths || !ids) {
        PyErr_NoMemory();
        goto done;
    }
    if (classes.len != NUM_CODE_POINTS) {
        PyErr_SetString(PyExc_ValueError, "classes must hold one byte per code point");
        goto done;
    }
    memcpy(e->classes, classes.buf, NUM_CODE_POINTS);
    e->unk_id = unk_id;
    size_t head = 0, tail = n;  /* head keys fill [0, n), tail keys [n, 2n) */
    for (Py_ssize_t i = 0; i < n; i++) {
        char *key;
        Py_ssize_t length;
        int id;
        PyObject *item = PyList_GET_ITEM(tokens, i);
        if (!PyArg_ParseTuple(item, "y#i", &key, &length, &id)) goto done;
        if (length == 0) continue;  /* never looked up: candidates are never empty */
        keys[head] = key, lengths[head] = (size_t)length, ids[head++] = id;
        if (length > 2 && key[0] == '#' && key[1] == '#')
            keys[tail] = key + 2, lengths[tail] = (size_t)length - 2, ids[tail++] = id;
    }
    size_t map_count, offset_count, out_count;
    e->map_cps = copy_u32(&cps, &map_count);
    e->map_offsets = copy_u32(&offsets, &offset_count);
    e->map_out = copy_u32(&outs, &out_count);
    e->map_count = (uint32_t)map_count;
    if (!e->map_cps || !e->map_offsets || !e->map_out ||
        table_build(&e->head, keys, lengths, ids, head) ||
        table_build(&e->tail, keys + n, lengths + n, ids + n, tail - n)) {
        PyErr_NoMemory();
        goto done;
    }
    if (offset_count != map_count + 1) {
        PyErr_SetString(PyExc_ValueError, "map_offsets must hold len(map_cps) + 1 entries");
        goto done;
    }
    result = PyCapsule_New(e, "bert_tf.text._wordpiece.Engine", capsule_destructor);
    if (result) e = NULL;
done:
    if (e) engine_free(e);
    free(keys);
    free(lengths);
    free(ids);
    PyBuffer_Release(&classes);
    PyBuffer_Release(&cps);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&outs);
    return result;
}

/* tokenize(engine, lines: list[str]) -> (flat int32 bytes, row splits int64 bytes, [exact-path rows]) */
static PyObject *tokenize(PyObject *self, PyObject *args) {
    PyObject *capsule, *lines;
    if (!PyArg_ParseTuple(args, "OO!", &capsule, &PyList_Type, &lines)) return NULL;
    const Engine *e = PyCapsule_GetPointer(capsule, "bert_tf.text._wordpiece.Engine");
    if (!e) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lines);
    PyObject **items = malloc((n + 1) * sizeof(PyObject *));
    int64_t *splits = malloc((n + 1) * sizeof(int64_t));
    uint8_t *fallback = calloc(n + 1, 1);
    if (!items || !splits || !fallback) {
        free(items), free(splits), free(fallback);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(lines, i);
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "line %zd is %s, not str", i, Py_TYPE(item)->tp_name);
            for (Py_ssize_t j = 0; j < i; j++) Py_DECREF(items[j]);
            free(items), free(splits), free(fallback);
            return NULL;
        }
        Py_INCREF(item);  /* the list may change while the GIL is released */
        items[i] = item;
    }
    IdBuffer out = {NULL, 0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    splits[0] = 0;
    for (Py_ssize_t i = 0; i < n && !out.failed; i++) {
        PyObject *s = items[i];
        fallback[i] = (uint8_t)tokenize_line(e, PyUnicode_KIND(s), PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s), &out);
        splits[i + 1] = (int64_t)out.length;
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) Py_DECREF(items[i]);
    free(items);
    PyObject *result = NULL;
    if (out.failed) {
        PyErr_NoMemory();
    } else {
        PyObject *flat = PyBytes_FromStringAndSize((const char *)out.data, out.length * sizeof(int32_t));
        PyObject *row_splits = PyBytes_FromStringAndSize((const char *)splits, (n + 1) * sizeof(int64_t));
        PyObject *exact_rows = PyList_New(0);
        for (Py_ssize_t i = 0; exact_rows && i < n; i++) {
            if (!fallback[i]) continue;
            PyObject *index = PyLong_FromSsize_t(i);
            if (!index || PyList_Append(exact_rows, index)) Py_CLEAR(exact_rows);
            Py_XDECREF(index);
        }
        if (flat && row_splits && exact_rows) result = PyTuple_Pack(3, flat, row_splits, exact_rows);
        Py_XDECREF(flat);
        Py_XDECREF(row_splits);
        Py_XDECREF(exact_rows);
    }
    free(out.data);
    free(splits);
    free(fallback);
    return result;
}

static PyMethodDef methods[] = {
    {"new_engine", new_engine, METH_VARARGS, "Builds a tokenizer engine from the vocab and the Unicode tables."},
    {"tokenize", tokenize, METH_VARARGS, "Tokenizes a list of str without the GIL: (flat ids, row splits, exact rows)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wordpiece", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wordpiece(void) { return PyModule_Create(&module); }
