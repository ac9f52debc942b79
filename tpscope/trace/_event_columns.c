/* JSON text of Kineto trace events -> one typed column per field tpscope reads.
 *
 * `scan(text, lo, hi, chunk_bytes)` reads the events `text[lo:hi]` (whole events separated by
 * commas: the inside of a `traceEvents` array, or a run of it) and returns
 * `(symbols, columns, rows)`: `symbols` the distinct strings met (names, categories, raw
 * argument texts...) in first-seen order, `columns` a dict of field name -> a buffer (the memory
 * the C side filled, not copied) of one fixed-size value per event (per described event for the
 * sparse ones). `tpscope/trace/native.py` turns them into the raw columns of `extract.py`.
 *
 * It returns None for any text whose reading by the typed msgspec decoder (`schema.py`) could
 * differ: a field of another type than the schema's, an integer past int64, a duplicated key, a
 * raw argument spelled with escapes, invalid JSON or UTF-8. The caller then reads the text with
 * msgspec, so the columns are the same either way; this only makes the common case fast.
 *
 * The text is parsed by yyjson (third_party/yyjson), `chunk_bytes` at a time: each chunk (cut
 * after an event, at "}", ",", "{" with optional blanks between) is copied, wrapped in "[" "]"
 * and parsed in place, so that string values point into the copy at the offsets they have in the
 * text. That is how the raw arguments ("Input Dims"...) are taken as their exact text, as
 * msgspec.Raw keeps them. A cut inside an event (a nested "}, {") gives invalid JSON; the chunk is
 * then grown by a quarter, to a later cut. The GIL is released while parsing.
 *
 * Memory, whatever the layout: a chunk ends at the last cut within `chunk_bytes`, or where one
 * event is longer, at the first cut after it (never the rest of the text); the blanks around a
 * chunk are not copied; the columns' reserved address space stops growing with the text past
 * 64 MiB (its pages are touched only as rows are written); an event longer than a chunk whose parse tree would pass twice its text is handed back to the
 * caller (`stop`, `resume`), and so are the rest's events once there are more than one per 128
 * bytes of the text (their columns would be many times the text). docs/benchmarks.md gives the
 * measured peaks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "yyjson.h"
#include "_event_fields.h" /* the argument keys: generated from tpscope/trace/read/fields.py */

#define MISSING (-1)

/* ---- growable buffers ------------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap += cap / 2 + 4096;
    char *p = realloc(b->data, cap);
    if (!p) return 0;
    b->data = p;
    b->cap = cap;
    return 1;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0) return 1; /* b->data may still be NULL, which memcpy may not be given */
    if (!buf_reserve(b, n)) return 0;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 1;
}

/* ---- symbols: strings to dense ids in first-seen order ------------------------------------ */

typedef struct {
    Buf text;     /* every symbol's bytes, back to back */
    Buf offsets;  /* size_t start of each symbol in text, plus one past the last */
    int32_t *slots; /* open addressing: id + 1, 0 when empty */
    uint64_t *hashes;
    size_t nslots, count;
} Symbols;

static uint64_t mix(uint64_t h, const char *s) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 31);
}

/* The length and at most the first and last 32 bytes: kernel names run to hundreds of bytes, and
 * a match is confirmed by memcmp anyway. */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    if (n <= 64) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) h = mix(h, s + i);
        char tail[8] = {0};
        memcpy(tail, s + i, n - i);
        h = mix(h, tail);
    } else {
        for (size_t i = 0; i < 32; i += 8) h = mix(h, s + i);
        for (size_t i = n - 32; i < n; i += 8) h = mix(h, s + i);
    }
    return h ^ (h >> 29);
}

static size_t sym_start(const Symbols *t, size_t id) { return ((size_t *)t->offsets.data)[id]; }

static int sym_grow(Symbols *t) {
    size_t n = t->nslots ? t->nslots * 2 : 1024;
    int32_t *slots = calloc(n, sizeof *slots);
    uint64_t *hashes = calloc(n, sizeof *hashes);
    if (!slots || !hashes) {
        free(slots);
        free(hashes);
        return 0;
    }
    for (size_t i = 0; i < t->nslots; i++) {
        if (!t->slots[i]) continue;
        size_t j = t->hashes[i] & (n - 1);
        while (slots[j]) j = (j + 1) & (n - 1);
        slots[j] = t->slots[i];
        hashes[j] = t->hashes[i];
    }
    free(t->slots);
    free(t->hashes);
    t->slots = slots;
    t->hashes = hashes;
    t->nslots = n;
    return 1;
}

