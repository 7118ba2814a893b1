/* The C SDK's codec: string table, batch decoding and encoding, parameters, and the agent's
 * tree. Plain C with no bindings, so that it is unit-tested natively (test_wasmon_guest.c);
 * glue_transformer.c and glue_agent.c connect it to the bindings wit-bindgen generates for each
 * world. */
#include "wasmon_guest.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    if (!q) abort(); /* out of memory: the host sees a trap, as for any guest */
    return q;
}

/* ---- interning: the batches' string table, a fetch's instance names ------------------- */

typedef struct {
    char *text; /* NUL-terminated */
    size_t len;
} entry;

/* Strings by id (their order of arrival) and back. */
typedef struct {
    entry *table;
    size_t n, cap;
    /* Open addressing: slot -> id + 1 (0: empty). Capacity a power of two, at most half full. */
    uint32_t *slots;
    size_t n_slots;
} interner;

static uint64_t hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static void slots_insert(interner *t, uint32_t id) {
    size_t mask = t->n_slots - 1;
    size_t i = hash(t->table[id].text, t->table[id].len) & mask;
    while (t->slots[i]) {
        const entry *other = &t->table[t->slots[i] - 1];
        if (other->len == t->table[id].len && !memcmp(other->text, t->table[id].text, other->len))
            return; /* the first id of a text stays its id */
        i = (i + 1) & mask;
    }
    t->slots[i] = id + 1;
}

static long lookup(const interner *t, const char *s, size_t len) {
    if (!t->n_slots) return -1;
    size_t mask = t->n_slots - 1;
    for (size_t i = hash(s, len) & mask; t->slots[i]; i = (i + 1) & mask) {
        const entry *e = &t->table[t->slots[i] - 1];
        if (e->len == len && !memcmp(e->text, s, len)) return (long)(t->slots[i] - 1);
    }
    return -1;
}

static uint32_t append(interner *t, const char *s, size_t len) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->table = xrealloc(t->table, t->cap * sizeof *t->table);
    }
    char *copy = xrealloc(NULL, len + 1);
    memcpy(copy, s, len);
    copy[len] = 0;
    uint32_t id = (uint32_t)t->n++;
    t->table[id] = (entry){copy, len};
    if (2 * t->n > t->n_slots) {
        free(t->slots);
        t->n_slots = t->n_slots ? 2 * t->n_slots : 128;
        t->slots = calloc(t->n_slots, sizeof *t->slots);
        if (!t->slots) abort();
        for (uint32_t i = 0; i < t->n; i++) slots_insert(t, i);
    } else {
        slots_insert(t, id);
    }
    return id;
}

/* The id of `s`, appended when new. */
static uint32_t intern(interner *t, const char *s, size_t len) {
    long found = lookup(t, s, len);
    return found >= 0 ? (uint32_t)found : append(t, s, len);
}

static void reset_table(interner *t) {
    for (size_t i = 0; i < t->n; i++) free(t->table[i].text);
    t->n = 0;
    if (t->slots) memset(t->slots, 0, t->n_slots * sizeof *t->slots);
}

/* The string table batches share with the host. */
static interner strings;

const char *wg_string(uint32_t id) { return id < strings.n ? strings.table[id].text : ""; }

/* The instance names of the fetch in progress. */
static interner instances;

wg_inst wg_instance(const char *name) {
    return intern(&instances, name ? name : "", name ? strlen(name) : 0);
}

void wg_instances_reset(void) { reset_table(&instances); }

size_t wg_instances_len(void) { return instances.n; }

char *wg_instances_take(size_t i, size_t *len) {
    char *text = instances.table[i].text;
    *len = instances.table[i].len;
    instances.table[i].text = NULL;
    return text;
}

/* ---- decoding --------------------------------------------------------------------------- */

const wg_metadata wg_no_metadata = {NULL, 0};

static wg_sample *samples;
static size_t cap_samples;
static wg_metadata *sets;
static wg_pair **set_pairs;
static size_t n_sets_in, cap_sets_in;

