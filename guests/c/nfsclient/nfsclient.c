/* `nfsclient`: NFS client statistics per mount from /proc/self/mountstats, under the names,
 * PMIDs, types and units of PCP's pmdanfsclient (domain 62), one instance per mount point.
 *
 * Values are the ones pmdanfsclient (PCP 6.0.3) reports for the same file, checked side by side
 * with it under a real pmcd, with three corrections where it reports a constant by mistake:
 *   - options.{atime,diratime,cto,ac,lock,acl,rdirplus,sharecache,resvport} are 1 unless the
 *     kernel wrote the `no...` option (pmdanfsclient's defaults never run: always 0);
 *   - xprt.max_slots is read for tcp and udp transports (pmdanfsclient stores it under a
 *     misspelled attribute: always 0);
 *   - per-op lines of RPC iostats 1.0 (eight columns, kernels before 4.18.0-105) are read, with
 *     no value for `errors` (pmdanfsclient's pattern wants nine columns and reports 0).
 * Where pmdanfsclient would fail the whole fetch (a line with a word where a number belongs, too
 * few columns), only that line's metrics of that mount have no value, and a log line says where.
 *
 * Parameters: {"path": "/proc/self/mountstats"} (the file in the guest's view: grant the host's
 * /proc at /proc, or a captured tree's directory at /proc/self). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmon_guest.h"

#define DOMAIN 62u
#define INDOM ((DOMAIN << 22) | 0u)
/* Mounts read per fetch: each is ~60 lines to parse and ~6 KB to keep (its per-op counters),
 * so 512 stay within the default 100 ms deadline and 3 MiB of the default 64 MiB memory; the
 * file past the last of them is not read, and a log line says so. */
#define MAX_MOUNTS 512
/* A mountstats of at most this many bytes is read whole in one host call (the `files`
 * interface, wg_read_file): MAX_MOUNTS mounts of ~2.6 KB each fit. A larger one is read through
 * stdio, which stops at the MAX_MOUNTS-th mount without reading the rest. */
#define MAX_WHOLE (4 * 1024 * 1024)
/* stdio's buffer for a larger file: each refill is a host call. */
#define READ_BUFFER (64 * 1024)
/* Longer lines (a mount's option string is a few hundred bytes) are not mountstats lines: read
 * past and counted as malformed. */
#define MAX_LINE 8192

enum { T_STR, T_U32, T_U64 };

/* Operations in pmdanfsclient's order: NFSv3/v4 common, v3 only, v4, v4.1, v4.2. */
static const char *const OPS[] = {
    "null", "getattr", "setattr", "lookup", "access", "readlink", "read", "write", "create",
    "symlink", "remove", "rename", "link", "readdir", "fsinfo", "pathconf", "commit",
    "fsstat", "mkdir", "mknod", "readdirplus", "rmdir",
    "close", "create_session", "delegreturn", "destroy_session", "exchange_id", "fs_locations",
    "getacl", "getdeviceinfo", "get_lease_time", "layoutcommit", "layoutget", "layoutreturn",
    "lock", "lockt", "locku", "lookup_root", "open", "open_confirm", "open_downgrade",
    "open_noattr", "reclaim_complete", "release_lockowner", "renew", "secinfo", "sequence",
    "server_caps", "setacl", "setclientid", "setclientid_confirm", "statfs",
    "bind_conn_to_session", "destroy_clientid", "free_stateid", "getdevicelist",
    "secinfo_no_name", "test_stateid",
    "seek", "allocate", "deallocate", "fsid_present", "layoutstats", "clone", "copy",
    "offload_cancel", "lookupp", "layouterror",
};
#define N_OPS (sizeof OPS / sizeof *OPS)
#define OP_FIELDS 9

/* ---- what a mount holds ------------------------------------------------------------------ */

/* String fields (NULL: no value). */
enum {
    S_EXPORT, S_MOUNTPOINT, S_OPTIONS, S_READMODE, S_VERS, S_RECOVERY, S_PROTO, S_SEC,
    S_MOUNTADDR, S_MOUNTPROTO, S_CLIENTADDR, S_LOOKUPCACHE, S_LOCAL_LOCK, S_CAPS, S_NFSV4,
    S_SECURITY, S_SRCPORT, N_STR
};

/* Numeric fields: options, age, events (27), bytes and pages (8), xprt (29). */
enum {
    O_SYNC, O_ATIME, O_DIRATIME, O_RSIZE, O_WSIZE, O_BSIZE, O_NAMLEN, O_ACREGMIN, O_ACREGMAX,
    O_ACDIRMIN, O_ACDIRMAX, O_POSIX, O_CTO, O_AC, O_LOCK, O_ACL, O_RDIRPLUS, O_SHARECACHE,
    O_RESVPORT, O_PORT, O_TIMEO, O_RETRANS, O_MOUNTVERS, O_MOUNTPORT, O_FSC, O_MIGRATION,
    N_AGE,
    N_EVENTS,
    N_BYTES = N_EVENTS + 27,
    N_XPRT = N_BYTES + 8,
    N_NUM = N_XPRT + 29
};

/* xprt fields in pmdanfsclient's item order (items 2..30; item 1 is srcport). */
enum {
    X_BIND_COUNT, X_CONNECT_COUNT, X_CONNECT_TIME, X_IDLE_TIME, X_SENDS, X_RECVS, X_BAD_XIDS,
    X_REQ_U, X_BACKLOG_U, X_READ_CHUNKS, X_WRITE_CHUNKS, X_REPLY_CHUNKS, X_TOTAL_RDMA_REQ,
    X_TOTAL_RDMA_REP, X_PULLUP, X_FIXUP, X_HARDWAY, X_FAILED_MARSHAL, X_BAD_REPLY, X_MAX_SLOTS,
    X_SENDING_U, X_PENDING_U, X_NOMSG_CALL, X_MRS_RECYCLED, X_MRS_ORPHANED, X_MRS_ALLOCATED,
    X_LOCAL_INV_NEEDED, X_EMPTY_SENDCTXQ, X_REPLY_WAITS
};

