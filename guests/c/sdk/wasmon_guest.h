/* wasmon guest SDK for C (clang-19 for wasm32-wasip1, componentized by `wasmon guest build`).
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

#endif