wg_sample *wg_decode(const wg_batch_in *b, size_t *n) {
    if (b->reset) reset_table(&strings);
    for (size_t i = 0; i < b->n_new_strings; i++) append(&strings, b->new_strings[i].ptr, b->new_strings[i].len);
    for (size_t i = 0; i < n_sets_in; i++) free(set_pairs[i]);
    if (b->n_metadata > cap_sets_in) {
        cap_sets_in = b->n_metadata;
        sets = xrealloc(sets, cap_sets_in * sizeof *sets);
        set_pairs = xrealloc(set_pairs, cap_sets_in * sizeof *set_pairs);
    }
    n_sets_in = b->n_metadata;
    for (size_t i = 0; i < n_sets_in; i++) {
        const wg_id_set *s = &b->metadata[i];
        wg_pair *pairs = xrealloc(NULL, s->len * sizeof *pairs);
        for (size_t j = 0; j < s->len; j++)
            pairs[j] = (wg_pair){wg_string(s->pairs[j].key), wg_string(s->pairs[j].value)};
        set_pairs[i] = pairs;
        sets[i] = (wg_metadata){pairs, s->len};
    }
    if (b->n > cap_samples) {
        cap_samples = b->n;
        samples = xrealloc(samples, cap_samples * sizeof *samples);
    }
    for (size_t i = 0; i < b->n; i++) {
        const uint32_t *row = &b->ids[4 * i];
        uint8_t k = b->kinds[i];
        samples[i] = (wg_sample){
            .name = wg_string(row[0]),
            .resource = wg_string(row[1]),
            .unit = wg_string(row[2]),
            .kind = k <= WG_CUMULATIVE ? (wg_kind)k : WG_GAUGE,
            .value = b->values[i],
            .timestamp_ns = b->timestamps_ns[i],
            .metadata = row[3] < n_sets_in ? &sets[row[3]] : &wg_no_metadata,
        };
    }
    *n = b->n;
    return b->n ? samples : NULL;
}

wg_sample *wg_decode_abi(const wg_abi_batch *b, size_t *n) {
    /* The host sends columns of one length; never read past the shortest. */
    size_t len = b->values.len;
    if (len > b->kinds.len) len = b->kinds.len;
    if (len > b->timestamps_ns.len) len = b->timestamps_ns.len;
    if (len > b->ids.len / 4) len = b->ids.len / 4;
    wg_batch_in in = {
        .reset = b->reset,
        .new_strings = b->new_strings.ptr,
        .n_new_strings = b->new_strings.len,
        .metadata = b->metadata.ptr,
        .n_metadata = b->metadata.len,
        .ids = b->ids.ptr,
        .kinds = b->kinds.ptr,
        .values = b->values.ptr,
        .timestamps_ns = b->timestamps_ns.ptr,
        .n = len,
    };
    return wg_decode(&in, n);
}

/* ---- encoding --------------------------------------------------------------------------- */

void wg_out_init(wg_out *out) { memset(out, 0, sizeof *out); }

void wg_out_free(wg_out *out) {
    for (size_t i = 0; i < out->n_new_strings; i++) free(out->new_strings[i]);
    for (size_t i = 0; i < out->n_sets; i++) free(out->sets[i]);
    free(out->new_strings);
    free(out->new_string_lens);
    free(out->sets);
    free(out->set_lens);
    free(out->set_keys);
    free(out->ids);
    free(out->kinds);
    free(out->values);
    free(out->timestamps_ns);
    wg_out_init(out);
}

static uint32_t id_of(wg_out *out, const char *s) {
    size_t len = strlen(s);
    long found = lookup(&strings, s, len);
    if (found >= 0) return (uint32_t)found;
    uint32_t id = append(&strings, s, len);
    if (out->n_new_strings == out->cap_new_strings) {
        out->cap_new_strings = out->cap_new_strings ? 2 * out->cap_new_strings : 16;
        out->new_strings = xrealloc(out->new_strings, out->cap_new_strings * sizeof(char *));
        out->new_string_lens = xrealloc(out->new_string_lens, out->cap_new_strings * sizeof(size_t));
    }
    char *copy = xrealloc(NULL, len + 1);
    memcpy(copy, s, len + 1);
    out->new_strings[out->n_new_strings] = copy;
    out->new_string_lens[out->n_new_strings++] = len;
    return id;
}

static uint32_t set_of(wg_out *out, const wg_metadata *m) {
    if (!m) m = &wg_no_metadata;
    for (size_t i = 0; i < out->n_sets; i++) {
        /* By content: an address may be reused for another set (a local in a loop). */
        if (out->set_lens[i] != m->len) continue;
        bool same = true;
        for (size_t j = 0; j < m->len && same; j++)
            same = !strcmp(wg_string(out->sets[i][j].key), m->pairs[j].key) &&
                   !strcmp(wg_string(out->sets[i][j].value), m->pairs[j].value);
        if (same) return (uint32_t)i;
    }
    if (out->n_sets == out->cap_sets) {
        out->cap_sets = out->cap_sets ? 2 * out->cap_sets : 4;
        out->sets = xrealloc(out->sets, out->cap_sets * sizeof *out->sets);
        out->set_lens = xrealloc(out->set_lens, out->cap_sets * sizeof *out->set_lens);
        out->set_keys = xrealloc(out->set_keys, out->cap_sets * sizeof *out->set_keys);
    }
    wg_id_pair *pairs = xrealloc(NULL, m->len * sizeof *pairs);
    for (size_t j = 0; j < m->len; j++)
        pairs[j] = (wg_id_pair){id_of(out, m->pairs[j].key), id_of(out, m->pairs[j].value)};
    out->sets[out->n_sets] = pairs;
    out->set_lens[out->n_sets] = m->len;
    out->set_keys[out->n_sets] = m;
    return (uint32_t)out->n_sets++;
}