/* The id of s[0:n], added when new; -1 when out of memory. */
static int32_t sym_id(Symbols *t, const char *s, size_t n) {
    if ((t->count + 1) * 2 > t->nslots && !sym_grow(t)) return -1;
    uint64_t h = hash_bytes(s, n);
    size_t j = h & (t->nslots - 1);
    while (t->slots[j]) {
        if (t->hashes[j] == h) {
            size_t id = (size_t)t->slots[j] - 1;
            size_t a = sym_start(t, id), b = sym_start(t, id + 1);
            if (b - a == n && (n == 0 || memcmp(t->text.data + a, s, n) == 0)) return (int32_t)id;
        }
        j = (j + 1) & (t->nslots - 1);
    }
    if (t->count >= INT32_MAX - 1) return -1;
    if (!buf_put(&t->text, s, n)) return -1;
    size_t end = t->text.len;
    if (t->count == 0) {
        size_t zero = 0;
        if (!buf_put(&t->offsets, &zero, sizeof zero)) return -1;
    }
    if (!buf_put(&t->offsets, &end, sizeof end)) return -1;
    t->slots[j] = (int32_t)(t->count + 1);
    t->hashes[j] = h;
    return (int32_t)t->count++;
}

static void sym_free(Symbols *t) {
    free(t->text.data);
    free(t->offsets.data);
    free(t->slots);
    free(t->hashes);
}

/* ---- the columns -------------------------------------------------------------------------- */

/* Dense columns: one value per event; then the plain arguments' (_event_fields.h). */
enum {
    C_PH, C_CAT, C_NAME,           /* int32 symbol ids, -1 for null or absent */
    C_PID, C_TID,                  /* int64: the integer, -1 when null/absent or a string */
    C_PID_SYM, C_TID_SYM,          /* int32: the string's symbol id, else -1 */
    C_TS, C_DUR,                   /* float64, NaN when null or absent */
    C_DEVICE, C_STREAM,            /* int64 */
    C_HAS_DEVICE, C_HAS_STREAM,    /* int8: the key holds a non-null value */
    C_DEVICE_SYM, C_STREAM_SYM,    /* int32: a string device / stream's symbol id, else -1 */
    C_COLL_NAME,                   /* int32 symbol id, -1 for null or absent */
    C_ARG_NAME,                    /* int32 symbol id of args.name, -1 for null or absent */
    /* Sparse columns: one value per event whose "Collective name" is a string */
    S_ROW,                         /* int64 event index */
    S_PG_NAME, S_DTYPE, S_PG_RANKS, S_PG_DESC, /* int32 symbol ids, -1 for null */
    S_SEQ, S_IN, S_OUT, S_GROUP_SIZE, S_PEER,  /* int64, -1 for null */
    /* Sparse: events with a grid or a block (int64 row, then 3 int64 each, -1 when absent) */
    L_ROW, L_GRID, L_BLOCK,
    N_FIXED,
    /* the plain arguments' dense int64 columns, -1 for null or absent: PLAIN_NAMES; then the raw
     * arguments' int32 symbol ids of their text, "" when absent: RAW_NAMES */
    N_COLUMNS = N_FIXED + N_PLAIN + N_RAW
};

static const char *COLUMN_NAMES[N_FIXED] = {
    "ph", "cat", "name", "pid", "tid", "pid_sym", "tid_sym", "ts", "dur",
    "device", "stream", "has_device", "has_stream", "device_sym", "stream_sym", "coll_name",
    "arg_name",
    "coll_row", "pg_name", "dtype", "pg_ranks", "pg_desc", "seq", "in_nelems", "out_nelems",
    "group_size", "peer", "launch_row", "grid", "block",
};

static const char *column_name(int c) {
    if (c < N_FIXED) return COLUMN_NAMES[c];
    return c < N_FIXED + N_PLAIN ? PLAIN_NAMES[c - N_FIXED] : RAW_NAMES[c - N_FIXED - N_PLAIN];
}

typedef struct {
    Buf col[N_COLUMNS];
    Symbols sym;
    int32_t empty_id; /* the symbol "" (an absent raw argument) */
    Buf ranks;        /* scratch: a Process Group Ranks list as text */
    int64_t rows;
} Scan;

