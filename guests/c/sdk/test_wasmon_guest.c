/* Native unit tests of the C SDK's codec and agent tree (run by `cargo test`,
 * tests/all/polyglot/mod.rs). */
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

static wg_pmid pm(uint32_t d, uint32_t c, uint32_t i) { return (wg_pmid){d, c, i}; }

static bool same(wg_pmid a, wg_pmid b) { return a.domain == b.domain && a.cluster == b.cluster && a.item == b.item; }

static int lookup(wg_tree *t, const char *name, wg_pmid *id) {
    return wg_tree_lookup(t, name, strlen(name), id);
}

/* "name:leaf name:inner ..." of a node's children, or the error code as text. */
static const char *kids_of(wg_tree *t, const char *name) {
    static char buf[512];
    const wg_child *kids;
    size_t n;
    int code = wg_tree_children(t, name, strlen(name), &kids, &n);
    if (code != WG_OK) {
        snprintf(buf, sizeof buf, "error %d", code);
        return buf;
    }
    buf[0] = 0;
    for (size_t i = 0; i < n; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s:%s", i ? " " : "", kids[i].name,
                 kids[i].leaf ? "leaf" : "inner");
    return buf;
}

static void test_tree_answers_the_namespace(void) {
    wg_tree *t = wg_tree_new();
    CHECK(wg_tree_root(t, "c.dyn") == NULL);
    CHECK(!strcmp(kids_of(t, "c.dyn"), ""));   /* the root is a non-leaf with no metric */
    wg_pmid id;
    CHECK(lookup(t, "c.dyn", &id) == WG_NON_LEAF);
    CHECK(wg_tree_add(t, "c.dyn.slots", pm(46, 0, 0), WG_DISCRETE, "", "number of slots", WG_INDOM_NULL) == NULL);
    CHECK(wg_tree_add(t, "c.dyn.slot.0.hits", pm(46, 1, 0), WG_COUNTER, "count", "hits of slot 0", WG_INDOM_NULL) == NULL);
    CHECK(wg_tree_add(t, "c.dyn.slot.1.hits", pm(46, 1, 1), WG_COUNTER, "count", "hits of slot 1", WG_INDOM_NULL) == NULL);
    CHECK(wg_tree_add(t, "c.dyn.disk.read", pm(46, 2, 0), WG_INSTANT, "Kbyte / sec", NULL, 7) == NULL);
    CHECK(wg_tree_len(t) == 4);

    /* lookup-name: a leaf's PMID; a non-leaf; unknown names (empty parts included). */
    CHECK(lookup(t, "c.dyn.slot.1.hits", &id) == WG_OK && same(id, pm(46, 1, 1)));
    CHECK(lookup(t, "c.dyn.slots", &id) == WG_OK && same(id, pm(46, 0, 0)));
    CHECK(lookup(t, "c.dyn.slot", &id) == WG_NON_LEAF);
    CHECK(lookup(t, "c.dyn.slot.1", &id) == WG_NON_LEAF);
    CHECK(lookup(t, "c", &id) == WG_NON_LEAF);
    CHECK(lookup(t, "c.dyn.slot.2.hits", &id) == WG_UNKNOWN_NAME);
    CHECK(lookup(t, "c.dyn.slots.x", &id) == WG_UNKNOWN_NAME);
    CHECK(lookup(t, "c.dyn.slot..hits", &id) == WG_UNKNOWN_NAME);
    CHECK(lookup(t, "c.dyn.", &id) == WG_UNKNOWN_NAME);
    CHECK(lookup(t, "", &id) == WG_UNKNOWN_NAME);
    CHECK(lookup(t, "other", &id) == WG_UNKNOWN_NAME);
    /* By length: a name is not read past `len` (no NUL needed), and a NUL inside does not end it. */
    CHECK(wg_tree_lookup(t, "c.dyn.slotsXYZ", 11, &id) == WG_OK && same(id, pm(46, 0, 0)));
    CHECK(wg_tree_lookup(t, "c.dyn.slots\0x", 13, &id) == WG_UNKNOWN_NAME);

    /* children: in order of first insertion, with leaf status; a leaf has none. */
    CHECK(!strcmp(kids_of(t, "c.dyn"), "slots:leaf slot:inner disk:inner"));
    CHECK(!strcmp(kids_of(t, "c.dyn.slot"), "0:inner 1:inner"));
    CHECK(!strcmp(kids_of(t, "c.dyn.slot.0"), "hits:leaf"));
    CHECK(!strcmp(kids_of(t, "c"), "dyn:inner"));
    CHECK(!strcmp(kids_of(t, "c.dyn.slots"), ""));
    CHECK(!strcmp(kids_of(t, "c.dyn.nothing"), "error 1"));

    /* names-of and describe. */
    const char *const *names;
    size_t n;
    CHECK(wg_tree_names_of(t, pm(46, 0, 0), &names, &n) == WG_OK && n == 1 && !strcmp(names[0], "c.dyn.slots"));
    CHECK(wg_tree_names_of(t, pm(46, 9, 9), &names, &n) == WG_UNKNOWN_PMID && n == 0);
    CHECK(wg_tree_names_of(t, pm(47, 0, 0), &names, &n) == WG_UNKNOWN_PMID);
    wg_metric m;
    CHECK(wg_tree_describe(t, pm(46, 1, 0), &m) == WG_OK);
    CHECK(m.semantics == WG_COUNTER && !strcmp(m.units, "count") && !strcmp(m.help, "hits of slot 0"));
    CHECK(m.indom == WG_INDOM_NULL && !strcmp(m.name, "c.dyn.slot.0.hits") && same(m.id, pm(46, 1, 0)));
    CHECK(wg_tree_describe(t, pm(46, 2, 0), &m) == WG_OK && m.indom == 7 && !strcmp(m.help, "") &&
          m.semantics == WG_INSTANT && !strcmp(m.units, "Kbyte / sec"));
    CHECK(wg_tree_describe(t, pm(46, 1, 2), &m) == WG_UNKNOWN_PMID);

    /* Types: WG_DOUBLE until set; set for a PMID, refused for none or a bad type. */
    CHECK(wg_tree_describe(t, pm(46, 1, 0), &m) == WG_OK && m.type == WG_DOUBLE);
    CHECK(wg_tree_set_type(t, pm(46, 1, 0), WG_UINT64) == NULL);
    CHECK(wg_tree_describe(t, pm(46, 1, 0), &m) == WG_OK && m.type == WG_UINT64);
    CHECK(wg_tree_describe(t, pm(46, 1, 1), &m) == WG_OK && m.type == WG_DOUBLE);
    CHECK(wg_tree_set_type(t, pm(46, 9, 9), WG_UINT64) != NULL);
    CHECK(wg_tree_set_type(t, pm(46, 1, 0), (wg_type)9) != NULL);

    /* Values of every kind, freed with their texts; instances by number. */
    wg_instances_reset();
    wg_values vals;
    wg_values_init(&vals);
    wg_value(&vals, "", 0.5);
    wg_value_uint(&vals, "cpu0", UINT64_MAX);
    wg_value_int(&vals, NULL, -7);
    wg_value_text(&vals, "x", "idle");
    CHECK(wg_instances_len() == 3);
    CHECK(vals.n == 4 && vals.kind[0] == WG_ATOM_REAL && vals.cell[0].value == 0.5 && vals.inst[0] == 0);
    CHECK(vals.kind[1] == WG_ATOM_UINT && vals.cell[1].u == UINT64_MAX && vals.inst[1] == 1);
    CHECK(vals.inst[2] == 0 && vals.inst[3] == 2);
    CHECK(vals.kind[2] == WG_ATOM_INT && vals.cell[2].i == -7);
    CHECK(vals.kind[3] == WG_ATOM_TEXT && !strcmp(vals.cell[3].text, "idle"));
    CHECK(vals.kinds == (1u << WG_ATOM_REAL | 1u << WG_ATOM_UINT | 1u << WG_ATOM_INT | 1u << WG_ATOM_TEXT));
    wg_values_free(&vals);
    CHECK(vals.n == 0 && vals.kinds == 0);

    /* A column: copied after what is there, growing the arrays past their first size. Values of
     * one kind keep no per-value kinds; a second kind writes them out for all. */
    {
        wg_inst inst[9];
        uint64_t u[9];
        for (int i = 0; i < 9; i++) inst[i] = (wg_inst)(8 - i), u[i] = (uint64_t)i * 1000;
        wg_value_uint_at(&vals, 3, 7);
        wg_values_uint_column(&vals, inst, u, 9);
        wg_values_uint_column(&vals, inst, u, 0);
        CHECK(vals.n == 10 && vals.cap >= 10 && vals.kinds == 1u << WG_ATOM_UINT);
        CHECK(vals.inst[0] == 3 && vals.cell[0].u == 7 && vals.inst[1] == 8 && vals.cell[9].u == 8000);
        CHECK(vals.inst[9] == 0 && !vals.kind && wg_values_kind(&vals, 9) == WG_ATOM_UINT);
        double r[1] = {-0.25};
        wg_values_real_column(&vals, inst, r, 1);
        CHECK(vals.n == 11 && vals.cell[10].value == -0.25 && vals.kind && vals.kind[10] == WG_ATOM_REAL);
        CHECK(vals.kind[0] == WG_ATOM_UINT && vals.kind[9] == WG_ATOM_UINT && wg_values_kind(&vals, 10) == WG_ATOM_REAL);
        CHECK(vals.kinds == (1u << WG_ATOM_UINT | 1u << WG_ATOM_REAL));
        wg_values_free(&vals);
        CHECK(!vals.kind && vals.n == 0 && vals.cap == 0);
        /* A first column takes exactly its size; texts of one kind are freed without kinds. */
        wg_values_uint_column(&vals, inst, u, 9);
        CHECK(vals.cap == 9 && !vals.kind);
        wg_values_free(&vals);
        wg_value_text_at(&vals, 0, "a");
        wg_value_text_at(&vals, 1, "b");
        CHECK(!vals.kind && wg_values_kind(&vals, 1) == WG_ATOM_TEXT && !strcmp(vals.cell[1].text, "b"));
        /* Cleared: the texts freed, the arrays kept for the next values (of any kind). */
        wg_inst *kept = vals.inst;
        wg_values_clear(&vals);
        CHECK(vals.n == 0 && vals.kinds == 0 && vals.inst == kept && vals.cap == 4);
        wg_value_int_at(&vals, 2, -1);
        CHECK(vals.n == 1 && vals.inst == kept && wg_values_kind(&vals, 0) == WG_ATOM_INT && vals.cell[0].i == -1);
        wg_values_free(&vals);
    }

    /* A PMID with two names: both, in order; describe answers with the first. */
    CHECK(wg_tree_add(t, "c.dyn.alias", pm(46, 1, 0), WG_COUNTER, "count", "alias", WG_INDOM_NULL) == NULL);
    CHECK(wg_tree_names_of(t, pm(46, 1, 0), &names, &n) == WG_OK && n == 2);
    CHECK(n == 2 && !strcmp(names[0], "c.dyn.slot.0.hits") && !strcmp(names[1], "c.dyn.alias"));
    CHECK(wg_tree_describe(t, pm(46, 1, 0), &m) == WG_OK && !strcmp(m.help, "hits of slot 0"));

    /* Refused, and nothing added: a name is a leaf or a non-leaf, never both; under the root. */
    const char *e = wg_tree_add(t, "c.dyn.slots", pm(46, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "declared twice"));
    e = wg_tree_add(t, "c.dyn.slots.more", pm(46, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "below metric c.dyn.slots"));
    e = wg_tree_add(t, "c.dyn.slot", pm(46, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "metrics below it"));
    e = wg_tree_add(t, "d.dyn.x", pm(46, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "not under c.dyn"));
    e = wg_tree_add(t, "c.dyn", pm(46, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "not under c.dyn"));
    e = wg_tree_add(t, "c.dynamo.x", pm(46, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "not under c.dyn"));
    e = wg_tree_add(t, "c.dyn..x", pm(46, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "not a metric name"));
    e = wg_tree_add(t, "c.dyn.x", pm(46, 0, 1), (wg_semantics)9, "", "", WG_INDOM_NULL);
    CHECK(e && strstr(e, "semantics"));
    CHECK(wg_tree_root(t, "a..b") != NULL && wg_tree_root(t, "") != NULL && wg_tree_root(t, "a.") != NULL);
    CHECK(wg_tree_len(t) == 5);
    CHECK(!strcmp(kids_of(t, "c.dyn"), "slots:leaf slot:inner disk:inner alias:leaf"));
    CHECK(lookup(t, "c.dyn.x", &id) == WG_UNKNOWN_NAME);

    /* Dynamic: cleared and rebuilt with another metric set, the tree answers for the new one
     * only (the root stays, and children follow the new insertion order). */
    wg_tree_clear(t);
    CHECK(wg_tree_len(t) == 0);
    CHECK(!strcmp(kids_of(t, "c.dyn"), ""));
    CHECK(lookup(t, "c.dyn.slots", &id) == WG_UNKNOWN_NAME);
    CHECK(wg_tree_names_of(t, pm(46, 0, 0), &names, &n) == WG_UNKNOWN_PMID);
    CHECK(wg_tree_add(t, "c.dyn.slot.0.hits", pm(46, 1, 0), WG_COUNTER, "count", "", WG_INDOM_NULL) == NULL);
    CHECK(wg_tree_add(t, "c.dyn.slots", pm(46, 0, 0), WG_DISCRETE, "", "", WG_INDOM_NULL) == NULL);
    CHECK(!strcmp(kids_of(t, "c.dyn"), "slot:inner slots:leaf"));

    /* Growing past the indexes' first size: 3000 metrics, all found by name and by PMID. */
    char name[64];
    for (uint32_t i = 1; i < 3000; i++) {
        snprintf(name, sizeof name, "c.dyn.slot.%u.hits", i);
        CHECK(wg_tree_add(t, name, pm(46, 1, i), WG_COUNTER, "count", "", WG_INDOM_NULL) == NULL);
    }
    CHECK(wg_tree_len(t) == 3001);
    bool all = true;
    for (uint32_t i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "c.dyn.slot.%u.hits", i);
        all = all && lookup(t, name, &id) == WG_OK && same(id, pm(46, 1, i));
        all = all && wg_tree_names_of(t, pm(46, 1, i), &names, &n) == WG_OK && n == 1 && !strcmp(names[0], name);
    }
    CHECK(all);
    const wg_child *kids;
    CHECK(wg_tree_children(t, "c.dyn.slot", 10, &kids, &n) == WG_OK && n == 3000);
    CHECK(n == 3000 && !strcmp(kids[0].name, "0") && !strcmp(kids[2999].name, "2999") && !kids[5].leaf);
    CHECK(lookup(t, "c.dyn.slots", &id) == WG_OK && same(id, pm(46, 0, 0)));

    /* A new root: the old names are gone. Without a root, any names. */
    CHECK(wg_tree_root(t, "other") == NULL);
    CHECK(wg_tree_len(t) == 0 && lookup(t, "c.dyn.slots", &id) == WG_UNKNOWN_NAME);
    CHECK(lookup(t, "c", &id) == WG_UNKNOWN_NAME && lookup(t, "other", &id) == WG_NON_LEAF);
    wg_tree_free(t);
    t = wg_tree_new();
    CHECK(wg_tree_add(t, "a.b", pm(1, 0, 0), WG_INSTANT, "", "", WG_INDOM_NULL) == NULL);
    CHECK(wg_tree_add(t, "top", pm(1, 0, 1), WG_INSTANT, "", "", WG_INDOM_NULL) == NULL);
    CHECK(lookup(t, "top", &id) == WG_OK && lookup(t, "a", &id) == WG_NON_LEAF);
    CHECK(!strcmp(kids_of(t, "a"), "b:leaf"));
    wg_tree_free(t);
}