void wg_emit(wg_out *out, const wg_sample *s) {
    if (out->n == out->cap) {
        out->cap = out->cap ? 2 * out->cap : 64;
        out->ids = xrealloc(out->ids, 4 * out->cap * sizeof *out->ids);
        out->kinds = xrealloc(out->kinds, out->cap);
        out->values = xrealloc(out->values, out->cap * sizeof *out->values);
        out->timestamps_ns = xrealloc(out->timestamps_ns, out->cap * sizeof *out->timestamps_ns);
    }
    size_t i = out->n++;
    out->ids[4 * i] = id_of(out, s->name ? s->name : "");
    out->ids[4 * i + 1] = id_of(out, s->resource ? s->resource : "");
    out->ids[4 * i + 2] = id_of(out, s->unit ? s->unit : "");
    out->ids[4 * i + 3] = set_of(out, s->metadata);
    out->kinds[i] = (uint8_t)(s->kind <= WG_CUMULATIVE ? s->kind : WG_GAUGE);
    out->values[i] = s->value;
    out->timestamps_ns[i] = s->timestamp_ns;
}

const char *wg_metadata_get(const wg_metadata *m, const char *key) {
    for (size_t i = 0; m && i < m->len; i++)
        if (!strcmp(m->pairs[i].key, key)) return m->pairs[i].value;
    return NULL;
}

/* ---- parameters: a JSON object's top-level members ---------------------------------------- */

typedef enum { P_NULL, P_BOOL, P_NUMBER, P_STRING, P_OTHER } ptype;

typedef struct {
    char *key;
    ptype type;
    double number;
    bool boolean;
    char *string;
    char *json; /* the value's text, for error messages */
} member;

struct wg_params {
    member *members;
    size_t n;
};

typedef struct {
    const char *s, *end;
    const char *err;
} parser;

static char errbuf[256];

static void ws(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static bool fail(parser *p, const char *what) {
    if (!p->err) {
        snprintf(errbuf, sizeof errbuf, "parameters are not valid JSON: %s at byte %zu", what,
                 (size_t)(p->end - p->s));
        p->err = errbuf;
    }
    return false;
}

/* A JSON string at p->s; *out gets a malloc'd copy (escapes decoded, \u as UTF-8). */
static bool parse_string(parser *p, char **out) {
    if (p->s >= p->end || *p->s != '"') return fail(p, "expected a string");
    p->s++;
    size_t cap = 16, n = 0;
    char *buf = xrealloc(NULL, cap);
    for (;;) {
        if (p->s >= p->end) {
            free(buf);
            return fail(p, "unterminated string");
        }
        char c = *p->s++;
        if (c == '"') break;
        if (n + 5 > cap) buf = xrealloc(buf, cap *= 2);
        if (c != '\\') {
            buf[n++] = c;
            continue;
        }
        if (p->s >= p->end) break;
        char e = *p->s++;
        switch (e) {
        case 'n': buf[n++] = '\n'; break;
        case 't': buf[n++] = '\t'; break;
        case 'r': buf[n++] = '\r'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                if (p->s >= p->end) break;
                char h = *p->s++;
                cp = cp * 16 + (unsigned)(h >= 'a' ? h - 'a' + 10 : h >= 'A' ? h - 'A' + 10 : h - '0');
            }
            if (cp < 0x80) buf[n++] = (char)cp;
            else if (cp < 0x800) {
                buf[n++] = (char)(0xC0 | (cp >> 6));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[n++] = (char)(0xE0 | (cp >> 12));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: buf[n++] = e;
        }
    }
    buf[n] = 0;
    *out = buf;
    return true;
}

/* Skips any JSON value (nested objects and arrays included). */
static bool skip_value(parser *p) {
    ws(p);
    if (p->s >= p->end) return fail(p, "expected a value");
    char c = *p->s;
    if (c == '"') {
        char *tmp;
        if (!parse_string(p, &tmp)) return false;
        free(tmp);
        return true;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p->s++;
        ws(p);
        if (p->s < p->end && *p->s == close) return p->s++, true;
        for (;;) {
            if (c == '{') {
                char *k;
                ws(p);
                if (!parse_string(p, &k)) return false;
                free(k);
                ws(p);
                if (p->s >= p->end || *p->s++ != ':') return fail(p, "expected ':'");
            }
            if (!skip_value(p)) return false;
            ws(p);
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->end && *p->s == close) return p->s++, true;
            return fail(p, "expected ',' or a closing bracket");
        }
    }
    const char *start = p->s;
    while (p->s < p->end && !strchr(",}] \t\r\n", *p->s)) p->s++;
    if (p->s == start) return fail(p, "expected a value");
    return true;
}

