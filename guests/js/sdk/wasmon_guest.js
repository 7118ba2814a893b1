// wasmon guest SDK for JavaScript (componentize-js).
//
// A transformer is a class whose constructor takes the parameters (`Params`) and which has
// `handle(samples)` and, optionally, `flush()`; both return an array (or iterable) of samples:
//
//     import { exportTransformer } from "./wasmon_guest.js";
//     class Scale {
//       constructor(params) { this.factor = params.number("factor", 1); }
//       handle(samples) { for (const s of samples) s.value *= this.factor; return samples; }
//     }
//     export const transform = exportTransformer(Scale);
//
// An agent is a class answering look-ups and fetches. Deriving from `Tree` (a table of
// `{ "full.dotted.name": new Metric([domain, cluster, item], semantics, units, help, indom, type) }` under a
// root) answers the namespace part, so the agent only implements `fetch(pmid)`:
//
//     import { Metric, Tree, UnknownPmid, exportAgent } from "./wasmon_guest.js";
//     class Up extends Tree {
//       constructor(params) { super("myagent", { "myagent.up": new Metric([46, 0, 0]) }); }
//       fetch(pmid) { if (pmid.item !== 0) throw new UnknownPmid(); return 1; }
//     }
//     export const { namespace, metrics } = exportAgent(Up);
//
// An exporter is a class whose constructor takes the parameters and whose `encode(samples)`
// returns the requests that carry them (the host sends them, retries and acknowledges):
//
//     import { Request, exportExporter, sampleJson } from "./wasmon_guest.js";
//     class Lines {
//       encode(samples) {
//         const body = samples.map((s) => sampleJson(s) + "\n").join("");
//         return [new Request(body, { contentType: "application/x-ndjson" })];
//       }
//     }
//     export const encode = exportExporter(Lines);
//
// What this module hides (see wit/types.wit): the string table the host and the guest share
// (strings cross as ids; only strings the host has not seen are sent back, in `newStrings`;
// `reset` clears the table), metadata sets, column-wise batches (typed arrays, timestamps as
// BigInt) and the kinds' byte encoding. It imports nothing, so `node --test` runs it natively.
// Logging: `import { log } from "wasmon:collector/host@0.1.0"` in the guest itself.

/** Kinds as the `kinds` column encodes them (`sample-kind`'s declaration order). */
export const Kind = Object.freeze({
  GAUGE: 0,
  DELTA: 1,
  CUMULATIVE: 2,
  names: ["gauge", "delta", "cumulative"],
  /** `gauge`, `delta` or `cumulative` -> the kind; anything else throws. */
  parse(text) {
    const i = ["gauge", "delta", "cumulative"].indexOf(text);
    if (i < 0) throw new Error(`unknown kind ${JSON.stringify(text)} (gauge, delta or cumulative)`);
    return i;
  },
});

const EMPTY_METADATA = Object.freeze({});

/**
 * One sample. `timestampNs` is a BigInt (nanoseconds since the epoch). `metadata` is a frozen
 * object shared by the samples of a batch carrying the same set: to change it, assign a new
 * object (`s.metadata = { ...s.metadata, k: "v" }`).
 */
export class Sample {
  constructor(name, resource, value, timestampNs = 0n, kind = Kind.GAUGE, unit = "", metadata = EMPTY_METADATA) {
    this.name = name;
    this.resource = resource;
    this.unit = unit;
    this.kind = kind;
    this.value = value;
    this.timestampNs = timestampNs;
    this.metadata = metadata;
  }
}

/** Thrown while configuring: the message names the offending parameter. */
export class ConfigError extends Error {}

const MISSING = Symbol("missing");

/** The parameters from the pipeline config, with typed getters naming the parameter. */
export class Params {
  constructor(values = {}) {
    this.values = values;
  }

  static parse(text) {
    let v;
    try {
      v = text.trim() === "" ? null : JSON.parse(text);
    } catch (e) {
      throw new ConfigError(`parameters are not valid JSON: ${e.message}`);
    }
    if (v === null) return new Params();
    if (typeof v !== "object" || Array.isArray(v)) {
      throw new ConfigError(`parameters must be an object, got ${JSON.stringify(v)}`);
    }
    return new Params(v);
  }