static void test_values_and_errors(void) {
    wg_values v;
    wg_values_init(&v);
    wg_instances_reset();
    for (int i = 0; i < 10; i++) wg_value(&v, i % 2 ? "disk0" : "", i);
    wg_value(&v, NULL, 1.5);
    wg_inst disk = wg_instance("disk0");
    wg_value_at(&v, disk, 2.5);
    CHECK(v.n == 12 && v.inst[0] == 0 && v.inst[1] == 1 && disk == 1 && v.cell[9].value == 9);
    CHECK(v.inst[10] == 0 && v.cell[10].value == 1.5 && v.inst[11] == 1);
    /* Each name once, handed over as a malloc'd copy; many names keep their numbers. */
    CHECK(wg_instances_len() == 2);
    char name[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "i%d", i);
        CHECK(wg_instance(name) == (wg_inst)(i + 2));
    }
    CHECK(wg_instance("i500") == 502 && wg_instances_len() == 1002);
    size_t len;
    char *taken = wg_instances_take(1, &len);
    CHECK(len == 5 && !strcmp(taken, "disk0"));
    free(taken);
    wg_instances_reset();
    CHECK(wg_instances_len() == 0 && wg_instance("x") == 0);
    wg_values_free(&v);
    CHECK(v.n == 0 && v.inst == NULL && v.cell == NULL && v.kind == NULL);
    CHECK(wg_error("disk %s is gone (%d)", "sda", 5) == WG_OTHER);
    CHECK(!strcmp(wg_error_message(), "disk sda is gone (5)"));
}