wg_params *wg_params_parse(const char *text, size_t len, const char **err) {
    parser p = {text, text + len, NULL};
    wg_params *params = calloc(1, sizeof *params);
    if (!params) abort();
    ws(&p);
    if (p.s == p.end) return params;
    if ((size_t)(p.end - p.s) >= 4 && !memcmp(p.s, "null", 4)) return params;
    if (*p.s != '{') {
        *err = "parameters must be an object";
        wg_params_free(params);
        return NULL;
    }
    p.s++;
    ws(&p);
    if (p.s < p.end && *p.s == '}') return params;
    for (;;) {
        member m = {0};
        ws(&p);
        if (!parse_string(&p, &m.key)) break;
        ws(&p);
        if (p.s >= p.end || *p.s++ != ':') {
            free(m.key);
            fail(&p, "expected ':'");
            break;
        }
        ws(&p);
        const char *start = p.s;
        if (p.s < p.end && *p.s == '"') {
            m.type = P_STRING;
            if (!parse_string(&p, &m.string)) {
                free(m.key);
                break;
            }
        } else if (!skip_value(&p)) {
            free(m.key);
            break;
        } else {
            size_t n = (size_t)(p.s - start);
            char tmp[64];
            if (n == 4 && !memcmp(start, "null", 4)) m.type = P_NULL;
            else if (n == 4 && !memcmp(start, "true", 4)) m.type = P_BOOL, m.boolean = true;
            else if (n == 5 && !memcmp(start, "false", 5)) m.type = P_BOOL, m.boolean = false;
            else if (n < sizeof tmp && (*start == '-' || (*start >= '0' && *start <= '9'))) {
                memcpy(tmp, start, n);
                tmp[n] = 0;
                char *endp;
                m.number = strtod(tmp, &endp);
                m.type = *endp ? P_OTHER : P_NUMBER;
            } else m.type = P_OTHER;
        }
        size_t n = (size_t)(p.s - start);
        m.json = xrealloc(NULL, n + 1);
        memcpy(m.json, start, n);
        m.json[n] = 0;
        params->members = xrealloc(params->members, (params->n + 1) * sizeof(member));
        params->members[params->n++] = m;
        ws(&p);
        if (p.s < p.end && *p.s == ',') {
            p.s++;
            continue;
        }
        if (p.s < p.end && *p.s == '}') {
            *err = NULL;
            return params;
        }
        fail(&p, "expected ',' or '}'");
        break;
    }
    *err = p.err ? p.err : "parameters are not valid JSON";
    wg_params_free(params);
    return NULL;
}

void wg_params_free(wg_params *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->members[i].key);
        free(p->members[i].string);
        free(p->members[i].json);
    }
    free(p->members);
    free(p);
}

static const member *find(const wg_params *p, const char *key) {
    for (size_t i = 0; p && i < p->n; i++)
        if (!strcmp(p->members[i].key, key) && p->members[i].type != P_NULL) return &p->members[i];
    return NULL;
}

bool wg_param_has(const wg_params *p, const char *key) { return find(p, key) != NULL; }

static const char *wrong(const member *m, const char *what) {
    snprintf(errbuf, sizeof errbuf, "`%s` must be %s, got %s", m->key, what, m->json);
    return errbuf;
}

const char *wg_param_number(const wg_params *p, const char *key, double dflt, double *out) {
    const member *m = find(p, key);
    if (!m) return *out = dflt, NULL;
    if (m->type != P_NUMBER || !isfinite(m->number)) return wrong(m, "a number");
    *out = m->number;
    return NULL;
}

const char *wg_param_string(const wg_params *p, const char *key, const char *dflt, const char **out) {
    const member *m = find(p, key);
    if (!m) return *out = dflt, NULL;
    if (m->type != P_STRING) return wrong(m, "a string");
    *out = m->string;
    return NULL;
}

const char *wg_param_bool(const wg_params *p, const char *key, bool dflt, bool *out) {
    const member *m = find(p, key);
    if (!m) return *out = dflt, NULL;
    if (m->type != P_BOOL) return wrong(m, "true or false");
    *out = m->boolean;
    return NULL;
}

const char *wg_param_integer(const wg_params *p, const char *key, int64_t dflt, int64_t min,
                             int64_t max, int64_t *out) {
    const member *m = find(p, key);
    int64_t v = dflt;
    if (m) {
        /* As JSON parsers type it: a number without fraction or exponent. */
        if (m->type != P_NUMBER || strpbrk(m->json, ".eE")) return wrong(m, "an integer");
        char *endp;
        errno = 0;
        long long n = strtoll(m->json, &endp, 10);
        if (errno || *endp) return wrong(m, "an integer");
        v = (int64_t)n;
    }
    if (v < min) {
        snprintf(errbuf, sizeof errbuf, "`%s` must be at least %lld, got %lld", key, (long long)min,
                 (long long)v);
        return errbuf;
    }
    if (v > max) {
        snprintf(errbuf, sizeof errbuf, "`%s` must be at most %lld, got %lld", key, (long long)max,
                 (long long)v);
        return errbuf;
    }
    *out = v;
    return NULL;
}

