/* wasmon guest SDK for C (clang-19 for wasm32-wasip1, componentized by `wasmon guest build`).
 *
 * One SDK, three worlds (`world` in wasmon-guest.toml); a guest implements the functions of its
 * world only (the build links only that world's glue: glue_transformer.c, glue_agent.c or
 * glue_exporter.c).
 *
 * A transformer implements three functions over plain samples:
 *
 *     static double factor;
 *     const char *wg_configure(const wg_params *p) {
 *         return wg_param_number(p, "factor", 1.0, &factor);   // NULL: accepted
 *     }
 *     void wg_handle(wg_sample *in, size_t n, wg_out *out) {
 *         for (size_t i = 0; i < n; i++) { in[i].value *= factor; wg_emit(out, &in[i]); }
 *     }
 *     void wg_flush(wg_out *out) { (void)out; }
 *
 * What this SDK hides (see wit/types.wit): the string table the host and the guest share
 * (strings cross as ids; only strings the host has not seen are sent back; `reset` clears the
 * table), metadata sets, the column-wise batch and the kinds' byte encoding.
 *
 * Lifetimes: the strings and metadata of the samples passed to wg_handle are valid until
 * wg_handle returns; copy (strdup) what you keep for later. Strings of emitted samples are
 * copied by wg_emit's caller before the call returns, so any string may be emitted.
 *
 * An agent (world "agent") declares its metrics into a tree and fetches values; the SDK
 * answers the namespace (lookup-name, names-of, children) and describe from the tree:
 *
 *     static double ops;
 *     const char *wg_agent_configure(const wg_params *p, wg_tree *tree) {
 *         const char *err = wg_tree_root(tree, "foo");
 *         if (!err) err = wg_tree_add(tree, "foo.ops", (wg_pmid){44, 0, 0}, WG_COUNTER,
 *                                     "count", "operations", WG_INDOM_NULL);
 *         return err;                                           // NULL: accepted
 *     }
 *     int wg_agent_fetch(wg_tree *tree, wg_pmid id, wg_values *out) {
 *         if (id.cluster != 0 || id.item != 0) return WG_UNKNOWN_PMID;
 *         wg_value(out, "", ++ops);                             // "": a singular metric
 *         return WG_OK;
 *     }
 *
 * The tree may change at any time (a dynamic subtree): wg_agent_fetch, or the optional
 * wg_agent_fetched that runs after each fetch call, may wg_tree_clear it and add metrics again;
 * later look-ups see the new tree. Children are listed in the order their first metric was
 * added. The `mapped` import (files the daemon grants) is called directly through the
 * bindings: #include "agent.h".
 *
 * An exporter (world "exporter") turns each batch into the requests the host sends (the host
 * owns the queue, retries and TLS; the exporter only the bytes):
 *
 *     const char *wg_exporter_configure(const wg_params *p) { return NULL; }
 *     const char *wg_exporter_encode(const wg_sample *s, size_t n, wg_requests *out) {
 *         wg_request *r = wg_request_new(out, "application/x-ndjson");
 *         for (size_t i = 0; i < n; i++) {
 *             wg_request_sample_json(r, &s[i]);
 *             wg_request_write(r, "\n", 1);
 *         }
 *         return NULL;                        // else: the batch can never be encoded
 *     }
 */
#ifndef WASMON_GUEST_H
#define WASMON_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { WG_GAUGE = 0, WG_DELTA = 1, WG_CUMULATIVE = 2 } wg_kind;

typedef struct {
    const char *key;
    const char *value;
} wg_pair;

/* A metadata set, shared by the samples of a batch that carry the same set. */
typedef struct {
    const wg_pair *pairs;
    size_t len;
} wg_metadata;

typedef struct {
    const char *name;
    const char *resource;
    const char *unit; /* "" when unknown */
    wg_kind kind;
    double value;
    int64_t timestamp_ns;
    const wg_metadata *metadata; /* never NULL (an empty set) */
} wg_sample;

/* The parameters (a JSON object's top-level members). */
typedef struct wg_params wg_params;
/* The samples a call passes on. */
typedef struct wg_out wg_out;

