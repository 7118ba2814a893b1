/* `dyn_agent`: an agent in C serving a dynamic subtree (guests/python/dyn_agent's twin).
 *
 * Under `root` (default `cagent.dyn`) it serves `count` counters `root.slot.sN.hits` (cluster 1,
 * item N) plus `root.slots` (cluster 0, item 0: how many there are). The set of slots is
 * dynamic: every `grow_every` fetches one more slot appears, up to `max`. Values change at each
 * fetch (a slot's hits grow by N + 1). Parameters:
 *
 *     {"domain": 46, "root": "cagent.dyn", "count": 3, "grow_every": 0, "max": 16}
 *
 * `count_file` (a path, e.g. under a granted directory) replaces `count` with the number the
 * file holds, read with wg_read_file at configure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmon_guest.h"

#define MAX_SLOTS 1000

static int64_t domain, count, grow_every, max_slots, fetches;
static const char *root;
static uint64_t hits[MAX_SLOTS];

static const char *rebuild(wg_tree *tree) {
    char name[512], help[64];
    wg_tree_clear(tree);
    snprintf(name, sizeof name, "%s.slots", root);
    wg_pmid slots = {(uint32_t)domain, 0, 0};
    const char *err = wg_tree_add(tree, name, slots, WG_DISCRETE, "", "number of slots", WG_INDOM_NULL);
    if (!err) err = wg_tree_set_type(tree, slots, WG_UINT32);
    for (int64_t n = 0; n < count && !err; n++) {
        wg_pmid id = {(uint32_t)domain, 1, (uint32_t)n};
        snprintf(name, sizeof name, "%s.slot.s%lld.hits", root, (long long)n);
        snprintf(help, sizeof help, "hits of slot %lld", (long long)n);
        err = wg_tree_add(tree, name, id, WG_COUNTER, "count", help, WG_INDOM_NULL);
        if (!err) err = wg_tree_set_type(tree, id, WG_UINT64);
    }
    return err;
}

const char *wg_agent_configure(const wg_params *p, wg_tree *tree) {
    const char *err;
    if ((err = wg_param_integer(p, "domain", 46, 1, 510, &domain))) return err;
    if ((err = wg_param_string(p, "root", "cagent.dyn", &root))) return err;
    if ((err = wg_param_integer(p, "count", 3, 0, MAX_SLOTS, &count))) return err;
    if ((err = wg_param_integer(p, "grow_every", 0, 0, INT64_MAX, &grow_every))) return err;
    if ((err = wg_param_integer(p, "max", 16, count, MAX_SLOTS, &max_slots))) return err;
    const char *count_file;
    if ((err = wg_param_string(p, "count_file", "", &count_file))) return err;
    if (*count_file) {
        static char message[600];
        char *text;
        size_t len;
        int e = wg_read_file(count_file, 64, &text, &len);
        if (e) {
            snprintf(message, sizeof message, "count_file: %s: %s", count_file, strerror(e));
            return message;
        }
        count = strtoll(text, NULL, 10);
        free(text);
        if (count < 0 || count > max_slots) return "count_file: not a count within max";
    }
    fetches = 0;
    for (int n = 0; n < MAX_SLOTS; n++) hits[n] = 0;
    if ((err = wg_tree_root(tree, root))) return err;
    return rebuild(tree);
}

int wg_agent_fetch(wg_tree *tree, wg_pmid id, wg_values *out) {
    (void)tree;
    if (id.domain != (uint32_t)domain) return WG_UNKNOWN_PMID;
    if (id.cluster == 0 && id.item == 0) {
        wg_value_uint(out, "", (uint64_t)count);
    } else if (id.cluster == 1 && id.item < (uint64_t)count) {
        hits[id.item] += id.item + 1;
        wg_value_uint(out, "", hits[id.item]);
    } else {
        return WG_UNKNOWN_PMID;
    }
    return WG_OK;
}

void wg_agent_fetched(wg_tree *tree) {
    fetches++;
    if (grow_every && fetches % grow_every == 0 && count < max_slots) {
        count++;
        const char *err = rebuild(tree);
        if (err) wg_log(WG_ERROR, "growing to %lld slots: %s", (long long)count, err);
    }
}