/* ---- the agent's tree ------------------------------------------------------------------- */

/* A node of the namespace below the (nameless) top, node 0: an inner name or a metric. */
typedef struct {
    char *full;   /* the full dotted name, NUL-terminated */
    size_t seg;   /* where its last part starts in `full` */
    size_t len;   /* strlen(full) */
    int32_t parent, first, last, next; /* first and last child, next sibling: -1 for none */
    bool leaf;
    wg_pmid id;
    wg_semantics semantics;
    wg_type type;
    char *units, *help;
    uint32_t indom;
    int32_t next_same; /* the next metric with the same PMID, in order of addition */
} node;

struct wg_tree {
    char *root; /* NULL: none */
    node *nodes;
    size_t n, cap;
    /* Open addressing, both of `n_slots` (a power of two, at most half full): slot -> node + 1
     * (0: empty), by (parent, last part) and by PMID (the PMID's first metric). */
    uint32_t *by_child, *by_pmid;
    size_t n_slots;
    size_t n_metrics;
    /* The answers of the last children and names-of queries. */
    wg_child *kids;
    size_t cap_kids;
    const char **names;
    size_t cap_names;
};

static char tree_err[512];

static char *copy_n(const char *s, size_t len) {
    char *c = xrealloc(NULL, len + 1);
    memcpy(c, s, len);
    c[len] = 0;
    return c;
}

static uint64_t child_hash(int32_t parent, const char *seg, size_t len) {
    return hash(seg, len) ^ ((uint64_t)(parent + 1) * 0x9E3779B97F4A7C15ULL);
}

static uint64_t pmid_hash(wg_pmid id) {
    uint64_t h = ((uint64_t)id.domain << 42) ^ ((uint64_t)id.cluster << 21) ^ id.item;
    h *= 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

static bool same_pmid(wg_pmid a, wg_pmid b) {
    return a.domain == b.domain && a.cluster == b.cluster && a.item == b.item;
}

static int32_t find_child(const wg_tree *t, int32_t parent, const char *seg, size_t len) {
    if (!t->n_slots) return -1;
    size_t mask = t->n_slots - 1;
    for (size_t i = child_hash(parent, seg, len) & mask; t->by_child[i]; i = (i + 1) & mask) {
        const node *c = &t->nodes[t->by_child[i] - 1];
        if (c->parent == parent && c->len - c->seg == len && !memcmp(c->full + c->seg, seg, len))
            return (int32_t)(t->by_child[i] - 1);
    }
    return -1;
}

/* The slot of a PMID's first metric, or of where it would go. */
static size_t pmid_slot(const wg_tree *t, wg_pmid id) {
    size_t mask = t->n_slots - 1;
    size_t i = pmid_hash(id) & mask;
    while (t->by_pmid[i] && !same_pmid(t->nodes[t->by_pmid[i] - 1].id, id)) i = (i + 1) & mask;
    return i;
}

static void index_node(wg_tree *t, int32_t k) {
    const node *c = &t->nodes[k];
    size_t mask = t->n_slots - 1;
    size_t i = child_hash(c->parent, c->full + c->seg, c->len - c->seg) & mask;
    while (t->by_child[i]) i = (i + 1) & mask;
    t->by_child[i] = (uint32_t)k + 1;
    if (!c->leaf) return;
    i = pmid_slot(t, c->id);
    if (!t->by_pmid[i]) {
        t->by_pmid[i] = (uint32_t)k + 1;
        return;
    }
    int32_t j = (int32_t)t->by_pmid[i] - 1;
    while (t->nodes[j].next_same >= 0) j = t->nodes[j].next_same;
    t->nodes[j].next_same = k;
}

/* Adds node `k` (already in `nodes`) to its parent's children and to the indexes. */
static void link_node(wg_tree *t, int32_t k) {
    node *c = &t->nodes[k];
    node *p = &t->nodes[c->parent];
    if (p->last >= 0) t->nodes[p->last].next = k;
    else p->first = k;
    p->last = k;
    if (2 * t->n > t->n_slots) {
        free(t->by_child);
        free(t->by_pmid);
        t->n_slots = t->n_slots ? 2 * t->n_slots : 64;
        while (2 * t->n > t->n_slots) t->n_slots *= 2;
        t->by_child = calloc(t->n_slots, sizeof *t->by_child);
        t->by_pmid = calloc(t->n_slots, sizeof *t->by_pmid);
        if (!t->by_child || !t->by_pmid) abort();
        for (size_t i = 0; i < t->n; i++) t->nodes[i].next_same = -1;
        for (size_t i = 1; i < t->n; i++) index_node(t, (int32_t)i);
    } else {
        index_node(t, k);
    }
}

/* Appends a node and links it to its parent and the indexes. */
static int32_t push_node(wg_tree *t, node nd) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->nodes = xrealloc(t->nodes, t->cap * sizeof *t->nodes);
    }
    int32_t k = (int32_t)t->n++;
    t->nodes[k] = nd;
    link_node(t, k);
    return k;
}

