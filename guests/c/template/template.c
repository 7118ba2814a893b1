/* The `template` scale transformer in C: multiplies every sample whose name starts with
 * `prefix` by `factor` and may give it a new `unit` (the Rust guests/template, same output). */
#include <string.h>

#include "wasmon_guest.h"

static double factor;
static const char *prefix;
static const char *unit;

const char *wg_configure(const wg_params *p) {
    const char *err;
    if ((err = wg_param_number(p, "factor", 1.0, &factor))) return err;
    if ((err = wg_param_string(p, "prefix", "", &prefix))) return err;
    return wg_param_string(p, "unit", NULL, &unit);
}

void wg_handle(wg_sample *in, size_t n, wg_out *out) {
    size_t len = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        wg_sample *s = &in[i];
        if (!strncmp(s->name, prefix, len)) {
            s->value *= factor;
            if (unit) s->unit = unit;
        }
        wg_emit(out, s);
    }
}

void wg_flush(wg_out *out) { (void)out; }
