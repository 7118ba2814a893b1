/* The exporter's half of the C SDK: requests built by the guest (moved into the bindings'
 * return value by glue_exporter.c) and wasmon's sample JSON. Plain C, so that the SDK's native
 * tests cover it. */
#include "wasmon_guest.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *grow(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    if (!q) abort(); /* out of memory: the host sees a trap and retries the batch */
    return q;
}

static char *dup(const char *s) {
    if (!s) s = "";
    size_t len = strlen(s);
    char *c = grow(NULL, len + 1);
    memcpy(c, s, len + 1);
    return c;
}

void wg_requests_init(wg_requests *out) { memset(out, 0, sizeof *out); }

void wg_requests_free(wg_requests *out) {
    for (size_t i = 0; i < out->n; i++) {
        wg_request *r = out->v[i];
        free(r->content_type);
        free(r->suffix);
        for (size_t j = 0; j < r->n_headers; j++) {
            free(r->header_names[j]);
            free(r->header_values[j]);
        }
        free(r->header_names);
        free(r->header_values);
        free(r->body);
        free(r);
    }
    free(out->v);
    wg_requests_init(out);
}

wg_request *wg_request_new(wg_requests *out, const char *content_type) {
    if (out->n == out->cap) {
        out->cap = out->cap ? 2 * out->cap : 4;
        out->v = grow(out->v, out->cap * sizeof *out->v);
    }
    /* Each request is its own allocation: a pointer handed out stays valid as more are added. */
    wg_request *r = grow(NULL, sizeof *r);
    memset(r, 0, sizeof *r);
    r->content_type = dup(content_type);
    r->suffix = dup("");
    out->v[out->n++] = r;
    return r;
}

void wg_request_suffix(wg_request *r, const char *suffix) {
    free(r->suffix);
    r->suffix = dup(suffix);
}

void wg_request_header(wg_request *r, const char *name, const char *value) {
    if (r->n_headers == r->cap_headers) {
        r->cap_headers = r->cap_headers ? 2 * r->cap_headers : 4;
        r->header_names = grow(r->header_names, r->cap_headers * sizeof(char *));
        r->header_values = grow(r->header_values, r->cap_headers * sizeof(char *));
    }
    r->header_names[r->n_headers] = dup(name);
    r->header_values[r->n_headers] = dup(value);
    r->n_headers++;
}

/* Room for `more` bytes at the end of the body. */
static uint8_t *reserve(wg_request *r, size_t more) {
    if (r->len + more > r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        while (cap < r->len + more) cap *= 2;
        r->body = grow(r->body, cap);
        r->cap = cap;
    }
    return r->body + r->len;
}

void wg_request_write(wg_request *r, const void *bytes, size_t len) {
    if (len == 0) return;
    memcpy(reserve(r, len), bytes, len);
    r->len += len;
}

static void vprint(wg_request *r, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n > 0) {
        /* vsnprintf writes a NUL past the text: reserve it, but do not count it. */
        vsnprintf((char *)reserve(r, (size_t)n + 1), (size_t)n + 1, fmt, again);
        r->len += (size_t)n;
    }
    va_end(again);
}

void wg_request_printf(wg_request *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(r, fmt, ap);
    va_end(ap);
}

static void print(wg_request *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(r, fmt, ap);
    va_end(ap);
}

/* A JSON string: quotes, backslashes and control characters escaped; other bytes (UTF-8) as
 * they are. */
static void json_string(wg_request *r, const char *s) {
    wg_request_write(r, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            wg_request_write(r, esc, 2);
        } else if (*p < 0x20) {
            print(r, "\\u%04x", *p);
        } else {
            wg_request_write(r, p, 1);
        }
    }
    wg_request_write(r, "\"", 1);
}

/* The shortest of %.15g and %.17g that reads back as the same double. */
static void json_number(wg_request *r, double v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    wg_request_write(r, buf, strlen(buf));
}

/* Nanoseconds since the epoch as RFC 3339 in UTC with as many fraction digits as needed (0, 3,
 * 6 or 9), as wasmon writes them. Days to a civil date: Howard Hinnant's civil_from_days (no
 * libc time zone machinery in a sandbox). */
static void rfc3339(wg_request *r, int64_t ns) {
    int64_t secs = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        secs -= 1;
    }
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0) {
        sod += 86400;
        days -= 1;
    }
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    print(r, "\"%04lld-%02lld-%02lldT%02lld:%02lld:%02lld", (long long)year, (long long)month,
          (long long)day, (long long)(sod / 3600), (long long)(sod / 60 % 60), (long long)(sod % 60));
    if (frac == 0) print(r, "Z\"");
    else if (frac % 1000000 == 0) print(r, ".%03lldZ\"", (long long)(frac / 1000000));
    else if (frac % 1000 == 0) print(r, ".%06lldZ\"", (long long)(frac / 1000));
    else print(r, ".%09lldZ\"", (long long)frac);
}

static const char *const KINDS[] = {"gauge", "delta", "cumulative"};

void wg_request_sample_json(wg_request *r, const wg_sample *s) {
    print(r, "{\"name\":");
    json_string(r, s->name);
    print(r, ",\"resource\":");
    json_string(r, s->resource);
    print(r, ",\"value\":");
    /* JSON has no NaN or infinity: wasmon writes them as strings. */
    if (isnan(s->value)) print(r, "\"NaN\"");
    else if (isinf(s->value)) print(r, s->value > 0 ? "\"inf\"" : "\"-inf\"");
    else json_number(r, s->value);
    print(r, ",\"unit\":");
    json_string(r, s->unit ? s->unit : "");
    print(r, ",\"type\":\"%s\",\"timestamp\":", KINDS[s->kind <= WG_CUMULATIVE ? s->kind : 0]);
    rfc3339(r, s->timestamp_ns);
    print(r, ",\"metadata\":{");
    const wg_metadata *m = s->metadata ? s->metadata : &wg_no_metadata;
    for (size_t i = 0; i < m->len; i++) {
        if (i) print(r, ",");
        json_string(r, m->pairs[i].key);
        print(r, ":");
        json_string(r, m->pairs[i].value);
    }
    print(r, "}}");
}