/* Numeric fields in all: N_NUM, then each op's OP_FIELDS columns (OPF). */
#define OPF(op, c) (N_NUM + (op) * OP_FIELDS + (c))
#define N_FIELDS OPF(N_OPS, 0)

typedef struct {
    char *str[N_STR];
    size_t point_len; /* strlen of str[S_MOUNTPOINT] */
    size_t idx;       /* its position in `mounts`, and in each field's column */
} mount;

/* The numbers of every mount, stored per field (a metric's values side by side, in mount
 * order): a fetch hands each metric's column to the SDK in one call instead of walking every
 * mount's record once per metric (720 passes over ~6 KB records at 300 mounts). Field f of
 * mount i is v[f * stride + i]; have is 0 where it has no value (its line was malformed). */
static struct {
    uint64_t *v;
    uint8_t *have;
    size_t cap;    /* mounts each column holds */
    size_t stride; /* cap and a cache line: a power of two apart, a mount's fields (written
                      one after another by the parse) would all fall in one cache set */
} cols;
#define NUM(m, f) cols.v[(size_t)(f) * cols.stride + (m)->idx]
#define HAVE(m, f) cols.have[(size_t)(f) * cols.stride + (m)->idx]

/* ---- the metric table -------------------------------------------------------------------- */

typedef enum { K_STR, K_NUM } kind;

typedef struct {
    kind kind;
    int type;      /* T_ */
    uint32_t field; /* S_ or numeric field (OPF for an op's column) */
} slot;

/* PMIDs are dense per cluster: cluster 8 has the most items (68 ops x 9). */
#define N_CLUSTERS 9
#define MAX_ITEM (N_OPS * OP_FIELDS)
static slot slots[N_CLUSTERS][MAX_ITEM + 1];
static uint8_t declared[N_CLUSTERS][MAX_ITEM + 1];

static const char *add(wg_tree *t, const char *name, uint32_t cluster, uint32_t item, int type,
                       wg_semantics sem, const char *units, const char *help, kind k,
                       uint32_t field) {
    char full[128];
    snprintf(full, sizeof full, "nfsclient.%s", name);
    wg_pmid id = {DOMAIN, cluster, item};
    const char *err = wg_tree_add(t, full, id, sem, units, help, INDOM);
    if (!err)
        err = wg_tree_set_type(t, id, type == T_STR ? WG_TEXT : type == T_U32 ? WG_UINT32 : WG_UINT64);
    if (!err) {
        slots[cluster][item] = (slot){k, type, field};
        declared[cluster][item] = 1;
    }
    return err;
}

typedef struct {
    const char *name;
    int type; /* T_STR: field is an S_, else a numeric index */
    uint32_t field;
    const char *help;
} option;

/* Cluster 1, items 1..37 in order. */
static const option OPTIONS[] = {
    {"string", T_STR, S_OPTIONS, "the mount's whole option string"},
    {"readmode", T_STR, S_READMODE, "ro or rw"},
    {"sync", T_U32, O_SYNC, "1 when mounted sync"},
    {"atime", T_U32, O_ATIME, "1 unless mounted noatime"},
    {"diratime", T_U32, O_DIRATIME, "1 unless mounted nodiratime"},
    {"vers", T_STR, S_VERS, "NFS protocol version (vers=)"},
    {"rsize", T_U32, O_RSIZE, "largest read request in bytes (rsize=)"},
    {"wsize", T_U32, O_WSIZE, "largest write request in bytes (wsize=)"},
    {"bsize", T_U32, O_BSIZE, "block size reported to applications (bsize=)"},
    {"namlen", T_U32, O_NAMLEN, "longest file name (namlen=)"},
    {"acregmin", T_U32, O_ACREGMIN, "shortest attribute cache time for files, seconds"},
    {"acregmax", T_U32, O_ACREGMAX, "longest attribute cache time for files, seconds"},
    {"acdirmin", T_U32, O_ACDIRMIN, "shortest attribute cache time for directories, seconds"},
    {"acdirmax", T_U32, O_ACDIRMAX, "longest attribute cache time for directories, seconds"},
    {"recovery", T_STR, S_RECOVERY, "hard or soft: what a request does when the server is gone"},
    {"posix", T_U32, O_POSIX, "1 when mounted posix"},
    {"cto", T_U32, O_CTO, "1 unless mounted nocto (close-to-open consistency)"},
    {"ac", T_U32, O_AC, "1 unless mounted noac (attribute caching)"},
    {"lock", T_U32, O_LOCK, "1 unless mounted nolock"},
    {"acl", T_U32, O_ACL, "1 unless mounted noacl"},
    {"rdirplus", T_U32, O_RDIRPLUS, "1 unless mounted nordirplus"},
    {"sharecache", T_U32, O_SHARECACHE, "1 unless mounted nosharecache"},
    {"resvport", T_U32, O_RESVPORT, "1 unless mounted noresvport"},
    {"proto", T_STR, S_PROTO, "transport: tcp, udp or rdma"},
    {"port", T_U32, O_PORT, "server port (port=)"},
    {"timeo", T_U32, O_TIMEO, "retransmission timeout, tenths of a second (timeo=)"},
    {"retrans", T_U32, O_RETRANS, "retries before a major timeout (retrans=)"},
    {"sec", T_STR, S_SEC, "security flavour (sec=)"},
    {"mountaddr", T_STR, S_MOUNTADDR, "address of the mount server (NFSv3)"},
    {"mountvers", T_U32, O_MOUNTVERS, "mount protocol version (NFSv3)"},
    {"mountport", T_U32, O_MOUNTPORT, "mount server port (NFSv3)"},
    {"mountproto", T_STR, S_MOUNTPROTO, "mount protocol transport (NFSv3)"},
    {"clientaddr", T_STR, S_CLIENTADDR, "client address for callbacks (NFSv4)"},
    {"fsc", T_U32, O_FSC, "1 when mounted fsc (FS-Cache)"},
    {"migration", T_U32, O_MIGRATION, "1 when mounted migration"},
    {"lookupcache", T_STR, S_LOOKUPCACHE, "lookup cache mode (lookupcache=)"},
    {"local_lock", T_STR, S_LOCAL_LOCK, "locks kept local (local_lock=)"},
};