#define PUT(s, c, v)                                                                           \
    do {                                                                                       \
        __typeof__(v) v_ = (v);                                                                \
        if (!buf_put(&(s)->col[c], &v_, sizeof v_)) return -1;                                \
    } while (0)

/* Result codes of the readers below: 1 read, 0 outside the fast path, -1 out of memory, -2 not
 * valid JSON (a chunk cut inside an event, or a broken text). */
#define OTHER 0
#define NOMEM (-1)
#define NOT_JSON (-2)

/* An int field (int | None in the schema): 1 and *out set, or 2 for null; OTHER otherwise. */
static int read_int(yyjson_val *v, int64_t *out) {
    if (yyjson_is_null(v)) return 2;
    if (yyjson_is_uint(v)) {
        uint64_t u = yyjson_get_uint(v);
        if (u > (uint64_t)INT64_MAX) return OTHER;
        *out = (int64_t)u;
        return 1;
    }
    if (yyjson_is_sint(v)) {
        int64_t i = yyjson_get_sint(v);
        if (i == INT64_MIN) return OTHER;
        *out = i;
        return 1;
    }
    return OTHER;
}

/* A str | None field: its symbol id, -1 for null; OTHER - 2 for another type, NOMEM - 2 ... */
#define SYM_OTHER (-3)
#define SYM_NOMEM (-4)
static int32_t read_str(Scan *s, yyjson_val *v) {
    if (yyjson_is_null(v)) return -1;
    if (!yyjson_is_str(v)) return SYM_OTHER;
    int32_t id = sym_id(&s->sym, yyjson_get_str(v), yyjson_get_len(v));
    return id < 0 ? SYM_NOMEM : id;
}

/* Where the JSON value starting at text[i] ends (one past it); the text is valid JSON. */
static size_t value_end(const char *text, size_t i, size_t hi) {
    char c = text[i];
    if (c == '"') {
        for (i++; i < hi; i++) {
            if (text[i] == '\\') i++;
            else if (text[i] == '"') return i + 1;
        }
        return hi;
    }
    if (c == '[' || c == '{') {
        int depth = 0;
        for (; i < hi; i++) {
            c = text[i];
            if (c == '"') {
                for (i++; i < hi && text[i] != '"'; i++)
                    if (text[i] == '\\') i++;
            } else if (c == '[' || c == '{') {
                depth++;
            } else if (c == ']' || c == '}') {
                if (--depth == 0) return i + 1;
            }
        }
        return hi;
    }
    while (i < hi && !strchr(",]} \t\r\n", text[i])) i++;
    return i;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The symbol of a raw argument's exact text. `key` is the parsed key (in the copy, where it has
 * the offset it has in the text, plus `shift`). */
static int32_t raw_text(Scan *s, const char *text, size_t hi, const char *copy, ptrdiff_t shift,
                        yyjson_val *key) {
    ptrdiff_t at = (yyjson_get_str(key) - copy) - shift + (ptrdiff_t)yyjson_get_len(key);
    size_t i = (size_t)at;
    if (i >= hi || text[i] != '"') return SYM_OTHER; /* the key was spelled with escapes */
    for (i++; i < hi && is_blank(text[i]); i++) {}
    if (i >= hi || text[i] != ':') return SYM_OTHER;
    for (i++; i < hi && is_blank(text[i]); i++) {}
    if (i >= hi) return SYM_OTHER;
    size_t end = value_end(text, i, hi);
    int32_t id = sym_id(&s->sym, text + i, end - i);
    return id < 0 ? SYM_NOMEM : id;
}

/* grid / block: list[int] | None; a list of 3 integers below 2^62 in magnitude, else OTHER. */
static int read_dims(yyjson_val *v, int64_t out[3]) {
    if (yyjson_is_null(v)) return 2;
    if (!yyjson_is_arr(v) || yyjson_arr_size(v) != 3) return OTHER;
    for (size_t k = 0; k < 3; k++) {
        int64_t x;
        if (read_int(yyjson_arr_get(v, k), &x) != 1) return OTHER;
        if (x >= ((int64_t)1 << 62) || x <= -((int64_t)1 << 62)) return OTHER;
        out[k] = x;
    }
    return 1;
}

/* Process Group Ranks: str | list[int] | None; a list becomes "0,1,2" (what ranks_text makes of
 * it, and what it makes of that string again). */