/* A node for the first `len` bytes of `name` (its last part starting at `seg`) under `parent`:
 * a non-leaf until `leaf` is set. */
static node make_node(int32_t parent, const char *name, size_t seg, size_t len) {
    return (node){
        .full = copy_n(name, len),
        .seg = seg,
        .len = len,
        .parent = parent,
        .first = -1,
        .last = -1,
        .next = -1,
        .next_same = -1,
        .indom = WG_INDOM_NULL,
    };
}

/* The node of a dotted name, or -1 (an empty name or part names no node). */
static int32_t find_name(const wg_tree *t, const char *name, size_t len) {
    int32_t cur = 0;
    size_t start = 0;
    if (!len) return -1;
    for (;;) {
        const char *dot = memchr(name + start, '.', len - start);
        size_t end = dot ? (size_t)(dot - name) : len;
        if (end == start) return -1;
        cur = find_child(t, cur, name + start, end - start);
        if (cur < 0 || !dot) return cur;
        start = end + 1;
    }
}

/* Non-empty parts separated by dots. */
static bool valid_dotted(const char *name) {
    if (!*name) return false;
    for (const char *p = name; *p; p++)
        if (*p == '.' && (p == name || !p[1] || p[1] == '.')) return false;
    return true;
}

/* Adds the nodes of `name`'s parts that are missing; returns the last one's. */
static int32_t make_path(wg_tree *t, const char *name, size_t len) {
    int32_t cur = 0;
    size_t start = 0;
    for (;;) {
        const char *dot = memchr(name + start, '.', len - start);
        size_t end = dot ? (size_t)(dot - name) : len;
        int32_t c = find_child(t, cur, name + start, end - start);
        cur = c >= 0 ? c : push_node(t, make_node(cur, name, start, end));
        if (!dot) return cur;
        start = end + 1;
    }
}

wg_tree *wg_tree_new(void) {
    wg_tree *t = calloc(1, sizeof *t);
    if (!t) abort();
    t->cap = 16;
    t->nodes = xrealloc(NULL, t->cap * sizeof *t->nodes);
    t->nodes[0] = (node){.full = copy_n("", 0), .parent = -1, .first = -1, .last = -1, .next = -1,
                         .next_same = -1};
    t->n = 1;
    return t;
}

static void drop_nodes(wg_tree *t) {
    for (size_t i = 1; i < t->n; i++) {
        free(t->nodes[i].full);
        free(t->nodes[i].units);
        free(t->nodes[i].help);
    }
    t->n = 1;
    t->nodes[0].first = t->nodes[0].last = -1;
    t->n_metrics = 0;
    if (t->n_slots) {
        memset(t->by_child, 0, t->n_slots * sizeof *t->by_child);
        memset(t->by_pmid, 0, t->n_slots * sizeof *t->by_pmid);
    }
}

void wg_tree_free(wg_tree *t) {
    if (!t) return;
    drop_nodes(t);
    free(t->nodes[0].full);
    free(t->nodes);
    free(t->by_child);
    free(t->by_pmid);
    free(t->kids);
    free(t->names);
    free(t->root);
    free(t);
}

void wg_tree_clear(wg_tree *t) {
    drop_nodes(t);
    if (t->root) make_path(t, t->root, strlen(t->root));
}

/* NULL when `name` is a dotted name, else the error naming it. */
static const char *check_name(const char *name) {
    if (name && valid_dotted(name)) return NULL;
    snprintf(tree_err, sizeof tree_err, "`%s` is not a metric name (dotted, no empty part)",
             name ? name : "(null)");
    return tree_err;
}

const char *wg_tree_root(wg_tree *t, const char *root) {
    const char *err = check_name(root);
    if (err) return err;
    free(t->root);
    t->root = copy_n(root, strlen(root));
    wg_tree_clear(t);
    return NULL;
}

size_t wg_tree_len(const wg_tree *t) { return t->n_metrics; }