/* Cluster 5, items 1..27: the kernel's NFSIOS_ counters in the order of the events line. */
static const char *const EVENTS[] = {
    "inoderevalidate", "dentryrevalidate", "datainvalidate", "attrinvalidate", "vfsopen",
    "vfslookup", "vfsaccess", "vfsupdatepage", "vfsreadpage", "vfsreadpages", "vfswritepage",
    "vfswritepages", "vfsgetdents", "vfssetattr", "vfsflush", "vfsfsync", "vfslock",
    "vfsrelease", "congestionwait", "setattrtrunc", "extendwrite", "sillyrename", "shortread",
    "shortwrite", "delay", "pnfsread", "pnfswrite",
};

typedef struct {
    const char *name;
    int type;
    wg_semantics sem;
    const char *units;
    const char *help;
} xfield;

/* Cluster 7, items 2..30 (the X_ order). */
static const xfield XPRT[] = {
    {"bind_count", T_U32, WG_COUNTER, "count", "rpcbind port queries"},
    {"connect_count", T_U32, WG_COUNTER, "count", "transport (re)connections"},
    {"connect_time", T_U32, WG_COUNTER, "count", "jiffies spent waiting for connections"},
    {"idle_time", T_U32, WG_INSTANT, "sec", "seconds since the transport was last used"},
    {"sends", T_U32, WG_COUNTER, "count", "RPC requests transmitted"},
    {"recvs", T_U32, WG_COUNTER, "count", "RPC replies received"},
    {"bad_xids", T_U32, WG_COUNTER, "count", "replies matching no outstanding request"},
    {"req_u", T_U64, WG_COUNTER, "count", "sum of requests in flight at each send"},
    {"backlog_u", T_U64, WG_COUNTER, "count", "sum of the backlog queue length at each send"},
    {"read_chunks", T_U64, WG_COUNTER, "count", "RDMA read chunks"},
    {"write_chunks", T_U64, WG_COUNTER, "count", "RDMA write chunks"},
    {"reply_chunks", T_U64, WG_COUNTER, "count", "RDMA reply chunks"},
    {"total_rdma_req", T_U64, WG_COUNTER, "count", "RDMA requests"},
    {"total_rdma_rep", T_U64, WG_COUNTER, "count", "RDMA replies"},
    {"pullup", T_U64, WG_COUNTER, "count", "RDMA pull-up copies"},
    {"fixup", T_U64, WG_COUNTER, "count", "RDMA fix-up copies"},
    {"hardway", T_U64, WG_COUNTER, "count", "RDMA registrations the hard way"},
    {"failed_marshal", T_U64, WG_COUNTER, "count", "RDMA requests that failed to marshal"},
    {"bad_reply", T_U64, WG_COUNTER, "count", "RDMA malformed replies"},
    {"max_slots", T_U64, WG_COUNTER, "count", "most RPC slots ever in use"},
    {"sending_u", T_U64, WG_COUNTER, "count", "sum of the sending queue length at each send"},
    {"pending_u", T_U64, WG_COUNTER, "count", "sum of the pending queue length at each send"},
    {"nomsg_call", T_U64, WG_COUNTER, "count", "RDMA calls sent without a message"},
    {"mrs_recycled", T_U64, WG_COUNTER, "count", "RDMA memory regions recycled"},
    {"mrs_orphaned", T_U64, WG_COUNTER, "count", "RDMA memory regions orphaned"},
    {"mrs_allocated", T_U64, WG_COUNTER, "count", "RDMA memory regions allocated"},
    {"local_inv_needed", T_U64, WG_COUNTER, "count", "RDMA local invalidations needed"},
    {"empty_sendctxq", T_U64, WG_COUNTER, "count", "times the RDMA send context queue was empty"},
    {"reply_waits", T_U64, WG_COUNTER, "count", "RDMA replies that waited for a send"},
};

/* Per-op columns, items op * 9 + 1 .. op * 9 + 9. */
static const xfield OPCOLS[OP_FIELDS] = {
    {"ops", T_U64, WG_COUNTER, "count", "requests of this operation"},
    {"ntrans", T_U64, WG_COUNTER, "count", "transmissions of this operation (retries count)"},
    {"timeouts", T_U64, WG_COUNTER, "count", "major timeouts of this operation"},
    {"bytes_sent", T_U64, WG_COUNTER, "byte", "bytes sent for this operation, headers included"},
    {"bytes_recv", T_U64, WG_COUNTER, "byte", "bytes received for this operation, headers included"},
    {"queue", T_U64, WG_COUNTER, "millisec", "time this operation's requests waited to be sent"},
    {"rtt", T_U64, WG_COUNTER, "millisec", "round trip time of this operation's requests"},
    {"execute", T_U64, WG_COUNTER, "millisec", "time from start to end of this operation's requests"},
    {"errors", T_U64, WG_COUNTER, "count", "requests of this operation that ended in an error"},
};