static int32_t read_ranks(Scan *s, yyjson_val *v) {
    if (!yyjson_is_arr(v)) return read_str(s, v);
    s->ranks.len = 0;
    size_t idx, max;
    yyjson_val *x;
    yyjson_arr_foreach(v, idx, max, x) {
        int64_t r;
        if (read_int(x, &r) != 1) return SYM_OTHER;
        char digits[32];
        int n = snprintf(digits, sizeof digits, idx ? ",%lld" : "%lld", (long long)r);
        if (!buf_put(&s->ranks, digits, (size_t)n)) return SYM_NOMEM;
    }
    int32_t id = sym_id(&s->sym, s->ranks.len ? s->ranks.data : "", s->ranks.len);
    return id < 0 ? SYM_NOMEM : id;
}

static int key_is(yyjson_val *key, const char *name, size_t n) {
    return yyjson_get_len(key) == n && memcmp(yyjson_get_str(key), name, n) == 0;
}
#define KEY(k, lit) key_is(k, lit, sizeof(lit) - 1)

static int arg_key(yyjson_val *key, int *bit, int *kind) {
    size_t n = yyjson_get_len(key);
    if (n > MAX_KEY_LEN) return 0;
    const char *s = yyjson_get_str(key);
    for (const signed char *k = KEYS_OF_LEN[n]; *k >= 0; k++) {
        if (memcmp(s, ARG_KEYS[*k].name, n) == 0) {
            *bit = ARG_KEYS[*k].bit;
            *kind = ARG_KEYS[*k].kind;
            return 1;
        }
    }
    return 0;
}

#define CHECK_INT(res)                                                                         \
    do {                                                                                       \
        if ((res) == OTHER) return OTHER;                                                      \
    } while (0)
#define CHECK_SYM(id)                                                                          \
    do {                                                                                       \
        if ((id) == SYM_OTHER) return OTHER;                                                   \
        if ((id) == SYM_NOMEM) return NOMEM;                                                   \
    } while (0)

static int read_args(Scan *s, yyjson_val *args, const char *text, size_t hi, const char *copy,
                     ptrdiff_t shift) {
    int64_t ints[N_ARG_KEYS];
    int32_t syms[N_ARG_KEYS];
    int64_t grid[3] = {MISSING, MISSING, MISSING}, block[3] = {MISSING, MISSING, MISSING};
    uint64_t seen = 0, present = 0; /* bits of the keys met, of keys with a non-null value */
    for (int k = 0; k < N_ARG_KEYS; k++) {
        ints[k] = MISSING;
        syms[k] = -1;
    }
    for (int k = 0; k < N_RAW; k++) syms[RAW_ARGS[k]] = s->empty_id;
    if (args && !yyjson_is_null(args)) {
        if (!yyjson_is_obj(args)) return OTHER;
        yyjson_obj_iter it;
        yyjson_obj_iter_init(args, &it);
        yyjson_val *key;
        while ((key = yyjson_obj_iter_next(&it))) {
            yyjson_val *v = yyjson_obj_iter_get_val(key);
            int a, kind;
            if (!arg_key(key, &a, &kind)) continue;
            if (seen & (1ull << a)) return OTHER;
            seen |= 1ull << a;
            int res;
            switch (kind) {
            case 0:
                res = read_int(v, &ints[a]);
                CHECK_INT(res);
                if (res == 1) present |= 1ull << a;
                break;
            case 2: /* an integer, or a string (ROCm's "0x0") that Python turns into one */
                if (yyjson_is_str(v)) {
                    syms[a] = read_str(s, v);
                    CHECK_SYM(syms[a]);
                    present |= 1ull << a;
                    break;
                }
                res = read_int(v, &ints[a]);
                CHECK_INT(res);
                if (res == 1) present |= 1ull << a;
                break;
            case 1:
            case 5:
                syms[a] = kind == 1 ? read_str(s, v) : read_ranks(s, v);
                CHECK_SYM(syms[a]);
                if (syms[a] >= 0) present |= 1ull << a;
                break;
            case 3:
                syms[a] = raw_text(s, text, hi, copy, shift, key);
                CHECK_SYM(syms[a]);
                break;
            case 4:
                res = read_dims(v, a == A_GRID ? grid : block);
                CHECK_INT(res);
                if (res == 1) present |= 1ull << a;
                break;
            }
        }
    }
    PUT(s, C_DEVICE, ints[A_DEVICE]);
    PUT(s, C_STREAM, ints[A_STREAM]);
    PUT(s, C_HAS_DEVICE, (int8_t)((present >> A_DEVICE) & 1));
    PUT(s, C_HAS_STREAM, (int8_t)((present >> A_STREAM) & 1));
    PUT(s, C_DEVICE_SYM, syms[A_DEVICE]);
    PUT(s, C_STREAM_SYM, syms[A_STREAM]);
    for (int k = 0; k < N_PLAIN; k++) PUT(s, N_FIXED + k, ints[PLAIN_ARGS[k]]);
    for (int k = 0; k < N_RAW; k++) PUT(s, N_FIXED + N_PLAIN + k, syms[RAW_ARGS[k]]);
    PUT(s, C_COLL_NAME, syms[A_COLLECTIVE]);
    PUT(s, C_ARG_NAME, syms[A_NAME]);
    if (syms[A_COLLECTIVE] >= 0) {
        PUT(s, S_ROW, s->rows);
        PUT(s, S_PG_NAME, syms[A_PG_NAME]);
        PUT(s, S_DTYPE, syms[A_DTYPE]);
        PUT(s, S_PG_RANKS, syms[A_PG_RANKS]);
        PUT(s, S_PG_DESC, syms[A_PG_DESC]);
        PUT(s, S_SEQ, ints[A_SEQ]);
        PUT(s, S_IN, ints[A_IN_NELEMS]);
        PUT(s, S_OUT, ints[A_OUT_NELEMS]);
        PUT(s, S_GROUP_SIZE, ints[A_GROUP_SIZE]);
        PUT(s, S_PEER, (present >> A_DST_RANK) & 1 ? ints[A_DST_RANK] : ints[A_SRC_RANK]);
    }
    if ((present >> A_GRID) & 1 || (present >> A_BLOCK) & 1) {
        PUT(s, L_ROW, s->rows);
        if (!buf_put(&s->col[L_GRID], grid, sizeof grid)) return NOMEM;
        if (!buf_put(&s->col[L_BLOCK], block, sizeof block)) return NOMEM;
    }
    return 1;
}