/* --- implemented by the guest --------------------------------------------------------- */

/* Called once before any batch; returns NULL to accept, else an error naming the parameter
 * (the SDK copies it). */
const char *wg_configure(const wg_params *params);
void wg_handle(wg_sample *samples, size_t n, wg_out *out);
void wg_flush(wg_out *out);

/* --- provided by the SDK ---------------------------------------------------------------- */

/* Passes a sample on (its strings and metadata are looked up or copied at once). */
void wg_emit(wg_out *out, const wg_sample *sample);

/* The empty metadata set. */
extern const wg_metadata wg_no_metadata;

/* Value of `key` in a metadata set, or NULL. */
const char *wg_metadata_get(const wg_metadata *m, const char *key);

/* Typed parameter getters: store the value (or `dflt` when the key is absent or null) in
 * `*out` and return NULL, or return an error naming the parameter. */
const char *wg_param_number(const wg_params *p, const char *key, double dflt, double *out);
const char *wg_param_string(const wg_params *p, const char *key, const char *dflt, const char **out);
const char *wg_param_bool(const wg_params *p, const char *key, bool dflt, bool *out);
/* Whether `key` is present (and not null). */
bool wg_param_has(const wg_params *p, const char *key);

typedef enum { WG_TRACE, WG_DEBUG, WG_INFO, WG_WARN, WG_ERROR } wg_level;
/* A log line attributed to this guest (printf format). */
void wg_log(wg_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- agents (world "agent") -------------------------------------------------------------- */

/* PCP-style metric identifier: domain (agent) . cluster . item. */
typedef struct {
    uint32_t domain, cluster, item;
} wg_pmid;

typedef enum { WG_COUNTER = 0, WG_INSTANT = 1, WG_DISCRETE = 2 } wg_semantics;

/* PCP's data type of a metric's values (the WIT `value-type`, in its order). A metric is
 * WG_DOUBLE until wg_tree_set_type says otherwise; a value of another kind (wg_value for a
 * WG_UINT64 counter) is converted by the host, integers rounded. */
typedef enum {
    WG_INT32 = 0, WG_UINT32 = 1, WG_INT64 = 2, WG_UINT64 = 3, WG_FLOAT = 4, WG_DOUBLE = 5, WG_TEXT = 6
} wg_type;

/* The indom of a singular metric (PCP's PM_INDOM_NULL). */
#define WG_INDOM_NULL 0xffffffffu

/* What namespace answers and fetches return: WG_OK, or PCP's PM_ERR_NAME, PM_ERR_NONLEAF,
 * PM_ERR_PMID, or WG_OTHER with a message (return wg_error(...)). */
enum { WG_OK = 0, WG_UNKNOWN_NAME = 1, WG_NON_LEAF = 2, WG_UNKNOWN_PMID = 3, WG_OTHER = 4 };

/* An agent's metrics: full dotted names under a root, each with its description. */
typedef struct wg_tree wg_tree;
/* The values of one metric in a fetch. */
typedef struct wg_values wg_values;

/* Implemented by an agent. Called once per instance with a fresh, empty tree to declare its
 * metrics into; returns NULL to accept, else an error naming the parameter (the SDK copies
 * it). */
const char *wg_agent_configure(const wg_params *params, wg_tree *tree);
/* Implemented by an agent: the values of one metric (wg_value each) and WG_OK, or why there
 * are none (WG_UNKNOWN_PMID, return wg_error("...")). One call per requested id, in order. */
int wg_agent_fetch(wg_tree *tree, wg_pmid id, wg_values *out);
/* Optional (the SDK's default does nothing): runs after each fetch call's metrics. */
void wg_agent_fetched(wg_tree *tree);

/* Empties the tree and makes `root` (a dotted name) its root: every metric is under it, and it
 * is a non-leaf even with no metric. NULL, or an error for an invalid name. */
const char *wg_tree_root(wg_tree *tree, const char *root);
/* Removes every metric (the root stays). */
void wg_tree_clear(wg_tree *tree);
/* Declares a metric (strings copied; units as PCP writes them, "" when dimensionless; indom
 * WG_INDOM_NULL when singular). NULL, or an error: a name not under the root, with an empty
 * part, already declared, below another metric or above one (a name is a leaf or a non-leaf,
 * never both). A PMID may have several names; describe answers with its first one's. */
const char *wg_tree_add(wg_tree *tree, const char *name, wg_pmid id, wg_semantics semantics,
                        const char *units, const char *help, uint32_t indom);
/* Sets the type of every metric with PMID `id` (the default is WG_DOUBLE). NULL, or an error:
 * no metric has that PMID, or `type` is not a wg_type. */
const char *wg_tree_set_type(wg_tree *tree, wg_pmid id, wg_type type);
/* How many metrics the tree has. */
size_t wg_tree_len(const wg_tree *tree);

/* One value of a fetched metric: `instance` is the instance's name, "" (or NULL) for a
 * singular metric (looked up, and copied the first time in a fetch call). */
void wg_value(wg_values *out, const char *instance, double value);
/* The same for integer metrics (exact past 2^53) and text metrics (`text` copied). */
void wg_value_int(wg_values *out, const char *instance, int64_t value);
void wg_value_uint(wg_values *out, const char *instance, uint64_t value);
void wg_value_text(wg_values *out, const char *instance, const char *text);

/* An instance's number in the fetch call in progress: each name crosses to the host once per
 * fetch call, values refer to it by number. An agent that reports many metrics of the same
 * instances takes each number once per fetch call (valid until the call returns) and gives it
 * to the _at functions below, which skip wg_value's look-up of the name. */
typedef uint32_t wg_inst;
wg_inst wg_instance(const char *name);
void wg_value_at(wg_values *out, wg_inst instance, double value);
void wg_value_int_at(wg_values *out, wg_inst instance, int64_t value);
void wg_value_uint_at(wg_values *out, wg_inst instance, uint64_t value);
void wg_value_text_at(wg_values *out, wg_inst instance, const char *text);
/* `n` values of one kind at once: value i is `values[i]`, of instance `inst[i]` (both copied).
 * An agent that keeps each metric's numbers together hands them over without a call per value;
 * a metric whose values are all of one numeric kind crosses to the host as one block. */
void wg_values_uint_column(wg_values *out, const wg_inst *inst, const uint64_t *values, size_t n);
void wg_values_int_column(wg_values *out, const wg_inst *inst, const int64_t *values, size_t n);
void wg_values_real_column(wg_values *out, const wg_inst *inst, const double *values, size_t n);

/* Sets the message of WG_OTHER (printf format) and returns WG_OTHER. */
int wg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Typed integer parameter (a JSON number without fraction or exponent) in [min, max]: stores it
 * (or `dflt`) in `*out` and returns NULL, or returns an error naming the parameter. */
const char *wg_param_integer(const wg_params *p, const char *key, int64_t dflt, int64_t min,
                             int64_t max, int64_t *out);

/* Reads the whole file at `path` (absolute, as the guest sees it, e.g. "/proc/self/mountstats"),
 * at most `max` bytes, in one call of the host's `files` interface where a read-only grant on a
 * local filesystem serves the path, else with fopen/fread. Returns 0 with *out a malloc'd copy
 * of the *len bytes plus a NUL (free it), or an errno: ENOENT, EACCES (permissions, or a path
 * leading outside the grant), EINVAL (not a regular file), EFBIG (larger than `max`), EIO. */
int wg_read_file(const char *path, size_t max, char **out, size_t *len);

/* --- exporters (world "exporter") -------------------------------------------------------- */

/* One request for the host to send, and the requests of one batch (sent in order). */
typedef struct wg_request wg_request;
typedef struct wg_requests wg_requests;

/* Implemented by an exporter. Called once per instance before any batch; returns NULL to
 * accept, else an error naming the parameter (the SDK copies it). */
const char *wg_exporter_configure(const wg_params *params);
/* Implemented by an exporter: adds the requests that carry the batch to `out` (none is fine)
 * and returns NULL, or returns why the batch can never be encoded (the host dead-letters it
 * with that message; the SDK copies it). A trap (abort) is not that: the host retries the batch
 * on a fresh instance. */
const char *wg_exporter_encode(const wg_sample *samples, size_t n, wg_requests *out);

/* A new request with an empty body, suffix and headers, appended to `out`; the pointer stays
 * valid until the call returns. `content_type` is copied. */
wg_request *wg_request_new(wg_requests *out, const char *content_type);
/* Appended to the sink's URL (`/v1/metrics`) or NATS subject (`.cpu`); copied. */
void wg_request_suffix(wg_request *r, const char *suffix);
/* Another header (copied); the host refuses the ones it owns (Host, Content-Length...). */
void wg_request_header(wg_request *r, const char *name, const char *value);
/* Appends bytes to the body. */
void wg_request_write(wg_request *r, const void *bytes, size_t len);
/* Appends formatted text to the body (printf format). */
void wg_request_printf(wg_request *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends a sample as wasmon's sample JSON (no newline): what `wasmon transform` writes and
 * the HTTP sample endpoint reads; timestamps RFC 3339 with nanoseconds, NaN and infinities as
 * the strings wasmon writes. */
void wg_request_sample_json(wg_request *r, const wg_sample *s);

/* --- the codec (used by the glue and by the SDK's native tests) ---------------------------- */

typedef struct {
    const char *ptr;
    size_t len;
} wg_str;

typedef struct {
    uint32_t key;
    uint32_t value;
} wg_id_pair;

typedef struct {
    const wg_id_pair *pairs;
    size_t len;
} wg_id_set;

/* A batch as the host sends it (views into the canonical ABI's buffers). */
typedef struct {
    bool reset;
    const wg_str *new_strings;
    size_t n_new_strings;
    const wg_id_set *metadata;
    size_t n_metadata;
    const uint32_t *ids; /* 4 per sample */
    const uint8_t *kinds;
    const double *values;
    const int64_t *timestamps_ns;
    size_t n;
} wg_batch_in;

/* A batch for the host: every array malloc'd (the canonical ABI frees them). */
struct wg_out {
    char **new_strings;
    size_t *new_string_lens;
    size_t n_new_strings, cap_new_strings;
    wg_id_pair **sets;
    size_t *set_lens;
    const wg_metadata **set_keys; /* which wg_metadata each set came from */
    size_t n_sets, cap_sets;
    uint32_t *ids;
    uint8_t *kinds;
    double *values;
    int64_t *timestamps_ns;
    size_t n, cap;
};

/* The WIT `batch` as wit-bindgen's C bindings lay it out, the same in every world (their
 * string is {uint8_t *, size_t}, like wg_str; their metadata set {tuple *, size_t}, like
 * wg_id_set): each world's glue casts its batch type to this one, checked by
 * WG_CHECK_ABI_BATCH, so that batch decoding is written once. */
typedef struct {
    bool reset;
    struct { const wg_str *ptr; size_t len; } new_strings;
    struct { const wg_id_set *ptr; size_t len; } metadata;
    struct { const uint32_t *ptr; size_t len; } ids;
    struct { const uint8_t *ptr; size_t len; } kinds;
    struct { const double *ptr; size_t len; } values;
    struct { const int64_t *ptr; size_t len; } timestamps_ns;
} wg_abi_batch;

#define WG_CHECK_ABI_BATCH(T)                                                                  \
    _Static_assert(sizeof(T) == sizeof(wg_abi_batch) &&                                        \
                       offsetof(T, new_strings) == offsetof(wg_abi_batch, new_strings) &&      \
                       offsetof(T, metadata) == offsetof(wg_abi_batch, metadata) &&            \
                       offsetof(T, timestamps_ns) == offsetof(wg_abi_batch, timestamps_ns),    \
                   "the bindings' batch is not laid out as wg_abi_batch")

/* wg_decode of a batch in the bindings' layout; never reads past the shortest column. */
wg_sample *wg_decode_abi(const wg_abi_batch *batch, size_t *n);

/* Takes in a batch: its strings join the table; returns its samples (valid until the next
 * call of wg_decode), their count in *n. NULL with *n == 0 for an empty batch. */
wg_sample *wg_decode(const wg_batch_in *batch, size_t *n);
/* An empty output. */
void wg_out_init(wg_out *out);
/* Frees an output the host did not take (tests). */
void wg_out_free(wg_out *out);
/* Parses parameters; returns NULL and sets *err on a bad document. */
wg_params *wg_params_parse(const char *text, size_t len, const char **err);
void wg_params_free(wg_params *p);
/* The string of a table id ("" when unknown), for tests. */
const char *wg_string(uint32_t id);

/* The exporter's requests: every array malloc'd (the canonical ABI frees what the glue moves
 * into its return value). */
struct wg_request {
    char *content_type;
    char *suffix;
    char **header_names;
    char **header_values;
    size_t n_headers, cap_headers;
    uint8_t *body;
    size_t len, cap;
};

struct wg_requests {
    wg_request **v;
    size_t n, cap;
};

void wg_requests_init(wg_requests *out);
/* Frees requests the host did not take (tests, an encode that failed). */
void wg_requests_free(wg_requests *out);

/* --- the agent's tree (used by glue_agent.c and by the SDK's native tests) ----------------- */

typedef struct {
    const char *name;
    bool leaf;
} wg_child;

typedef struct {
    const char *name; /* its first name */
    wg_pmid id;
    wg_semantics semantics;
    const char *units;
    const char *help;
    uint32_t indom;
    wg_type type;
} wg_metric;

/* Which member of a wg_cell holds a value (the WIT `atom` case). */
typedef enum { WG_ATOM_INT = 0, WG_ATOM_UINT = 1, WG_ATOM_REAL = 2, WG_ATOM_TEXT = 3 } wg_atom;

/* One value: the member its wg_atom names (8 bytes, as the WIT's list<u64>/<s64>/<f64>). */
typedef union {
    int64_t i;
    uint64_t u;
    double value;
    char *text; /* malloc'd */
} wg_cell;

/* Column-wise, as the WIT `indexed-values` carries them: value i is cell[i], of kind
 * wg_values_kind(values, i) and of instance inst[i] (its number in the fetch call,
 * wg_instance). */
struct wg_values {
    wg_inst *inst;
    wg_cell *cell;
    /* Each value's kind; NULL while all are of one kind (a malloc and a free less per metric). */
    uint8_t *kind;
    size_t n, cap;
    unsigned kinds; /* bit (1 << wg_atom) of every kind present */
};

/* The kind of value i of `v`. */
static inline wg_atom wg_values_kind(const wg_values *v, size_t i) {
    return v->kind ? (wg_atom)v->kind[i] : (wg_atom)__builtin_ctz(v->kinds);
}

wg_tree *wg_tree_new(void);
void wg_tree_free(wg_tree *tree);
/* The answers, for a name of `len` bytes: WG_OK or a WG_ error code. Pointers stored through
 * the out-parameters are valid until the tree changes or the same query runs again. */
int wg_tree_lookup(const wg_tree *tree, const char *name, size_t len, wg_pmid *out);
int wg_tree_names_of(wg_tree *tree, wg_pmid id, const char *const **names, size_t *n);
int wg_tree_children(wg_tree *tree, const char *name, size_t len, const wg_child **kids, size_t *n);
int wg_tree_describe(const wg_tree *tree, wg_pmid id, wg_metric *out);

void wg_values_init(wg_values *out);
/* Empties `out` (its texts freed), keeping its arrays for more values. */
void wg_values_clear(wg_values *out);
void wg_values_free(wg_values *out);
/* The fetch call's instance names: forgotten (at the start of a fetch call), counted, and
 * handed over one by one (malloc'd, NUL-terminated; the caller frees it). */
void wg_instances_reset(void);
size_t wg_instances_len(void);
char *wg_instances_take(size_t i, size_t *len);
/* The message of the last wg_error. */
const char *wg_error_message(void);
/* Empties the message (before each metric's fetch). */
void wg_error_clear(void);

#endif