  get(key) {
    return this.values[key];
  }

  #get(key, dflt, ok, what) {
    const v = Object.hasOwn(this.values, key) ? this.values[key] : MISSING;
    if (v === MISSING || v === null) {
      if (dflt === MISSING) throw new ConfigError(`\`${key}\` is required (${what})`);
      return dflt;
    }
    if (!ok(v)) throw new ConfigError(`\`${key}\` must be ${what}, got ${JSON.stringify(v)}`);
    return v;
  }

  #bounded(key, v, { min, max } = {}) {
    if (min !== undefined && v < min) throw new ConfigError(`\`${key}\` must be at least ${min}, got ${v}`);
    if (max !== undefined && v > max) throw new ConfigError(`\`${key}\` must be at most ${max}, got ${v}`);
    return v;
  }

  number(key, dflt = MISSING, bounds) {
    return this.#bounded(key, this.#get(key, dflt, (v) => typeof v === "number" && Number.isFinite(v), "a number"), bounds);
  }

  integer(key, dflt = MISSING, bounds) {
    return this.#bounded(key, this.#get(key, dflt, (v) => Number.isInteger(v), "an integer"), bounds);
  }

  string(key, dflt = MISSING) {
    return this.#get(key, dflt, (v) => typeof v === "string", "a string");
  }

  boolean(key, dflt = MISSING) {
    return this.#get(key, dflt, (v) => typeof v === "boolean", "true or false");
  }
}

/** The guest's half of the string table, and batches to samples and back. */
export class Codec {
  constructor() {
    this.strings = [];
    this.ids = new Map();
  }

