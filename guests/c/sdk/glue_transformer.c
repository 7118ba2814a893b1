/* Connects the C SDK's codec to the bindings wit-bindgen generates for the `transformer`
 * world (transformer.h, written by `wasmon guest build`); a transformer's build compiles this
 * file, an agent's glue_agent.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transformer.h"
#include "wasmon_guest.h"

typedef exports_wasmon_collector_transform_batch_t batch_t;

static wg_params *params;
static bool configured;

void wg_log(wg_level level, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    transformer_string_t msg = {(uint8_t *)buf, strlen(buf)};
    wasmon_collector_host_log((wasmon_collector_host_level_t)level, &msg);
}

bool exports_wasmon_collector_transform_configure(transformer_string_t *text, transformer_string_t *err) {
    const char *why = NULL;
    wg_params_free(params);
    /* Kept for the instance's life: strings from wg_param_string point into it. */
    params = wg_params_parse((const char *)text->ptr, text->len, &why);
    transformer_string_free(text);
    if (params) why = wg_configure(params);
    if (why) {
        transformer_string_dup(err, why);
        return false;
    }
    configured = true;
    return true;
}

/* The output, moved into the canonical ABI's return value (which frees it after the call). */
static void take(wg_out *out, batch_t *ret) {
    memset(ret, 0, sizeof *ret);
    ret->reset = false;
    ret->new_strings.len = out->n_new_strings;
    ret->new_strings.ptr = out->n_new_strings ? malloc(out->n_new_strings * sizeof(transformer_string_t)) : NULL;
    for (size_t i = 0; i < out->n_new_strings; i++)
        ret->new_strings.ptr[i] = (transformer_string_t){(uint8_t *)out->new_strings[i], out->new_string_lens[i]};
    ret->metadata.len = out->n_sets;
    ret->metadata.ptr = out->n_sets ? malloc(out->n_sets * sizeof *ret->metadata.ptr) : NULL;
    for (size_t i = 0; i < out->n_sets; i++) {
        ret->metadata.ptr[i].len = out->set_lens[i];
        /* wg_id_pair and the bindings' tuple of two u32 have one layout. */
        ret->metadata.ptr[i].ptr = (transformer_tuple2_u32_u32_t *)out->sets[i];
    }
    ret->ids = (transformer_list_u32_t){out->ids, 4 * out->n};
    ret->kinds = (transformer_list_u8_t){out->kinds, out->n};
    ret->values = (transformer_list_f64_t){out->values, out->n};
    ret->timestamps_ns = (transformer_list_s64_t){out->timestamps_ns, out->n};
    free(out->new_strings);
    free(out->new_string_lens);
    free(out->sets);
    free(out->set_lens);
    free(out->set_keys);
}

WG_CHECK_ABI_BATCH(batch_t);

void exports_wasmon_collector_transform_handle(batch_t *input, batch_t *ret) {
    size_t count;
    wg_sample *samples = wg_decode_abi((const wg_abi_batch *)input, &count);
    wg_out out;
    wg_out_init(&out);
    if (configured) wg_handle(samples, count, &out);
    else wg_log(WG_ERROR, "handle called before configure");
    exports_wasmon_collector_transform_batch_free(input);
    take(&out, ret);
}

void exports_wasmon_collector_transform_flush(batch_t *ret) {
    wg_out out;
    wg_out_init(&out);
    if (configured) wg_flush(&out);
    take(&out, ret);
}