/* pid / tid: int | str | None. */
static int read_lane(Scan *s, yyjson_val *v, int64_t *value, int32_t *sym) {
    if (yyjson_is_str(v)) {
        *sym = read_str(s, v);
        return *sym == SYM_NOMEM ? NOMEM : 1;
    }
    int res = read_int(v, value);
    return res == OTHER ? OTHER : 1;
}

/* A number | None field (ts, dur). */
static int read_number(yyjson_val *v, double *out) {
    if (yyjson_is_null(v)) return 1;
    if (yyjson_is_real(v)) *out = yyjson_get_real(v);
    else if (yyjson_is_uint(v)) *out = (double)yyjson_get_uint(v);
    else if (yyjson_is_sint(v)) *out = (double)yyjson_get_sint(v);
    else return OTHER;
    return 1;
}

enum { E_PH, E_CAT, E_NAME, E_PID, E_TID, E_TS, E_DUR, E_ARGS };

static int read_event(Scan *s, yyjson_val *ev, const char *text, size_t hi, const char *copy,
                      ptrdiff_t shift) {
    if (!yyjson_is_obj(ev)) return OTHER;
    int32_t ph = -1, cat = -1, name = -1, pid_sym = -1, tid_sym = -1;
    int64_t pid = MISSING, tid = MISSING;
    double ts = NAN, dur = NAN;
    yyjson_val *args = NULL;
    uint32_t seen = 0;
    yyjson_obj_iter it;
    yyjson_obj_iter_init(ev, &it);
    yyjson_val *key;
    while ((key = yyjson_obj_iter_next(&it))) {
        yyjson_val *v = yyjson_obj_iter_get_val(key);
        int e, res = 1;
        if (KEY(key, "ph")) { e = E_PH; ph = read_str(s, v); CHECK_SYM(ph); }
        else if (KEY(key, "cat")) { e = E_CAT; cat = read_str(s, v); CHECK_SYM(cat); }
        else if (KEY(key, "name")) { e = E_NAME; name = read_str(s, v); CHECK_SYM(name); }
        else if (KEY(key, "pid")) { e = E_PID; res = read_lane(s, v, &pid, &pid_sym); }
        else if (KEY(key, "tid")) { e = E_TID; res = read_lane(s, v, &tid, &tid_sym); }
        else if (KEY(key, "ts")) { e = E_TS; res = read_number(v, &ts); }
        else if (KEY(key, "dur")) { e = E_DUR; res = read_number(v, &dur); }
        else if (KEY(key, "args")) { e = E_ARGS; args = v; }
        else continue;
        if (res != 1) return res;
        if (seen & (1u << e)) return OTHER;
        seen |= 1u << e;
    }
    PUT(s, C_PH, ph);
    PUT(s, C_CAT, cat);
    PUT(s, C_NAME, name);
    PUT(s, C_PID, pid);
    PUT(s, C_TID, tid);
    PUT(s, C_PID_SYM, pid_sym);
    PUT(s, C_TID_SYM, tid_sym);
    PUT(s, C_TS, ts);
    PUT(s, C_DUR, dur);
    int res = read_args(s, args, text, hi, copy, shift);
    if (res != 1) return res;
    s->rows++;
    return 1;
}

