/* Connects the C SDK's codec and requests to the bindings wit-bindgen generates for the
 * `exporter` world (exporter.h, written by `wasmon guest build`); an exporter's build compiles
 * this file. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter.h"
#include "wasmon_guest.h"

typedef exports_wasmon_collector_encode_batch_t batch_t;
typedef exports_wasmon_collector_encode_request_t request_t;

WG_CHECK_ABI_BATCH(batch_t);

static wg_params *params;
static bool configured;

void wg_log(wg_level level, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    exporter_string_t msg = {(uint8_t *)buf, strlen(buf)};
    wasmon_collector_host_log((wasmon_collector_host_level_t)level, &msg);
}

bool exports_wasmon_collector_encode_configure(exporter_string_t *text, exporter_string_t *err) {
    const char *why = NULL;
    wg_params_free(params);
    /* Kept for the instance's life: strings from wg_param_string point into it. */
    params = wg_params_parse((const char *)text->ptr, text->len, &why);
    exporter_string_free(text);
    if (params) why = wg_exporter_configure(params);
    if (why) {
        exporter_string_dup(err, why);
        return false;
    }
    configured = true;
    return true;
}

/* A malloc'd string moved into the bindings' string (which the canonical ABI frees). */
static exporter_string_t take_string(char *s) { return (exporter_string_t){(uint8_t *)s, strlen(s)}; }

/* The requests, moved into the canonical ABI's return value (which frees them after the call). */
static void take(wg_requests *out, exports_wasmon_collector_encode_list_request_t *ret) {
    ret->len = out->n;
    ret->ptr = out->n ? malloc(out->n * sizeof(request_t)) : NULL;
    if (out->n && !ret->ptr) abort();
    for (size_t i = 0; i < out->n; i++) {
        wg_request *r = out->v[i];
        request_t *q = &ret->ptr[i];
        q->suffix = take_string(r->suffix);
        q->content_type = take_string(r->content_type);
        q->headers.len = r->n_headers;
        q->headers.ptr = r->n_headers ? malloc(r->n_headers * sizeof *q->headers.ptr) : NULL;
        if (r->n_headers && !q->headers.ptr) abort();
        for (size_t j = 0; j < r->n_headers; j++) {
            q->headers.ptr[j].f0 = take_string(r->header_names[j]);
            q->headers.ptr[j].f1 = take_string(r->header_values[j]);
        }
        q->body = (exporter_list_u8_t){r->body, r->len};
        free(r->header_names);
        free(r->header_values);
        free(r);
    }
    free(out->v);
}

bool exports_wasmon_collector_encode_encode(batch_t *input,
                                            exports_wasmon_collector_encode_list_request_t *ret,
                                            exporter_string_t *err) {
    size_t count;
    /* Decoded even before configure: the string table must follow every batch. */
    wg_sample *samples = wg_decode_abi((const wg_abi_batch *)input, &count);
    exports_wasmon_collector_encode_batch_free(input);
    if (!configured) {
        /* The host always configures first. An error would dead-letter the batch; a trap
         * leaves it queued for a fresh, configured instance. */
        wg_log(WG_ERROR, "encode called before configure");
        abort();
    }
    wg_requests out;
    wg_requests_init(&out);
    const char *why = wg_exporter_encode(samples, count, &out);
    if (why) {
        exporter_string_dup(err, why);
        wg_requests_free(&out);
        return false;
    }
    take(&out, ret);
    return true;
}
