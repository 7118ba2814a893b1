/* Native unit tests of the C SDK's codec (run by `cargo test`, tests/all/polyglot.rs). */
#include "wasmon_guest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static wg_batch_in batch(bool reset, const wg_str *strs, size_t n_strs, const wg_id_set *sets,
                         size_t n_sets, const uint32_t *ids, const uint8_t *kinds,
                         const double *values, const int64_t *ts, size_t n) {
    return (wg_batch_in){reset, strs, n_strs, sets, n_sets, ids, kinds, values, ts, n};
}

static void test_decode_and_encode_share_the_table(void) {
    wg_str strs[] = {{"cpu", 3}, {"host1", 5}, {"", 0}, {"k", 1}, {"v", 1}};
    wg_id_pair pairs[] = {{3, 4}};
    wg_id_set sets[] = {{NULL, 0}, {pairs, 1}};
    uint32_t ids[] = {0, 1, 2, 0, 0, 1, 2, 1};
    uint8_t kinds[] = {0, 2};
    double values[] = {1.5, 2.5};
    int64_t ts[] = {10, 20};
    wg_batch_in b = batch(true, strs, 5, sets, 2, ids, kinds, values, ts, 2);
    size_t n;
    wg_sample *s = wg_decode(&b, &n);
    CHECK(n == 2);
    CHECK(!strcmp(s[0].name, "cpu") && !strcmp(s[0].resource, "host1") && !strcmp(s[0].unit, ""));
    CHECK(s[0].metadata->len == 0);
    CHECK(s[1].kind == WG_CUMULATIVE && s[1].value == 2.5 && s[1].timestamp_ns == 20);
    CHECK(!strcmp(wg_metadata_get(s[1].metadata, "k"), "v"));
    CHECK(wg_metadata_get(s[1].metadata, "x") == NULL);

    /* Re-emitting the input sends no string again. */
    wg_out out;
    wg_out_init(&out);
    wg_emit(&out, &s[0]);
    wg_emit(&out, &s[1]);
    CHECK(out.n == 2 && out.n_new_strings == 0);
    CHECK(out.ids[0] == 0 && out.ids[1] == 1 && out.ids[2] == 2);
    CHECK(out.n_sets == 2 && out.ids[3] == 0 && out.ids[7] == 1);
    CHECK(out.sets[1][0].key == 3 && out.sets[1][0].value == 4);
    CHECK(out.kinds[1] == WG_CUMULATIVE && out.timestamps_ns[1] == 20);
    wg_out_free(&out);

    /* A new string is appended once, after the host's, and sent once. */
    wg_sample t = s[0];
    t.name = "cpu.busy";
    wg_out_init(&out);
    wg_emit(&out, &t);
    wg_emit(&out, &t);
    CHECK(out.n_new_strings == 1 && !strcmp(out.new_strings[0], "cpu.busy") && out.new_string_lens[0] == 8);
    CHECK(out.ids[0] == 5 && out.ids[4] == 5);
    wg_out_free(&out);
    CHECK(!strcmp(wg_string(5), "cpu.busy"));

    /* New metadata by content: its strings join the table too. */
    wg_pair mp[] = {{"anomaly", "true"}};
    wg_metadata md = {mp, 1};
    t.metadata = &md;
    wg_out_init(&out);
    wg_emit(&out, &t);
    CHECK(out.n_sets == 1 && out.n_new_strings == 2);
    CHECK(out.sets[0][0].key == 6 && out.sets[0][0].value == 7);
    wg_out_free(&out);

    /* Reset: the table starts again from the host's new strings. */
    wg_str strs2[] = {{"mem", 3}};
    uint32_t ids2[] = {0, 0, 0, 0};
    wg_batch_in b2 = batch(true, strs2, 1, sets, 1, ids2, kinds, values, ts, 1);
    s = wg_decode(&b2, &n);
    CHECK(n == 1 && !strcmp(s[0].name, "mem"));
    CHECK(!strcmp(wg_string(5), ""));
    wg_out_init(&out);
    t = s[0];
    t.resource = "cpu";
    wg_emit(&out, &t);
    CHECK(out.n_new_strings == 1 && !strcmp(out.new_strings[0], "cpu") && out.ids[1] == 1);
    wg_out_free(&out);

    /* Unknown ids and kinds read as "" and gauge. */
    uint32_t ids3[] = {99, 0, 0, 7};
    uint8_t kinds3[] = {9};
    wg_batch_in b3 = batch(false, NULL, 0, NULL, 0, ids3, kinds3, values, ts, 1);
    s = wg_decode(&b3, &n);
    CHECK(!strcmp(s[0].name, "") && s[0].kind == WG_GAUGE && s[0].metadata->len == 0);
}

static void test_params(void) {
    const char *err = NULL;
    const char *doc = "{\"factor\": 0.001, \"prefix\": \"disk.\\u00e9\", \"on\": true, \"nested\": {\"a\": [1, 2]}, \"none\": null}";
    wg_params *p = wg_params_parse(doc, strlen(doc), &err);
    CHECK(p != NULL && err == NULL);
    double f = 0;
    CHECK(wg_param_number(p, "factor", 1, &f) == NULL && f == 0.001);
    CHECK(wg_param_number(p, "absent", 7, &f) == NULL && f == 7);
    CHECK(wg_param_number(p, "none", 3, &f) == NULL && f == 3);
    const char *s = NULL;
    CHECK(wg_param_string(p, "prefix", "", &s) == NULL && !strcmp(s, "disk.\xc3\xa9"));
    const char *e = wg_param_string(p, "factor", "", &s);
    CHECK(e && strstr(e, "`factor` must be a string, got 0.001"));
    e = wg_param_number(p, "nested", 0, &f);
    CHECK(e && strstr(e, "`nested` must be a number"));
    bool on = false;
    CHECK(wg_param_bool(p, "on", false, &on) == NULL && on);
    CHECK(wg_param_has(p, "on") && !wg_param_has(p, "none"));
    wg_params_free(p);

    p = wg_params_parse("[1]", 3, &err);
    CHECK(p == NULL && err && strstr(err, "must be an object"));
    p = wg_params_parse("{\"a\": ", 6, &err);
    CHECK(p == NULL && err && strstr(err, "not valid JSON"));
    p = wg_params_parse("null", 4, &err);
    CHECK(p != NULL);
    wg_params_free(p);
}

int main(void) {
    test_decode_and_encode_share_the_table();
    test_params();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("wasmon_guest C SDK: all checks passed\n");
    return 0;
}