const char *wg_tree_add(wg_tree *t, const char *name, wg_pmid id, wg_semantics semantics,
                        const char *units, const char *help, uint32_t indom) {
    const char *err = check_name(name);
    if (err) return err;
    size_t len = strlen(name);
    if (t->root) {
        size_t r = strlen(t->root);
        if (len <= r + 1 || memcmp(name, t->root, r) || name[r] != '.') {
            snprintf(tree_err, sizeof tree_err, "metric %s is not under %s", name, t->root);
            return tree_err;
        }
    }
    if ((unsigned)semantics > WG_DISCRETE) {
        snprintf(tree_err, sizeof tree_err, "metric %s: semantics must be WG_COUNTER, WG_INSTANT or WG_DISCRETE", name);
        return tree_err;
    }
    /* Refused before anything is added: a name is a leaf or a non-leaf, never both. */
    int32_t cur = 0;
    size_t start = 0;
    for (;;) {
        const char *dot = memchr(name + start, '.', len - start);
        size_t end = dot ? (size_t)(dot - name) : len;
        cur = find_child(t, cur, name + start, end - start);
        if (cur < 0) break;
        if (!dot) {
            snprintf(tree_err, sizeof tree_err,
                     t->nodes[cur].leaf ? "metric %s is declared twice"
                                        : "metric %s would be a leaf with metrics below it",
                     name);
            return tree_err;
        }
        if (t->nodes[cur].leaf) {
            snprintf(tree_err, sizeof tree_err, "metric %s would be below metric %s", name,
                     t->nodes[cur].full);
            return tree_err;
        }
        start = end + 1;
    }
    int32_t parent = 0;
    const char *last_dot = strrchr(name, '.');
    if (last_dot) parent = make_path(t, name, (size_t)(last_dot - name));
    node leaf = make_node(parent, name, last_dot ? (size_t)(last_dot - name) + 1 : 0, len);
    leaf.leaf = true;
    leaf.id = id;
    leaf.semantics = semantics;
    leaf.type = WG_DOUBLE;
    leaf.units = copy_n(units ? units : "", units ? strlen(units) : 0);
    leaf.help = copy_n(help ? help : "", help ? strlen(help) : 0);
    leaf.indom = indom;
    push_node(t, leaf);
    t->n_metrics++;
    return NULL;
}

int wg_tree_lookup(const wg_tree *t, const char *name, size_t len, wg_pmid *out) {
    int32_t k = find_name(t, name, len);
    if (k < 0) return WG_UNKNOWN_NAME;
    if (!t->nodes[k].leaf) return WG_NON_LEAF;
    *out = t->nodes[k].id;
    return WG_OK;
}

static int32_t first_of(const wg_tree *t, wg_pmid id) {
    if (!t->n_slots) return -1;
    size_t i = pmid_slot(t, id);
    return t->by_pmid[i] ? (int32_t)t->by_pmid[i] - 1 : -1;
}

int wg_tree_names_of(wg_tree *t, wg_pmid id, const char *const **names, size_t *n) {
    *n = 0;
    *names = NULL;
    int32_t k = first_of(t, id);
    if (k < 0) return WG_UNKNOWN_PMID;
    for (; k >= 0; k = t->nodes[k].next_same) {
        if (*n == t->cap_names) {
            t->cap_names = t->cap_names ? 2 * t->cap_names : 4;
            t->names = xrealloc(t->names, t->cap_names * sizeof *t->names);
        }
        t->names[(*n)++] = t->nodes[k].full;
    }
    *names = t->names;
    return WG_OK;
}

int wg_tree_children(wg_tree *t, const char *name, size_t len, const wg_child **kids, size_t *n) {
    *n = 0;
    *kids = NULL;
    int32_t k = find_name(t, name, len);
    if (k < 0) return WG_UNKNOWN_NAME;
    for (int32_t c = t->nodes[k].first; c >= 0; c = t->nodes[c].next) {
        if (*n == t->cap_kids) {
            t->cap_kids = t->cap_kids ? 2 * t->cap_kids : 8;
            t->kids = xrealloc(t->kids, t->cap_kids * sizeof *t->kids);
        }
        t->kids[(*n)++] = (wg_child){t->nodes[c].full + t->nodes[c].seg, t->nodes[c].leaf};
    }
    *kids = t->kids;
    return WG_OK;
}

int wg_tree_describe(const wg_tree *t, wg_pmid id, wg_metric *out) {
    int32_t k = first_of(t, id);
    if (k < 0) return WG_UNKNOWN_PMID;
    const node *m = &t->nodes[k];
    *out = (wg_metric){m->full, m->id, m->semantics, m->units, m->help, m->indom, m->type};
    return WG_OK;
}

const char *wg_tree_set_type(wg_tree *t, wg_pmid id, wg_type type) {
    if ((unsigned)type > WG_TEXT) {
        snprintf(tree_err, sizeof tree_err, "type %d is not a wg_type", (int)type);
        return tree_err;
    }
    int32_t k = first_of(t, id);
    if (k < 0) {
        snprintf(tree_err, sizeof tree_err, "no metric has PMID %u.%u.%u", id.domain, id.cluster,
                 id.item);
        return tree_err;
    }
    for (; k >= 0; k = t->nodes[k].next_same) t->nodes[k].type = type;
    return NULL;
}