/* The comma of the last event boundary ("}", blanks, ",", blanks, "{") in text[lo:hi], or -1. */
static ptrdiff_t last_cut(const char *text, size_t lo, size_t hi) {
    for (size_t i = hi; i-- > lo;) {
        if (text[i] != '{') continue;
        size_t j = i;
        while (j > lo && is_blank(text[j - 1])) j--;
        if (j == lo || text[j - 1] != ',') continue;
        size_t comma = j - 1;
        while (j - 1 > lo && is_blank(text[j - 2])) j--;
        if (j - 1 > lo && text[j - 2] == '}') return (ptrdiff_t)comma;
    }
    return -1;
}

/* The comma of the first event boundary whose "}" is in text[lo:hi], or -1. */
static ptrdiff_t first_cut(const char *text, size_t lo, size_t hi) {
    for (const char *p = text + lo, *end = text + hi; (p = memchr(p, '}', (size_t)(end - p)));) {
        size_t j = (size_t)(++p - text);
        while (j < hi && is_blank(text[j])) j++;
        if (j >= hi || text[j] != ',') continue;
        size_t comma = j++;
        while (j < hi && is_blank(text[j])) j++;
        if (j < hi && text[j] == '{') return (ptrdiff_t)comma;
    }
    return -1;
}

/* About how many parse-tree values text[lo:hi] makes: its ":", ",", "[" and "{" (a bound, give
 * or take the few in strings). */
static size_t values_in(const char *text, size_t lo, size_t hi) {
    size_t n = 0;
    for (size_t i = lo; i < hi; i++) {
        char c = text[i];
        n += c == ':' || c == ',' || c == '[' || c == '{';
    }
    return n;
}

/* Parse text[lo:stop] as events; 1, OTHER, NOMEM, NOT_JSON or TOO_BIG. On NOT_JSON or TOO_BIG
 * nothing was added. A chunk up to `chunk_bytes` long is parsed in one pool reused by every
 * chunk. A longer one (an event longer than a chunk) is parsed with malloc, whose pages are
 * touched only as the parse tree fills them; its tree (16 bytes a value) must stay within twice
 * its text, else it is TOO_BIG (an event of many tiny nested values) and left to the caller. */
#define TOO_BIG (-3)
static int scan_chunk(Scan *s, const char *text, size_t lo, size_t stop, size_t chunk_bytes,
                      Buf *copy, Buf *pool) {
    size_t end = stop; /* the blanks before a cut are not copied (a run of them may be long) */
    while (end > lo && is_blank(text[end - 1])) end--;
    size_t n = end - lo;
    const yyjson_read_flag flags = YYJSON_READ_INSITU | YYJSON_READ_BIGNUM_AS_RAW;
    yyjson_alc alc, *use = NULL;
    if (n <= chunk_bytes) {
        /* one buffer for every chunk's values: no allocation, no fresh pages per chunk */
        size_t need = yyjson_read_max_memory_usage(n + 2, flags);
        if (!need) return NOMEM;
        pool->len = 0;
        if (!buf_reserve(pool, need)) return NOMEM;
        if (!yyjson_alc_pool_init(&alc, pool->data, pool->cap)) return NOMEM;
        use = &alc;
    } else if (values_in(text, lo, end) * sizeof(yyjson_val) > 2 * n) {
        return TOO_BIG;
    }
    copy->len = 0;
    if (!buf_reserve(copy, n + 2 + YYJSON_PADDING_SIZE)) return NOMEM;
    copy->data[0] = '[';
    memcpy(copy->data + 1, text + lo, n);
    copy->data[n + 1] = ']';
    memset(copy->data + n + 2, 0, YYJSON_PADDING_SIZE);
    yyjson_read_err err;
    yyjson_doc *doc = yyjson_read_opts(copy->data, n + 2, flags, use, &err);
    if (!doc) return err.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION ? NOMEM : NOT_JSON;
    yyjson_val *root = yyjson_doc_get_root(doc);
    int res = 1;
    /* copy->data + 1 + (i - lo) holds text[i]: the shift from a text offset to a copy offset */
    ptrdiff_t shift = 1 - (ptrdiff_t)lo;
    yyjson_arr_iter ai;
    yyjson_arr_iter_init(root, &ai);
    yyjson_val *ev;
    while (res == 1 && (ev = yyjson_arr_iter_next(&ai))) res = read_event(s, ev, text, stop, copy->data, shift);
    yyjson_doc_free(doc);
    return res;
}