  #append(text) {
    if (!this.ids.has(text)) this.ids.set(text, this.strings.length);
    this.strings.push(text);
  }

  /** A WIT `batch` (componentize-js shape: camelCase, typed arrays) -> samples. */
  decode(batch) {
    if (batch.reset) {
      this.strings = [];
      this.ids = new Map();
    }
    for (const s of batch.newStrings) this.#append(s);
    const table = this.strings;
    // The host only sends ids it has defined; an unknown one reads as "".
    const s = (i) => (i < table.length ? table[i] : "");
    const sets = Array.from(batch.metadata, (pairs) => {
      if (pairs.length === 0) return EMPTY_METADATA;
      const m = {};
      for (const [k, v] of pairs) m[s(k)] = s(v);
      return Object.freeze(m);
    });
    const { ids, kinds, values, timestampsNs } = batch;
    const out = new Array(values.length);
    for (let i = 0; i < values.length; i++) {
      const j = 4 * i;
      const k = kinds[i];
      out[i] = new Sample(s(ids[j]), s(ids[j + 1]), values[i], BigInt(timestampsNs[i]),
        k <= Kind.CUMULATIVE ? k : Kind.GAUGE, s(ids[j + 2]), sets[ids[j + 3]] ?? EMPTY_METADATA);
    }
    return out;
  }

  #id(text, fresh) {
    let i = this.ids.get(text);
    if (i === undefined) {
      if (typeof text !== "string") throw new TypeError(`sample strings must be strings, got ${text}`);
      i = this.strings.length;
      this.#append(text);
      fresh.push(text);
    }
    return i;
  }

  /** Samples -> a WIT `batch`. */
  encode(samples) {
    samples = Array.from(samples ?? []);
    const n = samples.length;
    const fresh = [];
    const metadata = [];
    const byObject = new Map();
    const byPairs = new Map();
    const ids = new Uint32Array(4 * n);
    const kinds = new Uint8Array(n);
    const values = new Float64Array(n);
    const timestampsNs = new BigInt64Array(n);
    for (let i = 0; i < n; i++) {
      const x = samples[i];
      const md = x.metadata ?? EMPTY_METADATA;
      let m = byObject.get(md);
      if (m === undefined) {
        const entries = Object.entries(md);
        const key = JSON.stringify(entries);
        m = byPairs.get(key);
        if (m === undefined) {
          m = metadata.length;
          metadata.push(entries.map(([k, v]) => [this.#id(k, fresh), this.#id(String(v), fresh)]));
          byPairs.set(key, m);
        }
        byObject.set(md, m);
      }
      ids[4 * i] = this.#id(x.name, fresh);
      ids[4 * i + 1] = this.#id(x.resource, fresh);
      ids[4 * i + 2] = this.#id(x.unit ?? "", fresh);
      ids[4 * i + 3] = m;
      const k = x.kind ?? Kind.GAUGE;
      if (k !== 0 && k !== 1 && k !== 2) throw new TypeError(`sample ${x.name}: kind must be Kind.GAUGE, DELTA or CUMULATIVE`);
      kinds[i] = k;
      values[i] = x.value;
      timestampsNs[i] = BigInt(x.timestampNs ?? 0n);
    }
    return { reset: false, newStrings: fresh, metadata, ids, kinds, values, timestampsNs };
  }
}

/** `new cls(params)`, or the text componentize-js returns as the WIT error. */
function configured(cls, params) {
  try {
    return new cls(Params.parse(params));
  } catch (e) {
    // componentize-js turns a thrown non-Error value into the result's error.
    throw e instanceof ConfigError ? e.message : `bad parameters: ${e?.message ?? e}`;
  }
}

/**
 * The object to export as the `transform` interface (`export const transform = ...`).
 * `new cls(params)` configures; `handle` and `flush` return arrays or iterables of samples.
 */
export function exportTransformer(cls) {
  const codec = new Codec();
  let impl = null;
  return {
    configure(params) {
      impl = configured(cls, params);
    },
    handle(input) {
      const samples = codec.decode(input);
      if (impl === null) return codec.encode([]);
      return codec.encode(impl.handle(samples));
    },
    flush() {
      const out = impl !== null && typeof impl.flush === "function" ? impl.flush() : [];
      return codec.encode(out);
    },
  };
}

// --- exporters ----------------------------------------------------------------------------

/**
 * Thrown by an exporter's `encode` when the batch can never be encoded: the host dead-letters
 * it with the message. Anything else thrown traps, and the host retries the batch on a fresh
 * instance (a bug may be transient; a batch that cannot be encoded is not).
 */
export class EncodeError extends Error {}

/**
 * One request for the host to send: `body` (a Uint8Array, or a string sent as UTF-8), its
 * `contentType`, a `suffix` appended to the sink's URL or NATS subject, and more `headers` as
 * `[name, value]` pairs (the host refuses the ones it owns, such as Content-Length).
 */
export class Request {
  constructor(body, { contentType = "application/octet-stream", suffix = "", headers = [] } = {}) {
    this.body = body;
    this.contentType = contentType;
    this.suffix = suffix;
    this.headers = headers;
  }

  /** The WIT record (componentize-js shape), checked. */
  toWit() {
    let body = this.body;
    if (typeof body === "string") body = new TextEncoder().encode(body);
    else if (body instanceof ArrayBuffer) body = new Uint8Array(body);
    else if (!(body instanceof Uint8Array)) throw new TypeError(`Request.body must be a Uint8Array or a string, got ${typeof body}`);
    for (const f of ["contentType", "suffix"]) {
      if (typeof this[f] !== "string") throw new TypeError(`Request.${f} must be a string, got ${this[f]}`);
    }
    const headers = Array.from(this.headers, (h) => {
      if (!Array.isArray(h) || h.length !== 2 || typeof h[0] !== "string" || typeof h[1] !== "string") {
        throw new TypeError(`Request.headers must be [name, value] pairs of strings, got ${JSON.stringify(h)}`);
      }
      return [h[0], h[1]];
    });
    return { suffix: this.suffix, contentType: this.contentType, headers, body };
  }
}

/**
 * Nanoseconds since the epoch (a BigInt) as RFC 3339 in UTC, with as many fraction digits as
 * needed (0, 3, 6 or 9), as wasmon writes timestamps.
 */
export function rfc3339(ns) {
  ns = BigInt(ns);
  const G = 1000000000n;
  let secs = ns / G;
  let frac = ns % G;
  if (frac < 0n) {
    frac += G;
    secs -= 1n;
  }
  const text = new Date(Number(secs) * 1000).toISOString().slice(0, 19);
  if (frac === 0n) return `${text}Z`;
  const digits = frac % 1000000n === 0n ? 3 : frac % 1000n === 0n ? 6 : 9;
  return `${text}.${String(frac).padStart(9, "0").slice(0, digits)}Z`;
}

/**
 * One sample as wasmon's sample JSON (no newline): what `wasmon transform` writes and the HTTP
 * sample endpoint reads. JSON has no NaN or infinity: they are written as strings, as wasmon
 * writes them.
 */
export function sampleJson(s) {
  let value = Number(s.value);
  if (Number.isNaN(value)) value = "NaN";
  else if (!Number.isFinite(value)) value = value > 0 ? "inf" : "-inf";
  return JSON.stringify({
    name: s.name, resource: s.resource, value, unit: s.unit ?? "", type: Kind.names[s.kind ?? 0],
    timestamp: rfc3339(s.timestampNs ?? 0n), metadata: { ...(s.metadata ?? {}) },
  });
}

/**
 * The object to export as the `encode` interface (`export const encode = exportExporter(cls)`).
 * `new cls(params)` configures; `encode(samples)` returns an array (or iterable) of `Request`s,
 * sent in order, or throws `EncodeError` for a batch that can never be encoded.
 */
export function exportExporter(cls) {
  const codec = new Codec();
  let impl = null;
  return {
    configure(params) {
      impl = configured(cls, params);
    },
    encode(input) {
      // Decoded even before configure: the string table must follow every batch.
      const samples = codec.decode(input);
      // The host always configures first. A thrown string would dead-letter the batch; an
      // Error traps, leaving it queued for a fresh, configured instance.
      if (impl === null) throw new Error("encode called before configure");
      let out;
      try {
        out = impl.encode(samples);
      } catch (e) {
        // A thrown string is the WIT error; an Error traps (retried on a fresh instance).
        if (e instanceof EncodeError) throw e.message;
        throw e;
      }
      return Array.from(out ?? [], (r) => (r instanceof Request ? r : new Request(r.body, r)).toWit());
    },
  };
}

// --- files ---------------------------------------------------------------------------------

/** The WIT `file-error` cases, as componentize-js names them. */
export const FILE_ERRORS = Object.freeze(["no-entry", "access", "wrong-kind", "too-large", "elsewhere", "io"]);

/**
 * Why a file or directory gave nothing: `code` is a FILE_ERRORS case, `path` the path asked.
 * `elsewhere` means the path is not under a read-only grant on a local filesystem: the host's
 * `files` interface does not serve it, and a JavaScript guest has no other way to read it
 * (componentize-js leaves WASI's filesystem out of components whose world does not import
 * it, and wasmon's worlds do not), so grant its directory read-only (`grants.dirs`).
 */
export class FileError extends Error {
  constructor(code, path) {
    const why = {
      "no-entry": "no such file or directory",
      access: "not readable (permissions, or the path leads outside the grant)",
      "wrong-kind": "not a regular file (a directory for readFile, a FIFO, a socket, a device node)",
      "too-large": "larger than the bytes asked for",
      elsewhere: "not under a read-only directory grant on a local filesystem: grant its directory read-only (grants.dirs)",
      io: "the read failed",
    }[code] ?? "unknown error";
    super(`${path}: ${why}`);
    this.code = code;
    this.path = path;
  }
}

/** The `file-error` case a call into the `files` import threw, or undefined for anything else. */
function fileErrorCode(e) {
  // componentize-js throws an imported function's `err` value, or an Error carrying it.
  for (const v of [e, e?.payload, e?.val, e?.cause]) {
    if (typeof v === "string" && FILE_ERRORS.includes(v)) return v;
  }
  return undefined;
}

/**
 * Whole files and directory listings under the daemon's read-only directory grants
 * (`grants.dirs`), one host call each: the WIT `files` interface, which the guest imports and
 * hands over (this module imports nothing, so that `node --test` runs it natively):
 *
 *     import * as host from "wasmon:collector/files@0.1.0";
 *     import { Files } from "./wasmon_guest.js";
 *     const files = new Files(host);
 *     const name = files.readText("/sys/class/hwmon/hwmon0/name", 4096);   // null: absent
 *
 * Failures throw a FileError naming the path and why (`code`); `readText` and `list` answer
 * null for a path that does not exist.
 */
export class Files {
  constructor(host) {
    if (typeof host?.readFile !== "function" || typeof host?.listDir !== "function") {
      throw new TypeError("Files needs the `wasmon:collector/files@0.1.0` import (readFile, listDir)");
    }
    this.host = host;
  }

  #call(f, path, max) {
    try {
      return this.host[f](path, typeof max === "bigint" ? max : f === "readFile" ? BigInt(max) : max);
    } catch (e) {
      const code = fileErrorCode(e);
      if (code === undefined) throw e;
      throw new FileError(code, path);
    }
  }

  /** The whole file at `path` (absolute), at most `max` bytes, as a Uint8Array. */
  readFile(path, max) {
    const bytes = this.#call("readFile", path, max);
    return bytes instanceof Uint8Array ? bytes : Uint8Array.from(bytes);
  }

  /** The file's text (UTF-8; invalid bytes replaced), or null when it does not exist. */
  readText(path, max) {
    try {
      return new TextDecoder().decode(this.readFile(path, max));
    } catch (e) {
      if (e instanceof FileError && e.code === "no-entry") return null;
      throw e;
    }
  }

  /** The names in the directory at `path`, in no order, at most `max` of them. */
  listDir(path, max) {
    return Array.from(this.#call("listDir", path, max), String);
  }

  /** The directory's names sorted, or null when it does not exist. */
  list(path, max) {
    try {
      return this.listDir(path, max).sort();
    } catch (e) {
      if (e instanceof FileError && e.code === "no-entry") return null;
      throw e;
    }
  }
}

// --- agents --------------------------------------------------------------------------------

/** A namespace error; throw one of its subclasses from an agent (PCP's PM_ERR_* meaning). */
export class NsError extends Error {}
/** PM_ERR_NAME: unknown metric name. */
export class UnknownName extends NsError {}
/** PM_ERR_NONLEAF: the name is not a leaf. */
export class NonLeaf extends NsError {}
/** PM_ERR_PMID: unknown or illegal metric identifier. */
export class UnknownPmid extends NsError {}

/** domain.cluster.item, from `[d, c, i]`, `{domain, cluster, item}` or a Pmid. */
export class Pmid {
  constructor(domain, cluster, item) {
    for (const [k, v] of [["domain", domain], ["cluster", cluster], ["item", item]]) {
      if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new TypeError(`pmid ${k} must be a u32, got ${v}`);
    }
    this.domain = domain;
    this.cluster = cluster;
    this.item = item;
    Object.freeze(this);
  }

  static of(p) {
    if (p instanceof Pmid) return p;
    if (Array.isArray(p)) return new Pmid(p[0], p[1], p[2]);
    return new Pmid(p.domain, p.cluster, p.item);
  }

  /** "d.c.i": the key the tree indexes names by. */
  toString() {
    return `${this.domain}.${this.cluster}.${this.item}`;
  }

  equals(other) {
    const o = Pmid.of(other);
    return o.domain === this.domain && o.cluster === this.cluster && o.item === this.item;
  }
}

const SEMANTICS = ["counter", "instant", "discrete"];

/**
 * What an agent says about one metric: `semantics` is counter, instant or discrete; `units` as
 * PCP writes them (`Kbyte`, `count / sec`); `indom` undefined for a singular metric.
 */
/** PCP's value types (`pmDesc.type`) by the names the WIT `value-type` gives them. */
export const TYPES = Object.freeze(["int32", "uint32", "int64", "uint64", "float", "double", "text"]);

/**
 * What an agent says about one metric: `semantics` counter, instant or discrete; `units` as
 * PCP writes them; `indom` undefined for a singular metric; `type` PCP's data type, one of
 * TYPES (fetched values are converted to it; a BigInt keeps a 64-bit counter exact).
 */
export class Metric {
  constructor(pmid, semantics = "instant", units = "", help = "", indom = undefined, type = "double") {
    if (!SEMANTICS.includes(semantics)) {
      throw new TypeError(`semantics must be counter, instant or discrete, got ${JSON.stringify(semantics)}`);
    }
    if (!TYPES.includes(type)) {
      throw new TypeError(`type must be one of ${TYPES.join(", ")}, got ${JSON.stringify(type)}`);
    }
    this.pmid = Pmid.of(pmid);
    this.semantics = semantics;
    this.units = units;
    this.help = help;
    this.indom = indom ?? undefined;
    this.type = type;
  }
}

/**
 * Answers the namespace callbacks (lookup, names, children, describe) for a table of metrics
 * `{ "full.dotted.name": Metric }` under `root`. An agent derives from it and implements
 * `fetch(pmid)`; it calls `this.setMetrics(root, metrics)` again when its metrics change.
 */
export class Tree {
  constructor(root, metrics) {
    this.setMetrics(root, metrics);
  }

  setMetrics(root, metrics) {
    const byName = new Map();
    const byPmid = new Map();
    // Inner nodes -> their children in first-seen order (name -> leaf).
    const inner = new Map([[root, new Map()]]);
    for (const [name, m] of metrics instanceof Map ? metrics : Object.entries(metrics)) {
      if (!name.startsWith(root + ".")) throw new TypeError(`metric ${name} is not under ${root}`);
      const metric = m instanceof Metric ? m : new Metric(m.pmid, m.semantics, m.units, m.help, m.indom, m.type);
      byName.set(name, metric);
      const key = metric.pmid.toString();
      if (!byPmid.has(key)) byPmid.set(key, []);
      byPmid.get(key).push(name);
      const parts = name.slice(root.length + 1).split(".");
      let node = root;
      parts.forEach((part, k) => {
        const leaf = k === parts.length - 1;
        const kids = inner.get(node);
        // A name that is a leaf here and inner elsewhere is inner (as the Python SDK says).
        kids.set(part, (kids.get(part) ?? true) && leaf);
        node = `${node}.${part}`;
        if (!leaf && !inner.has(node)) inner.set(node, new Map());
      });
    }
    this.root = root;
    this.metrics = byName;
    this.byPmid = byPmid;
    this.inner = inner;
  }

  lookupName(name) {
    const m = this.metrics.get(name);
    if (m !== undefined) return m.pmid;
    if (this.inner.has(name)) throw new NonLeaf();
    throw new UnknownName();
  }

  namesOf(pmid) {
    const names = this.byPmid.get(Pmid.of(pmid).toString());
    if (names === undefined) throw new UnknownPmid();
    return [...names];
  }

  /** `[[name, leaf], ...]` of a non-leaf name; a leaf has none. */
  children(name) {
    if (this.metrics.has(name)) return [];
    const kids = this.inner.get(name);
    if (kids === undefined) throw new UnknownName();
    return [...kids];
  }

  describe(pmid) {
    return this.metrics.get(this.namesOf(pmid)[0]);
  }
}

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

/** A value as the WIT `atom` case `type` calls for: integers as BigInt (a Number is rounded
 * and clamped), reals as Number, text as String. */
export function atom(type, v) {
  if (type === "text") return { tag: "text", val: String(v) };
  if (type === "float" || type === "double") return { tag: "real", val: Number(v) };
  let i = typeof v === "bigint" ? v : BigInt(Math.round(Number.isFinite(Number(v)) ? Number(v) : 0));
  if (type === "uint32" || type === "uint64") {
    i = i < 0n ? 0n : i > U64_MAX ? U64_MAX : i;
    return { tag: "uint", val: i };
  }
  i = i < I64_MIN ? I64_MIN : i > I64_MAX ? I64_MAX : i;
  return { tag: "int", val: i };
}

/** What `fetch` returned -> `[[instance, atom], ...]` in `type`: a number, BigInt or string
 * alone is a singular value. */
export function fetchedValues(result, type = "double") {
  const one = typeof result === "number" || typeof result === "bigint" || typeof result === "string";
  const pairs = one ? [["", result]] : Array.from(result);
  return pairs.map(([instance, value]) => [String(instance), atom(type, value)]);
}

/** Atoms -> the WIT `column`: a typed array when all are of one numeric case (the host
 * copies it as one block), else the atoms. */
export function column(atoms) {
  const tag = atoms.length > 0 ? atoms[0].tag : "atoms";
  if (tag !== "text" && tag !== "atoms" && atoms.every((a) => a.tag === tag)) {
    const Typed = { int: BigInt64Array, uint: BigUint64Array, real: Float64Array }[tag];
    return { tag, val: Typed.from(atoms, (a) => a.val) };
  }
  return { tag: "atoms", val: atoms };
}

/** An NsError (or anything else thrown) -> the WIT `ns-error` variant. */
export function nsError(e) {
  if (e instanceof UnknownName) return { tag: "unknown-name" };
  if (e instanceof NonLeaf) return { tag: "non-leaf" };
  if (e instanceof UnknownPmid) return { tag: "unknown-pmid" };
  return { tag: "other", val: String(e?.message ?? e) };
}

/**
 * The objects to export as the `namespace` and `metrics` interfaces
 * (`export const { namespace, metrics } = exportAgent(cls)`). `new cls(params)` configures;
 * the instance answers `lookupName`, `namesOf`, `children` (`[[name, leaf]]`), `describe` (a
 * Metric) and `fetch(pmid)` (a value, or `[[instance, value]]`, in the Metric's `type`), throwing `UnknownName`,
 * `NonLeaf` or `UnknownPmid`; an optional `fetched()` runs after each fetch call (a dynamic
 * subtree may change there). A fetch answers each instance name once and its position in
 * each value (the WIT `fetched`).
 */
export function exportAgent(cls) {
  let impl = null;
  // componentize-js returns a thrown non-Error value as the result's error (an Error traps).
  const call = (f, ...args) => {
    if (impl === null) throw { tag: "other", val: "agent not configured" };
    try {
      return impl[f](...args);
    } catch (e) {
      throw nsError(e);
    }
  };
  const wirePmid = (p) => {
    const q = Pmid.of(p);
    return { domain: q.domain, cluster: q.cluster, item: q.item };
  };
  const namespace = {
    lookupName: (name) => wirePmid(call("lookupName", name)),
    namesOf: (id) => Array.from(call("namesOf", Pmid.of(id)), String),
    children: (name) => Array.from(call("children", name), ([n, leaf]) => ({ name: String(n), leaf: Boolean(leaf) })),
  };
  const metrics = {
    configure(params) {
      impl = configured(cls, params);
    },
    describe(id) {
      const m = call("describe", Pmid.of(id));
      return {
        id: wirePmid(m.pmid), valueType: m.type ?? "double", semantics: m.semantics, units: m.units,
        indom: m.indom, help: m.help,
      };
    },
    fetch(ids) {
      const numbers = new Map();
      const number = (name) => {
        let n = numbers.get(name);
        if (n === undefined) {
          n = numbers.size;
          numbers.set(name, n);
        }
        return n;
      };
      const sets = Array.from(ids, (id) => {
        try {
          const got = call("fetch", Pmid.of(id));
          // The type the agent describes the metric with (a map look-up for a Tree).
          const type = call("describe", Pmid.of(id))?.type ?? "double";
          const pairs = fetchedValues(got, type);
          const instances = Uint32Array.from(pairs, ([instance]) => number(instance));
          return { id, values: { tag: "ok", val: { instances, values: column(pairs.map(([, a]) => a)) } } };
        } catch (e) {
          // One metric failing does not fail the others; `call` made it an ns-error already.
          return { id, values: { tag: "err", val: e?.tag ? e : nsError(e) } };
        }
      });
      if (impl !== null && typeof impl.fetched === "function") impl.fetched();
      // A Map iterates in insertion order: the names in the order their numbers were given.
      return { instances: [...numbers.keys()], sets };
    },
  };
  return { namespace, metrics };
}