static void test_integer_params(void) {
    const char *err = NULL;
    const char *doc = "{\"count\": 3, \"neg\": -1, \"frac\": 1.5, \"exp\": 1e3, \"s\": \"7\", \"big\": 99999999999999999999}";
    wg_params *p = wg_params_parse(doc, strlen(doc), &err);
    CHECK(p != NULL);
    int64_t v = 0;
    CHECK(wg_param_integer(p, "count", 0, 0, 1000, &v) == NULL && v == 3);
    CHECK(wg_param_integer(p, "absent", 45, 1, 510, &v) == NULL && v == 45);
    const char *e = wg_param_integer(p, "neg", 0, 0, 1000, &v);
    CHECK(e && !strcmp(e, "`neg` must be at least 0, got -1"));
    e = wg_param_integer(p, "count", 0, 0, 2, &v);
    CHECK(e && !strcmp(e, "`count` must be at most 2, got 3"));
    e = wg_param_integer(p, "frac", 0, 0, 1000, &v);
    CHECK(e && !strcmp(e, "`frac` must be an integer, got 1.5"));
    e = wg_param_integer(p, "exp", 0, 0, 1000, &v);
    CHECK(e && strstr(e, "must be an integer"));
    e = wg_param_integer(p, "s", 0, 0, 1000, &v);
    CHECK(e && !strcmp(e, "`s` must be an integer, got \"7\""));
    e = wg_param_integer(p, "big", 0, INT64_MIN, INT64_MAX, &v);
    CHECK(e && strstr(e, "must be an integer"));
    wg_params_free(p);
}

