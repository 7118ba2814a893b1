/* Connects the C SDK's agent tree to the bindings wit-bindgen generates for the `agent` world
 * (agent.h, written by `wasmon guest build`): the namespace and describe are answered from the
 * tree, fetch by the guest's wg_agent_fetch.
 *
 * Ownership, as wit-bindgen's C bindings have it: the arguments of an export (strings, lists)
 * are the callee's to free; what an export returns is freed by the bindings after the call
 * (post-return), each string and list with free() when its length is not zero, so every
 * returned non-empty buffer here is malloc'd and an empty one is NULL. Except fetch's: its
 * sets and numeric columns are carved from an arena kept from fetch to fetch, and its
 * post-return (defined here, over the bindings' weak one) frees only what is malloc'd. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "wasmon_guest.h"

typedef wasmon_collector_types_ns_error_t ns_error_t;

static wg_params *params;
static wg_tree *tree;

void wg_log(wg_level level, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    agent_string_t msg = {(uint8_t *)buf, strlen(buf)};
    wasmon_collector_host_log((wasmon_collector_host_level_t)level, &msg);
}

/* Bounded fopen/fread of a file the `files` interface does not serve. */
static int read_with_stdio(const char *path, size_t max, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return errno ? errno : EIO;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) abort();
    for (;;) {
        if (n == cap) {
            if (cap > max) break;
            cap *= 2;
            buf = realloc(buf, cap + 1);
            if (!buf) abort();
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0 || n > max) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed || n > max) {
        free(buf);
        return failed ? EIO : EFBIG;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

int wg_read_file(const char *path, size_t max, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    agent_string_t p = {(uint8_t *)path, strlen(path)};
    agent_list_u8_t bytes;
    wasmon_collector_files_file_error_t err;
    if (wasmon_collector_files_read_file(&p, (uint64_t)max, &bytes, &err)) {
        /* The bindings' buffer (malloc'd when not empty) grows by the NUL. */
        char *buf = bytes.len ? realloc(bytes.ptr, bytes.len + 1) : malloc(1);
        if (!buf) abort();
        buf[bytes.len] = 0;
        *out = buf;
        *len = bytes.len;
        return 0;
    }
    switch (err) {
    case WASMON_COLLECTOR_FILES_FILE_ERROR_NO_ENTRY: return ENOENT;
    case WASMON_COLLECTOR_FILES_FILE_ERROR_ACCESS: return EACCES;
    case WASMON_COLLECTOR_FILES_FILE_ERROR_WRONG_KIND: return EINVAL;
    case WASMON_COLLECTOR_FILES_FILE_ERROR_TOO_LARGE: return EFBIG;
    case WASMON_COLLECTOR_FILES_FILE_ERROR_ELSEWHERE: return read_with_stdio(path, max, out, len);
    default: return EIO;
    }
}

/* The default of the optional hook. */
__attribute__((weak)) void wg_agent_fetched(wg_tree *t) { (void)t; }

/* A string for the host: a malloc'd copy, NULL when empty. */
static void str_out(agent_string_t *ret, const char *s) {
    size_t len = strlen(s);
    ret->len = len;
    ret->ptr = NULL;
    if (!len) return;
    ret->ptr = malloc(len);
    if (!ret->ptr) abort();
    memcpy(ret->ptr, s, len);
}

static void *alloc_n(size_t n, size_t size) {
    if (!n) return NULL;
    void *p = malloc(n * size);
    if (!p) abort();
    return p;
}

/* A WG_ code (not WG_OK) as the WIT's ns-error. */
static void error_out(ns_error_t *err, int code, const char *message) {
    memset(err, 0, sizeof *err);
    switch (code) {
    case WG_UNKNOWN_NAME: err->tag = WASMON_COLLECTOR_TYPES_NS_ERROR_UNKNOWN_NAME; break;
    case WG_NON_LEAF: err->tag = WASMON_COLLECTOR_TYPES_NS_ERROR_NON_LEAF; break;
    case WG_UNKNOWN_PMID: err->tag = WASMON_COLLECTOR_TYPES_NS_ERROR_UNKNOWN_PMID; break;
    default:
        err->tag = WASMON_COLLECTOR_TYPES_NS_ERROR_OTHER;
        str_out(&err->val.other, message);
    }
}

static bool not_configured(ns_error_t *err) {
    error_out(err, WG_OTHER, "agent not configured");
    return false;
}

static wg_pmid from_wit(const wasmon_collector_types_pmid_t *id) {
    return (wg_pmid){id->domain, id->cluster, id->item};
}

bool exports_wasmon_collector_metrics_configure(agent_string_t *text, agent_string_t *err) {
    const char *why = NULL;
    wg_params_free(params);
    /* Kept for the instance's life: strings from wg_param_string point into it. */
    params = wg_params_parse((const char *)text->ptr, text->len, &why);
    agent_string_free(text);
    wg_tree *fresh = wg_tree_new();
    if (params) why = wg_agent_configure(params, fresh);
    if (why) {
        str_out(err, why);
        wg_tree_free(fresh);
        return false;
    }
    wg_tree_free(tree);
    tree = fresh;
    return true;
}

bool exports_wasmon_collector_namespace_lookup_name(agent_string_t *name, wasmon_collector_types_pmid_t *ret,
                                                    ns_error_t *err) {
    int code = WG_OTHER;
    wg_pmid id;
    if (tree) code = wg_tree_lookup(tree, (const char *)name->ptr, name->len, &id);
    agent_string_free(name);
    if (!tree) return not_configured(err);
    if (code != WG_OK) {
        error_out(err, code, "");
        return false;
    }
    *ret = (wasmon_collector_types_pmid_t){id.domain, id.cluster, id.item};
    return true;
}

bool exports_wasmon_collector_namespace_names_of(wasmon_collector_types_pmid_t *id, agent_list_string_t *ret,
                                                 ns_error_t *err) {
    if (!tree) return not_configured(err);
    const char *const *names;
    size_t n;
    int code = wg_tree_names_of(tree, from_wit(id), &names, &n);
    if (code != WG_OK) {
        error_out(err, code, "");
        return false;
    }
    ret->len = n;
    ret->ptr = alloc_n(n, sizeof *ret->ptr);
    for (size_t i = 0; i < n; i++) str_out(&ret->ptr[i], names[i]);
    return true;
}

bool exports_wasmon_collector_namespace_children(agent_string_t *name,
                                                 exports_wasmon_collector_namespace_list_child_t *ret,
                                                 ns_error_t *err) {
    int code = WG_OTHER;
    const wg_child *kids = NULL;
    size_t n = 0;
    if (tree) code = wg_tree_children(tree, (const char *)name->ptr, name->len, &kids, &n);
    agent_string_free(name);
    if (!tree) return not_configured(err);
    if (code != WG_OK) {
        error_out(err, code, "");
        return false;
    }
    ret->len = n;
    ret->ptr = alloc_n(n, sizeof *ret->ptr);
    for (size_t i = 0; i < n; i++) {
        str_out(&ret->ptr[i].name, kids[i].name);
        ret->ptr[i].leaf = kids[i].leaf;
    }
    return true;
}

bool exports_wasmon_collector_metrics_describe(wasmon_collector_types_pmid_t *id,
                                              wasmon_collector_types_metric_desc_t *ret, ns_error_t *err) {
    if (!tree) return not_configured(err);
    wg_metric m;
    int code = wg_tree_describe(tree, from_wit(id), &m);
    if (code != WG_OK) {
        error_out(err, code, "");
        return false;
    }
    memset(ret, 0, sizeof *ret);
    ret->id = *id;
    ret->value_type = (wasmon_collector_types_value_type_t)m.type;
    ret->semantics = (wasmon_collector_types_semantics_t)m.semantics;
    str_out(&ret->units, m.units);
    str_out(&ret->help, m.help);
    ret->indom.is_some = m.indom != WG_INDOM_NULL;
    ret->indom.val = ret->indom.is_some ? m.indom : 0;
    return true;
}

/* ---- fetch ---------------------------------------------------------------------------------
 * A fetch of 720 metrics returned 1,440 malloc'd lists (and a third per metric for kinds), each
 * freed in the post-return: a third of a small poll's time in the guest. Its sets and numeric
 * columns now come from blocks kept from fetch to fetch and reused from the start at each
 * fetch (the host has copied the last answer by then), and each metric's values are gathered
 * in one wg_values kept across metrics: in a steady state a fetch mallocs only its texts, its
 * error messages and its instance names. The blocks hold what the largest fetch needed. */

/* Blocks of at least this size (a 3-mount nfsclient fetch needs ~50 KiB). */
#define ARENA_BLOCK (64 * 1024)

typedef struct block {
    struct block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} block;

static block *blocks, *current;

static void arena_reset(void) {
    for (block *b = blocks; b; b = b->next) b->used = 0;
    current = blocks;
}

/* `bytes` bytes aligned to 16 (lists of 8-byte numbers need 8), NULL for none. */
static void *arena_alloc(size_t bytes) {
    if (!bytes) return NULL;
    bytes = (bytes + 15) & ~(size_t)15;
    for (; current; current = current->next) {
        if (current->size - current->used >= bytes) {
            void *p = current->data + current->used;
            current->used += bytes;
            return p;
        }
        if (!current->next) break;
    }
    size_t size = bytes > ARENA_BLOCK ? bytes : ARENA_BLOCK;
    block *b = malloc(sizeof *b + size);
    if (!b) abort();
    b->next = NULL;
    b->size = size;
    b->used = bytes;
    if (current)
        current->next = b;
    else
        blocks = b;
    current = b;
    return b->data;
}

static void *arena_copy(const void *from, size_t bytes) {
    void *p = arena_alloc(bytes);
    if (bytes) memcpy(p, from, bytes);
    return p;
}

/* One metric's values as the WIT `indexed-values`, emptying `vals` (its arrays are kept for the
 * next metric): the instance numbers and, when all values are of one numeric kind (wg_cell is
 * 8 bytes, as u64, s64 and f64 are), the cells as one typed list, copied to the arena; else
 * malloc'd atoms (each text moves). */
static wasmon_collector_types_indexed_values_t columns(wg_values *vals) {
    wasmon_collector_types_indexed_values_t out;
    memset(&out, 0, sizeof out);
    size_t n = vals->n;
    wasmon_collector_types_column_t *col = &out.values;
    col->tag = WASMON_COLLECTOR_TYPES_COLUMN_ATOMS;
    if (!n) return out;
    out.instances = (agent_list_u32_t){arena_copy(vals->inst, n * sizeof *vals->inst), n};
    void *cells = NULL;
    if (vals->kinds == 1u << WG_ATOM_UINT || vals->kinds == 1u << WG_ATOM_INT ||
        vals->kinds == 1u << WG_ATOM_REAL)
        cells = arena_copy(vals->cell, n * sizeof *vals->cell);
    switch (vals->kinds) {
    case 1u << WG_ATOM_UINT:
        col->tag = WASMON_COLLECTOR_TYPES_COLUMN_UINT;
        col->val.uint = (agent_list_u64_t){cells, n};
        break;
    case 1u << WG_ATOM_INT:
        col->tag = WASMON_COLLECTOR_TYPES_COLUMN_INT;
        col->val.int_ = (agent_list_s64_t){cells, n};
        break;
    case 1u << WG_ATOM_REAL:
        col->tag = WASMON_COLLECTOR_TYPES_COLUMN_REAL;
        col->val.real = (agent_list_f64_t){cells, n};
        break;
    default: {
        wasmon_collector_types_atom_t *atoms = alloc_n(n, sizeof *atoms);
        for (size_t j = 0; j < n; j++) {
            wasmon_collector_types_atom_t *a = &atoms[j];
            memset(a, 0, sizeof *a);
            wg_atom kind = wg_values_kind(vals, j);
            a->tag = kind; /* wg_atom is the WIT case order */
            switch (kind) {
            case WG_ATOM_INT: a->val.int_ = vals->cell[j].i; break;
            case WG_ATOM_UINT: a->val.uint = vals->cell[j].u; break;
            case WG_ATOM_REAL: a->val.real = vals->cell[j].value; break;
            case WG_ATOM_TEXT: {
                /* The malloc'd text moves to the host's list. */
                char *t = vals->cell[j].text;
                size_t len = strlen(t);
                if (!len) free(t), t = NULL;
                a->val.text = (agent_string_t){(uint8_t *)t, len};
                break;
            }
            }
        }
        col->val.atoms = (wasmon_collector_types_list_atom_t){atoms, n};
    }
    }
    /* Emptied, its texts moved: kept for the next metric. */
    vals->n = 0;
    vals->kinds = 0;
    return out;
}

/* What the last fetch returned, for its post-return. */
static wasmon_collector_types_fetched_t answered;
/* One metric's values at a time, kept across metrics and fetches. */
static wg_values gathered;

void exports_wasmon_collector_metrics_fetch(exports_wasmon_collector_metrics_list_pmid_t *ids,
                                            wasmon_collector_types_fetched_t *ret) {
    size_t n = ids->len;
    wg_instances_reset();
    arena_reset();
    ret->sets.len = n;
    ret->sets.ptr = arena_alloc(n * sizeof *ret->sets.ptr);
    for (size_t i = 0; i < n; i++) {
        wasmon_collector_types_indexed_set_t *set = &ret->sets.ptr[i];
        memset(set, 0, sizeof *set);
        set->id = ids->ptr[i];
        if (!tree) {
            set->values.is_err = true;
            error_out(&set->values.val.err, WG_OTHER, "agent not configured");
            continue;
        }
        /* Cleared, not formatted: a vsnprintf per metric was a tenth of a C agent's poll. */
        wg_error_clear();
        int code = wg_agent_fetch(tree, from_wit(&ids->ptr[i]), &gathered);
        if (code != WG_OK) {
            /* One metric failing does not fail the others. */
            wg_values_clear(&gathered);
            set->values.is_err = true;
            if (code < WG_OK || code > WG_OTHER) wg_error("fetch failed with code %d", code);
            const char *message = wg_error_message();
            error_out(&set->values.val.err, code, *message ? message : "fetch failed");
            continue;
        }
        set->values.val.ok = columns(&gathered);
    }
    /* Each instance name once: the malloc'd copies move to the host's list (NULL for ""). */
    size_t n_inst = wg_instances_len();
    ret->instances.len = n_inst;
    ret->instances.ptr = arena_alloc(n_inst * sizeof *ret->instances.ptr);
    for (size_t i = 0; i < n_inst; i++) {
        size_t len;
        char *name = wg_instances_take(i, &len);
        if (!len) {
            free(name);
            name = NULL;
        }
        ret->instances.ptr[i] = (agent_string_t){(uint8_t *)name, len};
    }
    wg_instances_reset();
    exports_wasmon_collector_metrics_list_pmid_free(ids);
    answered = *ret;
    /* An agent may change its namespace between fetches (a dynamic subtree). */
    if (tree) wg_agent_fetched(tree);
}

/* After the host has read the answer: frees its malloc'd parts (instance names, error messages,
 * atoms and their texts); the arena's are reused by the next fetch. Replaces the bindings' weak
 * post-return, which would free() every list. */
__attribute__((__export_name__("cabi_post_wasmon:collector/metrics@0.1.0#fetch")))
void __wasm_export_exports_wasmon_collector_metrics_fetch_post_return(uint8_t *arg0) {
    (void)arg0;
    for (size_t i = 0; i < answered.instances.len; i++) free(answered.instances.ptr[i].ptr);
    for (size_t i = 0; i < answered.sets.len; i++) {
        wasmon_collector_types_indexed_set_t *set = &answered.sets.ptr[i];
        if (set->values.is_err) {
            if (set->values.val.err.tag == WASMON_COLLECTOR_TYPES_NS_ERROR_OTHER)
                free(set->values.val.err.val.other.ptr);
            continue;
        }
        wasmon_collector_types_column_t *col = &set->values.val.ok.values;
        if (col->tag != WASMON_COLLECTOR_TYPES_COLUMN_ATOMS) continue;
        for (size_t j = 0; j < col->val.atoms.len; j++)
            if (col->val.atoms.ptr[j].tag == WASMON_COLLECTOR_TYPES_ATOM_TEXT)
                free(col->val.atoms.ptr[j].val.text.ptr);
        free(col->val.atoms.ptr);
    }
    memset(&answered, 0, sizeof answered);
}
