/* `clamp`: keeps values inside [min, max]. A clamped sample keeps its series and gains the
 * metadata `clamped` = the original value; with `drop` set, samples outside are dropped instead.
 * Parameters: {"min": 0, "max": 100, "drop": false} (either bound may be left out). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmon_guest.h"

static double lo, hi;
static bool drop;

const char *wg_configure(const wg_params *p) {
    const char *err;
    if ((err = wg_param_number(p, "min", -INFINITY, &lo))) return err;
    if ((err = wg_param_number(p, "max", INFINITY, &hi))) return err;
    if ((err = wg_param_bool(p, "drop", false, &drop))) return err;
    if (lo > hi) return "`min` must not be above `max`";
    return NULL;
}

void wg_handle(wg_sample *in, size_t n, wg_out *out) {
    for (size_t i = 0; i < n; i++) {
        wg_sample *s = &in[i];
        if (s->value >= lo && s->value <= hi) {
            wg_emit(out, s);
            continue;
        }
        if (drop) continue;
        /* The input set plus one pair: emitted at once, so locals will do. */
        size_t len = s->metadata->len;
        wg_pair pairs[len + 1];
        memcpy(pairs, s->metadata->pairs, len * sizeof *pairs);
        char original[32];
        snprintf(original, sizeof original, "%g", s->value);
        pairs[len] = (wg_pair){"clamped", original};
        wg_metadata md = {pairs, len + 1};
        s->value = s->value < lo ? lo : hi;
        s->metadata = &md;
        wg_emit(out, s);
    }
}

void wg_flush(wg_out *out) { (void)out; }