/* ---- fetched values and errors ------------------------------------------------------------ */

void wg_values_init(wg_values *out) { memset(out, 0, sizeof *out); }

void wg_values_clear(wg_values *out) {
    if (out->kinds & (1u << WG_ATOM_TEXT))
        for (size_t i = 0; i < out->n; i++)
            if (wg_values_kind(out, i) == WG_ATOM_TEXT) free(out->cell[i].text);
    out->n = 0;
    out->kinds = 0;
}

void wg_values_free(wg_values *out) {
    wg_values_clear(out);
    free(out->inst);
    free(out->cell);
    free(out->kind);
    wg_values_init(out);
}

/* Room for `more` values: a first column gets exactly its size (most metrics are one column or
 * a few values), later growth doubles. */
static void reserve(wg_values *out, size_t more) {
    if (out->cap - out->n >= more) return;
    size_t cap = out->cap ? 2 * out->cap : 4;
    if (cap < out->n + more) cap = out->n + more;
    out->inst = xrealloc(out->inst, cap * sizeof *out->inst);
    out->cell = xrealloc(out->cell, cap * sizeof *out->cell);
    if (out->kind) out->kind = xrealloc(out->kind, cap * sizeof *out->kind);
    out->cap = cap;
}

/* Values of `kind` are about to be added at out->n: the per-value kinds are written out when
 * the values stop being of one kind (until then `kinds` alone says it, and no array is kept). */
static void add_kind(wg_values *out, wg_atom kind) {
    unsigned bit = 1u << kind;
    if (!out->kind && out->kinds && out->kinds != bit) {
        wg_atom was = wg_values_kind(out, 0);
        out->kind = xrealloc(NULL, out->cap);
        memset(out->kind, was, out->n);
    }
    out->kinds |= bit;
}

/* The next value's cell, with its instance and kind set. */
static wg_cell *push_value(wg_values *out, wg_inst instance, wg_atom kind) {
    reserve(out, 1);
    add_kind(out, kind);
    size_t i = out->n++;
    out->inst[i] = instance;
    if (out->kind) out->kind[i] = (uint8_t)kind;
    return &out->cell[i];
}

/* `n` values of `kind` (8 bytes each, as a wg_cell holds them). */
static void push_column(wg_values *out, const wg_inst *inst, const void *values, size_t n, wg_atom kind) {
    if (!n) return;
    reserve(out, n);
    add_kind(out, kind);
    memcpy(out->inst + out->n, inst, n * sizeof *inst);
    memcpy(out->cell + out->n, values, n * sizeof *out->cell);
    if (out->kind) memset(out->kind + out->n, kind, n);
    out->n += n;
}

void wg_values_uint_column(wg_values *out, const wg_inst *inst, const uint64_t *values, size_t n) {
    push_column(out, inst, values, n, WG_ATOM_UINT);
}

void wg_values_int_column(wg_values *out, const wg_inst *inst, const int64_t *values, size_t n) {
    push_column(out, inst, values, n, WG_ATOM_INT);
}

void wg_values_real_column(wg_values *out, const wg_inst *inst, const double *values, size_t n) {
    push_column(out, inst, values, n, WG_ATOM_REAL);
}

void wg_value_at(wg_values *out, wg_inst instance, double value) {
    push_value(out, instance, WG_ATOM_REAL)->value = value;
}

void wg_value_int_at(wg_values *out, wg_inst instance, int64_t value) {
    push_value(out, instance, WG_ATOM_INT)->i = value;
}

void wg_value_uint_at(wg_values *out, wg_inst instance, uint64_t value) {
    push_value(out, instance, WG_ATOM_UINT)->u = value;
}

void wg_value_text_at(wg_values *out, wg_inst instance, const char *text) {
    push_value(out, instance, WG_ATOM_TEXT)->text = copy_n(text ? text : "", text ? strlen(text) : 0);
}

void wg_value(wg_values *out, const char *instance, double value) {
    wg_value_at(out, wg_instance(instance), value);
}

void wg_value_int(wg_values *out, const char *instance, int64_t value) {
    wg_value_int_at(out, wg_instance(instance), value);
}

void wg_value_uint(wg_values *out, const char *instance, uint64_t value) {
    wg_value_uint_at(out, wg_instance(instance), value);
}

void wg_value_text(wg_values *out, const char *instance, const char *text) {
    wg_value_text_at(out, wg_instance(instance), text);
}

static char error_message[512];

int wg_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return WG_OTHER;
}

const char *wg_error_message(void) { return error_message; }

void wg_error_clear(void) { error_message[0] = 0; }