/* The bindings' layout, decoded as wg_decode does; requests and wasmon's sample JSON. */
static void test_exporter_requests_and_sample_json(void) {
    wg_str strs[] = {{"disk.used", 9}, {"h\"1", 3}, {"B", 1}, {"dev", 3}, {"sda\n", 4}};
    wg_id_pair pairs[] = {{3, 4}};
    wg_id_set sets[] = {{pairs, 1}};
    uint32_t ids[] = {0, 1, 2, 0, 0, 1, 2, 0};
    uint8_t kinds[] = {2, 0};
    double values[] = {1.5, 0.1};
    int64_t ts[] = {1704067200000000001, -1};
    wg_abi_batch b = {true, {strs, 5}, {sets, 1}, {ids, 8}, {kinds, 2}, {values, 2}, {ts, 2}};
    size_t n;
    wg_sample *s = wg_decode_abi(&b, &n);
    CHECK(n == 2 && s[0].kind == WG_CUMULATIVE && !strcmp(s[0].resource, "h\"1"));
    /* ids short of a second sample's four: never read past the shortest column. */
    b.ids.len = 7;
    s = wg_decode_abi(&b, &n);
    CHECK(n == 1);

    wg_requests out;
    wg_requests_init(&out);
    wg_request *r = wg_request_new(&out, "application/x-ndjson");
    wg_request_suffix(r, "/x");
    wg_request_header(r, "X-Key", "k");
    wg_request_sample_json(r, &s[0]);
    wg_request_write(r, "\n", 1);
    const char *want = "{\"name\":\"disk.used\",\"resource\":\"h\\\"1\",\"value\":1.5,\"unit\":\"B\","
                       "\"type\":\"cumulative\",\"timestamp\":\"2024-01-01T00:00:00.000000001Z\","
                       "\"metadata\":{\"dev\":\"sda\\u000a\"}}\n";
    CHECK(r->len == strlen(want) && !memcmp(r->body, want, r->len));
    if (r->len != strlen(want) || memcmp(r->body, want, r->len))
        fprintf(stderr, "got  %.*s\nwant %s", (int)r->len, (const char *)r->body, want);
    /* More requests: the first one's pointer stays valid. */
    for (int i = 0; i < 9; i++) wg_request_printf(wg_request_new(&out, "text/plain"), "%d", i);
    CHECK(out.n == 10 && out.v[0] == r && !strcmp(r->suffix, "/x") && r->n_headers == 1);
    CHECK(!strcmp(out.v[9]->content_type, "text/plain") && out.v[9]->len == 1 &&
          out.v[9]->body[0] == '8' && !strcmp(out.v[9]->suffix, ""));
    wg_request *t = wg_request_new(&out, "x");
    wg_sample other = s[0];
    other.kind = WG_GAUGE;
    other.timestamp_ns = -1;
    other.value = 0.1;
    other.metadata = &wg_no_metadata;
    wg_request_sample_json(t, &other);
    const char *want2 = "{\"name\":\"disk.used\",\"resource\":\"h\\\"1\",\"value\":0.1,"
                        "\"unit\":\"B\",\"type\":\"gauge\",\"timestamp\":\"1969-12-31T23:59:59.999999999Z\","
                        "\"metadata\":{}}";
    CHECK(t->len == strlen(want2) && !memcmp(t->body, want2, t->len));
    if (t->len != strlen(want2) || memcmp(t->body, want2, t->len))
        fprintf(stderr, "got  %.*s\nwant %s\n", (int)t->len, (const char *)t->body, want2);
    wg_requests_free(&out);
    CHECK(out.n == 0 && out.v == NULL);
}

int main(void) {
    test_decode_and_encode_share_the_table();
    test_exporter_requests_and_sample_json();
    test_params();
    test_tree_answers_the_namespace();
    test_values_and_errors();
    test_integer_params();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("wasmon_guest C SDK: all checks passed\n");
    return 0;
}