static void scan_free(Scan *s) {
    for (int c = 0; c < N_COLUMNS; c++) free(s->col[c].data);
    free(s->ranks.data);
    sym_free(&s->sym);
}

/* The end of the chunk that starts at text[lo] (lo < hi, no blank there): the last cut within
 * `span` bytes, else (one event longer than that) the first cut after lo, else hi. */
static size_t chunk_end(const char *text, size_t lo, size_t hi, size_t span) {
    if (hi - lo <= span) return hi;
    ptrdiff_t stop = last_cut(text, lo, lo + span);
    if (stop < 0) stop = first_cut(text, lo, hi);
    return stop < 0 ? hi : (size_t)stop;
}

#define RESERVE_TEXT ((size_t)64 << 20)

/* Read text[lo:hi] `chunk_bytes` at a time; 1, OTHER, NOMEM or NOT_JSON. On 1, `*stop` is hi,
 * or the start of an event TOO_BIG for the parse-tree bound, which ends at `*resume` (a cut's
 * comma, or hi): the events before it are read; or `*stop` == `*resume` < hi, where more events
 * than one per 128 bytes were read: the rest is left for another call. The memory beside the columns stays a few
 * times the chunk being parsed (its copy and its parse tree), whatever the layout: a chunk is
 * never longer than its events, a run of blanks is not copied, and a failed parse grows the
 * chunk by a quarter, not to the rest of the text. */
static int scan_text(Scan *s, const char *text, size_t lo, size_t hi, size_t chunk_bytes,
                     size_t *stop_at, size_t *resume_at) {
    Buf copy = {0}, pool = {0};
    int res = 1;
    size_t first = lo;
    /* room for the events a text this long usually holds (Kineto's are 150-400 bytes), as many
     * as the row bound below lets one call hold: address space, its pages touched only as rows
     * are written; past 64 MiB of text (a forked part) the columns grow by half as they fill */
    size_t rows = (hi - lo < RESERVE_TEXT ? hi - lo : RESERVE_TEXT) / 128 + 16;
    for (int c = 0; c < N_COLUMNS; c++)
        if ((c < S_ROW || c >= N_FIXED) && !buf_reserve(&s->col[c], rows * 8)) return NOMEM;
    *stop_at = *resume_at = hi;
    while (res == 1) {
        while (lo < hi && is_blank(text[lo])) lo++;
        if (lo >= hi) break;
        size_t span = chunk_bytes, stop = chunk_end(text, lo, hi, span);
        for (;;) {
            res = scan_chunk(s, text, lo, stop, chunk_bytes, &copy, &pool);
            /* not JSON: maybe a cut inside an event (a nested "}, {"); a chunk a quarter longer
             * (to the next cut at least), up to the whole rest, where a failure is the text's */
            if (res != NOT_JSON || stop == hi) break;
            span = stop - lo + (stop - lo) / 4 + 1;
            size_t next = chunk_end(text, lo, hi, span);
            if (next <= stop) {
                ptrdiff_t after = first_cut(text, stop + 1, hi);
                next = after < 0 ? hi : (size_t)after;
            }
            stop = next;
        }
        if (res == TOO_BIG) { /* an event (the cuts inside it fail), and maybe a few after it */
            *stop_at = lo;
            *resume_at = stop;
            res = 1;
            break;
        }
        if (res != 1) break;
        lo = stop == hi ? hi : stop + 1;
        if (lo < hi && (size_t)s->rows > (hi - first) / 128 + 4096) {
            /* events far shorter than Kineto's (its columns, ~134 bytes an event, would be many
             * times the text): the caller takes these and calls again from lo */
            *stop_at = *resume_at = lo;
            break;
        }
        if (copy.cap > 4 * (chunk_bytes + 4096)) { /* an outlier's buffers: not kept */
            free(copy.data);
            free(pool.data);
            copy = (Buf){0};
            pool = (Buf){0};
        }
    }
    free(copy.data);
    free(pool.data);
    return res;
}