static const char *declare(wg_tree *t) {
    const char *err = wg_tree_root(t, "nfsclient");
    char name[96], help[160];
#define TRY(x) do { if ((err = (x))) return err; } while (0)
    TRY(add(t, "export", 0, 1, T_STR, WG_INSTANT, "", "the server's export (server:/path)", K_STR, S_EXPORT));
    TRY(add(t, "mountpoint", 0, 2, T_STR, WG_INSTANT, "", "where the export is mounted", K_STR, S_MOUNTPOINT));
    for (uint32_t i = 0; i < sizeof OPTIONS / sizeof *OPTIONS; i++) {
        const option *o = &OPTIONS[i];
        snprintf(name, sizeof name, "options.%s", o->name);
        TRY(add(t, name, 1, i + 1, o->type, WG_INSTANT, "", o->help, o->type == T_STR ? K_STR : K_NUM, o->field));
    }
    TRY(add(t, "age", 2, 1, T_U64, WG_INSTANT, "sec", "seconds since the mount", K_NUM, N_AGE));
    TRY(add(t, "capabilities", 3, 1, T_STR, WG_INSTANT, "", "the server's capabilities (caps line)", K_STR, S_CAPS));
    TRY(add(t, "nfsv4", 3, 2, T_STR, WG_INSTANT, "", "NFSv4 attributes and session flags (nfsv4 line)", K_STR, S_NFSV4));
    TRY(add(t, "security", 4, 1, T_STR, WG_INSTANT, "", "security flavour in use (sec line)", K_STR, S_SECURITY));
    for (uint32_t i = 0; i < 27; i++) {
        snprintf(name, sizeof name, "events.%s", EVENTS[i]);
        snprintf(help, sizeof help, "NFS client events counted as %s", EVENTS[i]);
        TRY(add(t, name, 5, i + 1, T_U32, WG_COUNTER, "count", help, K_NUM, N_EVENTS + i));
    }
    static const char *const BYTES[] = {"bytes.read.normal", "bytes.write.normal", "bytes.read.direct",
                                        "bytes.write.direct", "bytes.read.server", "bytes.write.server",
                                        "pages.read", "pages.write"};
    static const char *const BYTES_HELP[] = {
        "bytes applications read through read()", "bytes applications wrote through write()",
        "bytes applications read with O_DIRECT", "bytes applications wrote with O_DIRECT",
        "bytes read from the server", "bytes written to the server",
        "pages read", "pages written"};
    for (uint32_t i = 0; i < 8; i++)
        TRY(add(t, BYTES[i], 6, i + 1, T_U64, WG_COUNTER, i < 6 ? "byte" : "count", BYTES_HELP[i], K_NUM, N_BYTES + i));
    TRY(add(t, "xprt.srcport", 7, 1, T_STR, WG_INSTANT, "", "the client's source port", K_STR, S_SRCPORT));
    for (uint32_t i = 0; i < sizeof XPRT / sizeof *XPRT; i++) {
        const xfield *x = &XPRT[i];
        snprintf(name, sizeof name, "xprt.%s", x->name);
        TRY(add(t, name, 7, i + 2, x->type, x->sem, x->units, x->help, K_NUM, N_XPRT + i));
    }
    for (uint32_t op = 0; op < N_OPS; op++)
        for (uint32_t c = 0; c < OP_FIELDS; c++) {
            snprintf(name, sizeof name, "ops.%s.%s", OPS[op], OPCOLS[c].name);
            snprintf(help, sizeof help, "%s: %s", OPS[op], OPCOLS[c].help);
            TRY(add(t, name, 8, op * OP_FIELDS + c + 1, OPCOLS[c].type, OPCOLS[c].sem, OPCOLS[c].units, help, K_NUM,
                    OPF(op, c)));
        }
#undef TRY
    return NULL;
}

/* ---- parsing ------------------------------------------------------------------------------ */

static const char *path;
static mount **mounts;
static size_t n_mounts;
/* Each mount's instance number in the fetch call in progress (wg_instance). */
static wg_inst *insts;
static bool parsed;
/* What the last parse complained about, so a bad file is logged when it changes, not at every
 * fetch. */
static size_t last_bad, last_first_bad;
static bool last_missing, last_full;

static void drop_mounts(void) {
    for (size_t i = 0; i < n_mounts; i++) {
        for (int s = 0; s < N_STR; s++) free(mounts[i]->str[s]);
        free(mounts[i]);
    }
    n_mounts = 0;
}

static void set_str(mount *m, int s, const char *text, size_t len) {
    free(m->str[s]);
    m->str[s] = malloc(len + 1);
    if (!m->str[s]) abort();
    memcpy(m->str[s], text, len);
    m->str[s][len] = 0;
}

/* A whole decimal number (digits only) into *out, wrapping at 2^64 as pmdanfsclient's ctypes
 * fields do; false for anything else. */
static bool number(const char *s, size_t len, uint64_t *out) {
    if (!len) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* Splits `s` at single spaces (as Python's split(' ')), up to `max` words. */
static size_t words(char *s, char **w, size_t *len, size_t max) {
    size_t n = 0;
    char *p = s;
    while (n < max) {
        char *sp = strchr(p, ' ');
        w[n] = p;
        len[n] = sp ? (size_t)(sp - p) : strlen(p);
        n++;
        if (!sp) break;
        p = sp + 1;
    }
    return n;
}

/* `count` numbers from words[0..] into num[first..]: false (and those fields without value)
 * when there are too few or one is not a number. */
static bool numbers(mount *m, char **w, size_t *len, size_t n, uint32_t first, size_t count) {
    bool ok = n >= count;
    for (size_t i = 0; ok && i < count; i++) ok = number(w[i], len[i], &NUM(m, first + i));
    for (size_t i = 0; i < count; i++) HAVE(m, first + i) = ok;
    return ok;
}

static bool starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* Options with a value, by key: `key=<digits>` (a U32 field) or `key=<one of choices>`
 * (choices "|a|b|"; NULL: any) as a string. Each option's key is split off once and its
 * length compared first (trying every key with strncmp was most of the options' parse). */
#define KEY(k) k, sizeof k - 1
static const struct {
    const char *key;
    size_t len;
    int field;
} NUM_OPTS[] = {
    {KEY("rsize"), O_RSIZE},         {KEY("wsize"), O_WSIZE},       {KEY("bsize"), O_BSIZE},
    {KEY("namlen"), O_NAMLEN},       {KEY("acregmin"), O_ACREGMIN}, {KEY("acregmax"), O_ACREGMAX},
    {KEY("acdirmin"), O_ACDIRMIN},   {KEY("acdirmax"), O_ACDIRMAX}, {KEY("port"), O_PORT},
    {KEY("timeo"), O_TIMEO},         {KEY("retrans"), O_RETRANS},   {KEY("mountvers"), O_MOUNTVERS},
    {KEY("mountport"), O_MOUNTPORT},
};
static const struct {
    const char *key;
    size_t len;
    const char *choices;
    int s;
} STR_OPTS[] = {
    {KEY("proto"), "|tcp|udp|rdma|", S_PROTO},
    {KEY("sec"), "|null|sys|krb5|krb5i|krb5p|lkey|lkeyi|lkeyp|spkm|spkmi|spkmp|unknown|", S_SEC},
    {KEY("mountaddr"), NULL, S_MOUNTADDR},
    {KEY("mountproto"), "|udp|tcp|auto|udp6|tcp6|", S_MOUNTPROTO},
    {KEY("clientaddr"), NULL, S_CLIENTADDR},
    {KEY("lookupcache"), "|none|pos|", S_LOOKUPCACHE},
    {KEY("local_lock"), "|none|all|flock|posix|", S_LOCAL_LOCK},
};
#undef KEY

/* The option `key=v` (key of `k` bytes, v NUL-terminated). */
static void keyed_option(mount *m, const char *key, size_t k, const char *v) {
    for (size_t i = 0; i < sizeof NUM_OPTS / sizeof *NUM_OPTS; i++) {
        uint64_t n;
        if (NUM_OPTS[i].len != k || memcmp(key, NUM_OPTS[i].key, k)) continue;
        if (number(v, strlen(v), &n)) {
            NUM(m, NUM_OPTS[i].field) = n & 0xffffffffu;
            return;
        }
        break; /* not a number: it may still be a string option's value */
    }
    for (size_t i = 0; i < sizeof STR_OPTS / sizeof *STR_OPTS; i++) {
        if (STR_OPTS[i].len != k || memcmp(key, STR_OPTS[i].key, k)) continue;
        if (STR_OPTS[i].choices) {
            char probe[64];
            if (strlen(v) + 3 > sizeof probe) return;
            snprintf(probe, sizeof probe, "|%s|", v);
            if (!strstr(STR_OPTS[i].choices, probe)) return;
        }
        set_str(m, STR_OPTS[i].s, v, strlen(v));
        return;
    }
}

static void parse_options(mount *m, char *text) {
    set_str(m, S_OPTIONS, text, strlen(text));
    static const struct { const char *word; int field; uint64_t value; } FLAGS[] = {
        {"sync", O_SYNC, 1}, {"noatime", O_ATIME, 0}, {"nodiratime", O_DIRATIME, 0},
        {"posix", O_POSIX, 1}, {"nocto", O_CTO, 0}, {"noac", O_AC, 0}, {"nolock", O_LOCK, 0},
        {"noacl", O_ACL, 0}, {"nordirplus", O_RDIRPLUS, 0}, {"nosharecache", O_SHARECACHE, 0},
        {"noresvport", O_RESVPORT, 0}, {"fsc", O_FSC, 1}, {"migration", O_MIGRATION, 1},
    };
    for (char *o = text, *next; o; o = next) {
        next = strchr(o, ',');
        if (next) *next++ = 0;
        size_t n = strlen(o);
        while (n && (o[n - 1] == ' ' || o[n - 1] == '\t' || o[n - 1] == '\r')) o[--n] = 0;
        char *eq = memchr(o, '=', n);
        if (eq) {
            if (eq - o == 4 && !memcmp(o, "vers", 4)) {
                /* [2-4] or [2-4].[0-9] */
                const char *v = eq + 1;
                size_t l = strlen(v);
                if ((l == 1 || (l == 3 && v[1] == '.' && v[2] >= '0' && v[2] <= '9')) && v[0] >= '2' && v[0] <= '4')
                    set_str(m, S_VERS, v, l);
            } else {
                keyed_option(m, o, (size_t)(eq - o), eq + 1);
            }
            continue;
        }
        bool done = false;
        for (size_t i = 0; !done && i < sizeof FLAGS / sizeof *FLAGS; i++)
            if (!strcmp(o, FLAGS[i].word)) NUM(m, FLAGS[i].field) = FLAGS[i].value, done = true;
        if (done) continue;
        if (!strcmp(o, "ro") || !strcmp(o, "rw")) { set_str(m, S_READMODE, o, 2); continue; }
        if (!strcmp(o, "soft") || !strcmp(o, "hard")) { set_str(m, S_RECOVERY, o, 4); continue; }
    }
}

/* xprt fields of each transport, in the order of its line's numbers after the source port. */
static const int8_t XPRT_TCP[] = {X_BIND_COUNT, X_CONNECT_COUNT, X_CONNECT_TIME, X_IDLE_TIME, X_SENDS,
                                  X_RECVS, X_BAD_XIDS, X_REQ_U, X_BACKLOG_U, X_MAX_SLOTS, X_SENDING_U,
                                  X_PENDING_U};
static const int8_t XPRT_UDP[] = {X_BIND_COUNT, X_SENDS, X_RECVS, X_BAD_XIDS, X_REQ_U,
                                  X_BACKLOG_U, X_MAX_SLOTS, X_SENDING_U, X_PENDING_U};
static const int8_t XPRT_RDMA[] = {
    X_BIND_COUNT, X_CONNECT_COUNT, X_CONNECT_TIME, X_IDLE_TIME, X_SENDS, X_RECVS, X_BAD_XIDS,
    X_REQ_U, X_BACKLOG_U, X_READ_CHUNKS, X_WRITE_CHUNKS, X_REPLY_CHUNKS, X_TOTAL_RDMA_REQ,
    X_TOTAL_RDMA_REP, X_PULLUP, X_FIXUP, X_HARDWAY, X_FAILED_MARSHAL, X_BAD_REPLY, X_NOMSG_CALL,
    X_MRS_RECYCLED, X_MRS_ORPHANED, X_MRS_ALLOCATED, X_LOCAL_INV_NEEDED, X_EMPTY_SENDCTXQ,
    X_REPLY_WAITS};

static bool parse_xprt(mount *m, char *text) {
    char *w[40];
    size_t len[40];
    size_t n = words(text, w, len, 40);
    const int8_t *map;
    size_t count;
    if (len[0] == 3 && !memcmp(w[0], "tcp", 3)) map = XPRT_TCP, count = sizeof XPRT_TCP;
    else if (len[0] == 3 && !memcmp(w[0], "udp", 3)) map = XPRT_UDP, count = sizeof XPRT_UDP;
    else if (len[0] == 4 && !memcmp(w[0], "rdma", 4)) map = XPRT_RDMA, count = sizeof XPRT_RDMA;
    else return true; /* another transport: nothing pmdanfsclient reads */
    if (n < 2 + count) {
        for (size_t i = 0; i < count; i++) HAVE(m, N_XPRT + map[i]) = 0;
        return false;
    }
    set_str(m, S_SRCPORT, w[1], len[1]);
    bool ok = true;
    for (size_t i = 0; i < count; i++) {
        uint64_t v = 0;
        bool good = number(w[2 + i], len[2 + i], &v);
        int f = N_XPRT + map[i];
        /* The first seven are 32-bit in PCP (ctypes c_uint in pmdanfsclient): wrapped. */
        NUM(m, f) = map[i] <= X_BAD_XIDS ? (v & 0xffffffffu) : v;
        HAVE(m, f) = good;
        ok &= good;
    }
    return ok;
}

enum { OP_ROW, OP_BAD, NOT_OP };

/* OPS by name, open addressing (op + 1 in a slot, 0 empty): a per-op line's name is found in
 * one or two probes, where comparing it with each of the 68 names in turn was a sixth of the
 * parse. */
#define OP_SLOTS 256
static uint8_t op_slots[OP_SLOTS];
static bool ops_indexed;

static uint32_t op_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static long find_op(const char *name, size_t n) {
    for (size_t k = 0; !ops_indexed && k < N_OPS; k++) {
        uint32_t h = op_hash(OPS[k], strlen(OPS[k]));
        while (op_slots[h % OP_SLOTS]) h++;
        op_slots[h % OP_SLOTS] = (uint8_t)(k + 1);
    }
    ops_indexed = true;
    for (uint32_t h = op_hash(name, n); op_slots[h % OP_SLOTS]; h++) {
        long k = op_slots[h % OP_SLOTS] - 1;
        if (strlen(OPS[k]) == n && !memcmp(OPS[k], name, n)) return k;
    }
    return -1;
}

/* One per-op row (`\s*NAME: n n n n n n n n [n]`): OP_ROW, OP_BAD for a row whose numbers are
 * not eight or nine numbers (that op has no value), NOT_OP for a line that is no row at all
 * (the per-op section ended). */
static int parse_op(mount *m, const char *line) {
    while (*line == ' ' || *line == '\t') line++;
    const char *colon = strchr(line, ':');
    if (!colon || colon == line || colon[1] != ' ') return NOT_OP;
    size_t nl = (size_t)(colon - line);
    for (size_t i = 0; i < nl; i++)
        if (!((line[i] >= 'A' && line[i] <= 'Z') || line[i] == '_')) return NOT_OP;
    char lower[32];
    long op = -1;
    if (nl < sizeof lower) {
        for (size_t i = 0; i < nl; i++) lower[i] = line[i] == '_' ? '_' : (char)(line[i] - 'A' + 'a');
        op = find_op(lower, nl);
    }
    uint64_t v[OP_FIELDS];
    size_t n = 0;
    bool ok = true;
    /* Numbers separated by single spaces, read in one walk (as number() reads each word). */
    for (const char *p = colon + 2;;) {
        uint64_t x = 0;
        size_t l = 0;
        bool digits = true;
        for (; p[l] && p[l] != ' '; l++) {
            digits &= p[l] >= '0' && p[l] <= '9';
            x = x * 10 + (uint64_t)(p[l] - '0');
        }
        if (n == OP_FIELDS || !l || !digits) {
            ok = false;
            break;
        }
        v[n++] = x;
        if (!p[l]) break;
        p += l + 1;
    }
    ok &= n >= OP_FIELDS - 1;
    if (op < 0) return ok ? OP_ROW : OP_BAD; /* an op pmdanfsclient does not serve */
    for (size_t c = 0; c < OP_FIELDS; c++) {
        NUM(m, OPF(op, c)) = ok && c < n ? v[c] : 0;
        HAVE(m, OPF(op, c)) = ok && c < n;
    }
    return ok ? OP_ROW : OP_BAD;
}

/* Room in every column for `n` mounts (the columns keep their first n_mounts values). */
static void reserve_cols(size_t n) {
    if (n <= cols.cap) return;
    size_t cap = cols.cap ? 2 * cols.cap : 16;
    while (cap < n) cap *= 2;
    if (cap > MAX_MOUNTS) cap = MAX_MOUNTS;
    size_t stride = cap + 8;
    uint64_t *v = malloc(N_FIELDS * stride * sizeof *v);
    uint8_t *have = malloc(N_FIELDS * stride);
    if (!v || !have) abort();
    for (size_t f = 0; f < N_FIELDS && n_mounts; f++) {
        memcpy(v + f * stride, cols.v + f * cols.stride, n_mounts * sizeof *v);
        memcpy(have + f * stride, cols.have + f * cols.stride, n_mounts);
    }
    free(cols.v);
    free(cols.have);
    cols.v = v, cols.have = have, cols.cap = cap, cols.stride = stride;
}

/* A mount at position `idx` (its columns' room reserved), with pmdanfsclient's defaults. */
static mount *new_mount(size_t idx) {
    mount *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->idx = idx;
    for (size_t f = 0; f < N_FIELDS; f++) NUM(m, f) = 0, HAVE(m, f) = 1;
    static const int DEFAULT_ON[] = {O_ATIME, O_DIRATIME, O_CTO, O_AC, O_LOCK, O_ACL, O_RDIRPLUS, O_SHARECACHE, O_RESVPORT};
    for (size_t i = 0; i < sizeof DEFAULT_ON / sizeof *DEFAULT_ON; i++) NUM(m, DEFAULT_ON[i]) = 1;
    /* These three are "" until their line is read (pmdanfsclient's defaults). */
    set_str(m, S_CAPS, "", 0);
    set_str(m, S_NFSV4, "", 0);
    set_str(m, S_SECURITY, "", 0);
    return m;
}

/* The mount with this mount point, or a new one at the end (a later mount of the same point
 * replaces the earlier one's values, as in pmdanfsclient). */
static mount *mount_at(const char *point, size_t len, bool *full) {
    for (size_t i = n_mounts; i-- > 0;)
        if (mounts[i]->point_len == len && !memcmp(mounts[i]->str[S_MOUNTPOINT], point, len)) {
            for (int s = 0; s < N_STR; s++) free(mounts[i]->str[s]);
            free(mounts[i]);
            mounts[i] = new_mount(i);
            mounts[i]->point_len = len;
            return mounts[i];
        }
    if (n_mounts == MAX_MOUNTS) {
        *full = true;
        return NULL;
    }
    reserve_cols(n_mounts + 1);
    mounts[n_mounts] = new_mount(n_mounts);
    mounts[n_mounts]->point_len = len;
    return mounts[n_mounts++];
}

/* Where the lines come from: the whole file in memory (parsed in place), or a FILE for a
 * larger one. */
typedef struct {
    FILE *f;
    char *p, *end;
    bool nul; /* the buffer has a NUL byte somewhere: lines are checked for one */
} source;

/* The next line, without its '\n', in *line: 1, or 0 at the end; -1 for a line that is no
 * mountstats line (MAX_LINE long, or with a NUL byte), skipped. */
static int next_line(source *in, char **line) {
    if (!in->f) {
        if (in->p >= in->end) return 0;
        char *from = in->p, *nl = memchr(from, '\n', (size_t)(in->end - from));
        size_t l = (size_t)((nl ? nl : in->end) - from);
        in->p = nl ? nl + 1 : in->end;
        if (nl) *nl = 0; /* the buffer ends with a NUL (wg_read_file) */
        *line = from;
        return l >= MAX_LINE - 1 || (in->nul && memchr(from, 0, l)) ? -1 : 1;
    }
    static char buffer[MAX_LINE];
    *line = buffer;
    if (!fgets(buffer, sizeof buffer, in->f)) return 0;
    size_t l = strlen(buffer);
    if (l && buffer[l - 1] == '\n') {
        buffer[--l] = 0;
        return 1;
    }
    if (feof(in->f) && l + 1 < sizeof buffer) return 1; /* the last line, without its '\n' */
    /* Longer than any mountstats line, or a NUL in it: skipped to its end. */
    int c;
    while ((c = fgetc(in->f)) != EOF && c != '\n') {}
    return -1;
}

static void parse(void) {
    drop_mounts();
    parsed = true;
    if (!mounts) {
        mounts = calloc(MAX_MOUNTS, sizeof *mounts);
        if (!mounts) abort();
    }
    char *whole = NULL;
    size_t whole_len = 0;
    int err = wg_read_file(path, MAX_WHOLE, &whole, &whole_len);
    source in = {NULL, whole, whole ? whole + whole_len : NULL, whole && memchr(whole, 0, whole_len)};
    if (err == EFBIG) {
        in.f = fopen(path, "r");
        static char buffer[READ_BUFFER];
        if (in.f) setvbuf(in.f, buffer, _IOFBF, sizeof buffer);
    }
    if (err == EFBIG ? !in.f : err || !whole_len) {
        free(whole);
        /* An empty file is no mounts, not an unreadable one. */
        if (!err && !whole_len) {
            last_missing = false;
            return;
        }
        if (!last_missing) wg_log(WG_INFO, "%s cannot be read: no NFS mounts to report", path);
        last_missing = true;
        return;
    }
    last_missing = false;
    char *line = NULL;
    mount *m = NULL;
    bool in_ops = false, full = false;
    size_t lineno = 0, bad = 0, first_bad = 0;
    bool reread = false;
    for (;;) {
        if (!reread) {
            int got = next_line(&in, &line);
            if (!got) break;
            lineno++;
            if (got < 0) {
                if (!bad++) first_bad = lineno;
                continue;
            }
        }
        reread = false;
        if (in_ops) {
            int row = m ? parse_op(m, line) : NOT_OP;
            if (row == OP_BAD && !bad++) first_bad = lineno;
            if (row != NOT_OP) continue;
            in_ops = false; /* not consumed: a `device` line right after is still a mount */
            reread = true;
            continue;
        }
        if (starts(line, "device ")) {
            m = NULL;
            /* device EXPORT mounted on POINT with fstype TYPE [statvers=...] */
            char *exp = line + 7, *on = strstr(exp, " mounted on ");
            if (!on) continue;
            char *point = on + 12, *with = strstr(point, " with fstype");
            if (!with || memchr(exp, ' ', (size_t)(on - exp)) || memchr(point, ' ', (size_t)(with - point))) continue;
            if (!strstr(with, "nfs statvers=") && !strstr(with, "nfs4 statvers=")) continue;
            m = mount_at(point, (size_t)(with - point), &full);
            /* Full: the rest of the file is not read (it could take the whole deadline). */
            if (!m) break;
            set_str(m, S_EXPORT, exp, (size_t)(on - exp));
            set_str(m, S_MOUNTPOINT, point, (size_t)(with - point));
            continue;
        }
        if (!m) continue;
        bool ok = true;
        char *w[32];
        size_t len[32];
        if (starts(line, "\topts:\t")) {
            parse_options(m, line + 7);
        } else if (starts(line, "\tage:\t")) {
            uint64_t v;
            ok = number(line + 6, strlen(line + 6), &v);
            if (ok) NUM(m, N_AGE) = v;
            HAVE(m, N_AGE) = ok;
        } else if (starts(line, "\tcaps:\t")) {
            set_str(m, S_CAPS, line + 7, strlen(line + 7));
        } else if (starts(line, "\tnfsv4:\t")) {
            set_str(m, S_NFSV4, line + 8, strlen(line + 8));
        } else if (starts(line, "\tsec:\t")) {
            set_str(m, S_SECURITY, line + 6, strlen(line + 6));
        } else if (starts(line, "\tevents:\t")) {
            size_t n = words(line + 9, w, len, 32);
            ok = numbers(m, w, len, n, N_EVENTS, 27);
            for (size_t i = 0; ok && i < 27; i++) NUM(m, N_EVENTS + i) &= 0xffffffffu;
        } else if (starts(line, "\tbytes:\t")) {
            size_t n = words(line + 8, w, len, 32);
            ok = numbers(m, w, len, n, N_BYTES, 8);
        } else if (starts(line, "\txprt:\t")) {
            ok = parse_xprt(m, line + 7);
        } else if (!strcmp(line, "\tper-op statistics")) {
            in_ops = true;
        }
        if (!ok && !bad++) first_bad = lineno;
    }
    if (in.f) fclose(in.f);
    free(whole);
    if (bad && (bad != last_bad || first_bad != last_first_bad))
        wg_log(WG_WARN, "%s: %zu malformed line(s), the first at line %zu: their values are left out", path, bad,
               first_bad);
    if (full && !last_full)
        wg_log(WG_WARN, "%s: more than %d NFS mounts; the first %d are reported, the rest skipped", path, MAX_MOUNTS,
               MAX_MOUNTS);
    last_bad = bad, last_first_bad = first_bad, last_full = full;
}

/* ---- the agent ------------------------------------------------------------------------------ */

const char *wg_agent_configure(const wg_params *p, wg_tree *tree) {
    const char *err = wg_param_string(p, "path", "/proc/self/mountstats", &path);
    if (err) return err;
    memset(declared, 0, sizeof declared);
    parsed = false;
    return declare(tree);
}

int wg_agent_fetch(wg_tree *tree, wg_pmid id, wg_values *out) {
    (void)tree;
    if (id.domain != DOMAIN || id.cluster >= N_CLUSTERS || id.item > MAX_ITEM || !declared[id.cluster][id.item])
        return WG_UNKNOWN_PMID;
    if (!parsed) {
        parse();
        /* Each mount point is looked up once per fetch call, not once per value. */
        if (!insts) {
            insts = malloc(MAX_MOUNTS * sizeof *insts);
            if (!insts) abort();
        }
        for (size_t i = 0; i < n_mounts; i++) insts[i] = wg_instance(mounts[i]->str[S_MOUNTPOINT]);
    }
    slot s = slots[id.cluster][id.item];
    if (s.kind == K_STR) {
        for (size_t i = 0; i < n_mounts; i++)
            if (mounts[i]->str[s.field]) wg_value_text_at(out, insts[i], mounts[i]->str[s.field]);
        return WG_OK;
    }
    const uint64_t *v = cols.v + (size_t)s.field * cols.stride;
    const uint8_t *have = cols.have + (size_t)s.field * cols.stride;
    if (!n_mounts || !memchr(have, 0, n_mounts)) {
        /* Every mount has it: the column as it is. */
        wg_values_uint_column(out, insts, v, n_mounts);
        return WG_OK;
    }
    /* Some mount's line was malformed: the others' values, gathered. */
    static wg_inst some_insts[MAX_MOUNTS];
    static uint64_t some[MAX_MOUNTS];
    size_t n = 0;
    for (size_t i = 0; i < n_mounts; i++)
        if (have[i]) some_insts[n] = insts[i], some[n++] = v[i];
    wg_values_uint_column(out, some_insts, some, n);
    return WG_OK;
}

/* One parse per fetch call, however many metrics it asks for. */
void wg_agent_fetched(wg_tree *tree) {
    (void)tree;
    parsed = false;
}