/* A column's bytes, handed to Python without a copy: the buffer protocol over malloc'd memory,
 * freed with the object (numpy's frombuffer keeps a reference). */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
} Column;

static int column_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Column *c = (Column *)self;
    return PyBuffer_FillInfo(view, self, c->data ? c->data : (char *)"", c->len, 0, flags);
}

static void column_dealloc(PyObject *self) {
    free(((Column *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs COLUMN_BUFFER = {column_getbuffer, NULL};

static PyTypeObject COLUMN_TYPE = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tpscope.trace._event_columns.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = column_dealloc,
    .tp_as_buffer = &COLUMN_BUFFER,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One column's bytes (the buffer protocol).",
};

/* A Column that takes over b's memory (b is left empty); NULL on error. */
static PyObject *column_of(Buf *b) {
    Column *c = PyObject_New(Column, &COLUMN_TYPE);
    if (!c) return NULL;
    c->data = b->data;
    c->len = (Py_ssize_t)b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return (PyObject *)c;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t lo, hi, chunk_bytes;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &lo, &hi, &chunk_bytes)) return NULL;
    if (lo < 0 || hi > view.len || lo > hi || chunk_bytes < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "span out of the buffer");
        return NULL;
    }
    Scan s;
    memset(&s, 0, sizeof s);
    int res;
    size_t stop = (size_t)hi, resume = (size_t)hi;
    s.empty_id = sym_id(&s.sym, "", 0);
    if (s.empty_id < 0) {
        res = NOMEM;
    } else {
        Py_BEGIN_ALLOW_THREADS
        res = scan_text(&s, (const char *)view.buf, (size_t)lo, (size_t)hi, (size_t)chunk_bytes,
                        &stop, &resume);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (res != 1) {  /* OTHER or NOT_JSON: msgspec's reading decides */
        scan_free(&s);
        if (res == NOMEM) return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    PyObject *symbols = PyList_New((Py_ssize_t)s.sym.count);
    PyObject *columns = PyDict_New();
    PyObject *out = NULL;
    if (!symbols || !columns) goto done;
    for (size_t id = 0; id < s.sym.count; id++) {
        size_t a = sym_start(&s.sym, id), b = sym_start(&s.sym, id + 1);
        PyObject *str = PyUnicode_DecodeUTF8(s.sym.text.data + a, (Py_ssize_t)(b - a), "strict");
        if (!str) {  /* not UTF-8 (a lone surrogate escape): msgspec's path decides */
            PyErr_Clear();
            out = Py_None;
            Py_INCREF(out);
            goto done;
        }
        PyList_SET_ITEM(symbols, (Py_ssize_t)id, str);
    }
    for (int c = 0; c < N_COLUMNS; c++) {
        PyObject *column = column_of(&s.col[c]);
        if (!column || PyDict_SetItemString(columns, column_name(c), column) < 0) {
            Py_XDECREF(column);
            goto done;
        }
        Py_DECREF(column);
    }
    out = Py_BuildValue("(OOLnn)", symbols, columns, (long long)s.rows, (Py_ssize_t)stop,
                        (Py_ssize_t)resume);
done:
    Py_XDECREF(symbols);
    Py_XDECREF(columns);
    scan_free(&s);
    return out;
}

static PyMethodDef METHODS[] = {
    {"scan", scan, METH_VARARGS,
     "scan(text, lo, hi, chunk_bytes) -> (symbols, columns, rows, stop, resume) | None: the "
     "events text[lo:stop] as typed columns; text[stop:resume] (when stop < hi) is one event whose "
     "parse tree is too large, the rest after resume's comma is not read; None when msgspec's "
     "typed reading is needed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_event_columns", "Kineto trace events to typed columns (yyjson).", -1,
    METHODS,
};

PyMODINIT_FUNC PyInit__event_columns(void) {
    if (PyType_Ready(&COLUMN_TYPE) < 0) return NULL;
    return PyModule_Create(&MODULE);
}
