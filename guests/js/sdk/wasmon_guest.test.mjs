// Unit tests of the JavaScript SDK (run natively by `cargo test`, tests/all/polyglot.rs:
// `node --test`).
import { test } from "node:test";
import assert from "node:assert/strict";

import {
  Codec, ConfigError, EncodeError, Kind, Metric, NonLeaf, Params, Pmid, Request, Sample, Tree, UnknownName,
  UnknownPmid, atom, column, exportAgent, exportExporter, exportTransformer, fetchedValues, rfc3339, sampleJson,
} from "./wasmon_guest.js";

function batch(newStrings, metadata, ids, kinds, values, ts, reset = false) {
  return {
    reset,
    newStrings,
    metadata,
    ids: Uint32Array.from(ids),
    kinds: Uint8Array.from(kinds),
    values: Float64Array.from(values),
    timestampsNs: BigInt64Array.from(ts.map(BigInt)),
  };
}

test("decode then encode sends no string twice", () => {
  const c = new Codec();
  const s = c.decode(batch(["cpu", "h1", "", "k", "v"], [[], [[3, 4]]], [0, 1, 2, 0, 0, 1, 2, 1],
    [Kind.GAUGE, Kind.CUMULATIVE], [1.5, 2.5], [10, 20]));
  assert.equal(s.length, 2);
  assert.deepEqual([s[0].name, s[0].resource, s[0].unit], ["cpu", "h1", ""]);
  assert.equal(s[1].kind, Kind.CUMULATIVE);
  assert.equal(s[1].timestampNs, 20n);
  assert.deepEqual({ ...s[1].metadata }, { k: "v" });
  const out = c.encode(s);
  assert.deepEqual(out.newStrings, []);
  assert.deepEqual(Array.from(out.ids), [0, 1, 2, 0, 0, 1, 2, 1]);
  assert.deepEqual(out.metadata, [[], [[3, 4]]]);
  assert.ok(out.timestampsNs instanceof BigInt64Array);
  assert.deepEqual(Array.from(out.kinds), [0, 2]);
});

test("new strings are appended once; reset clears the table", () => {
  const c = new Codec();
  c.decode(batch(["cpu"], [[]], [], [], [], []));
  let out = c.encode([new Sample("cpu.busy", "cpu", 1), new Sample("cpu.busy", "h2", 2)]);
  assert.deepEqual(out.newStrings, ["cpu.busy", "", "h2"]);
  assert.deepEqual(Array.from(out.ids), [1, 0, 2, 0, 1, 3, 2, 0]);
  assert.deepEqual(c.encode([new Sample("cpu.busy", "h2", 0)]).newStrings, []);
  const s = c.decode(batch(["mem"], [[]], [0, 0, 0, 0], [Kind.DELTA], [3], [5], true));
  assert.equal(s[0].name, "mem");
  out = c.encode([new Sample("cpu.busy", "mem", 1)]);
  assert.deepEqual(out.newStrings, ["cpu.busy", ""]);
  assert.deepEqual(Array.from(out.ids.slice(0, 2)), [1, 0]);
});

test("metadata sets are shared, frozen, and new ones encoded", () => {
  const c = new Codec();
  const s = c.decode(batch(["a", "k", "v"], [[[1, 2]]], [0, 0, 0, 0, 0, 0, 0, 0], [0, 0], [1, 2], [0, 0]));
  assert.equal(s[0].metadata, s[1].metadata);
  assert.ok(Object.isFrozen(s[0].metadata));
  s[1].metadata = { ...s[1].metadata, anomaly: "true" };
  const out = c.encode(s);
  assert.deepEqual(out.metadata, [[[1, 2]], [[1, 2], [3, 4]]]);
  assert.deepEqual(out.newStrings, ["anomaly", "true"]);
});

test("unknown ids and kinds read as empty and gauge; bad output throws", () => {
  const s = new Codec().decode(batch([], [], [9, 9, 9, 9], [7], [1], [0]));
  assert.deepEqual([s[0].name, s[0].kind], ["", Kind.GAUGE]);
  assert.throws(() => new Codec().encode([new Sample("a", "b", 1, 0n, 9)]), TypeError);
});

test("params name the offending parameter", () => {
  const p = Params.parse('{"factor": 0.5, "prefix": "disk.", "n": 3, "on": true, "z": null}');
  assert.equal(p.number("factor", 1), 0.5);
  assert.equal(p.number("missing", 2), 2);
  assert.equal(p.number("z", 4), 4);
  assert.equal(p.string("prefix"), "disk.");
  assert.equal(p.integer("n", 1, { min: 2 }), 3);
  assert.equal(p.boolean("on"), true);
  assert.throws(() => p.number("prefix"), /`prefix` must be a number, got "disk."/);
  assert.throws(() => p.integer("n", 1, { min: 5 }), /`n` must be at least 5/);
  assert.throws(() => p.string("absent"), /`absent` is required/);
  assert.throws(() => Params.parse("[1]"), ConfigError);
  assert.throws(() => Params.parse("{"), /not valid JSON/);
  assert.deepEqual(Params.parse("").values, {});
});

test("exportTransformer configures, handles and reports errors as strings", () => {
  class Double {
    constructor(params) {
      this.f = params.number("factor", 2);
    }
    handle(samples) {
      for (const s of samples) s.value *= this.f;
      return samples;
    }
  }
  const t = exportTransformer(Double);
  assert.throws(() => t.configure('{"factor": "x"}'), (e) => typeof e === "string" && e.includes("`factor`"));
  t.configure("{}");
  const out = t.handle(batch(["m", "r", ""], [[]], [0, 1, 2, 0], [0], [21], [1]));
  assert.deepEqual(Array.from(out.values), [42]);
  assert.deepEqual(out.newStrings, []);
  assert.equal(t.flush().values.length, 0);
});

const tree = () => new Tree("a", {
  "a.x": new Metric([9, 0, 0], "counter", "count", "x"),
  "a.b.y": new Metric([9, 1, 0]),
  "a.b.z": new Metric([9, 1, 1], "discrete"),
  "a.alias": new Metric([9, 0, 0]),
});

test("a tree answers look-ups, names, children and descriptions as PCP does", () => {
  const t = tree();
  assert.ok(t.lookupName("a.b.z").equals([9, 1, 1]));
  assert.throws(() => t.lookupName("a.b"), NonLeaf);
  assert.throws(() => t.lookupName("a"), NonLeaf);
  assert.throws(() => t.lookupName("a.nope"), UnknownName);
  assert.throws(() => t.lookupName("a.x.deeper"), UnknownName);
  assert.deepEqual(t.namesOf(new Pmid(9, 0, 0)), ["a.x", "a.alias"]);
  assert.throws(() => t.namesOf([9, 7, 7]), UnknownPmid);
  assert.deepEqual(t.children("a"), [["x", true], ["b", false], ["alias", true]]);
  assert.deepEqual(t.children("a.b"), [["y", true], ["z", true]]);
  assert.deepEqual(t.children("a.x"), []);
  assert.throws(() => t.children("zz"), UnknownName);
  assert.equal(t.describe({ domain: 9, cluster: 0, item: 0 }).units, "count");
  assert.throws(() => new Tree("a", { "b.c": new Metric([1, 0, 0]) }), /not under a/);
  assert.throws(() => new Metric([1, 0, 0], "gauge"), /semantics/);
  assert.throws(() => new Metric([1, 0, 0], "instant", "", "", undefined, "int"), /type/);
  assert.throws(() => new Pmid(1, -1, 0), /cluster/);
});

test("exportAgent speaks the WIT shapes: ns-error variants, per-metric results, fetched()", () => {
  class A extends Tree {
    constructor(params) {
      super("a", { "a.x": new Metric([9, 0, 0]) });
      this.v = params.number("v");
      this.calls = 0;
    }
    fetch(p) {
      if (p.item === 5) throw new Error("boom");
      if (p.item !== 0) throw new UnknownPmid();
      return [["i1", this.v], ["i2", BigInt(2)]];
    }
    fetched() {
      this.calls += 1;
      this.setMetrics("a", { "a.x": new Metric([9, 0, 0]), [`a.n${this.calls}`]: new Metric([9, 0, this.calls]) });
    }
  }
  const { namespace, metrics: source } = exportAgent(A);
  assert.throws(() => namespace.lookupName("a.x"), (e) => e.tag === "other" && /not configured/.test(e.val));
  assert.throws(() => source.configure("{}"), (e) => e === "`v` is required (a number)");
  source.configure('{"v": 1.5}');
  assert.deepEqual(namespace.lookupName("a.x"), { domain: 9, cluster: 0, item: 0 });
  assert.throws(() => namespace.lookupName("a"), (e) => e.tag === "non-leaf");
  assert.throws(() => namespace.lookupName("b"), (e) => e.tag === "unknown-name");
  assert.deepEqual(namespace.children("a"), [{ name: "x", leaf: true }]);
  const d = source.describe({ domain: 9, cluster: 0, item: 0 });
  assert.deepEqual(d, {
    id: { domain: 9, cluster: 0, item: 0 }, valueType: "double", semantics: "instant", units: "", indom: undefined, help: "",
  });
  const ids = [0, 3, 5].map((item) => ({ domain: 9, cluster: 0, item }));
  const { instances, sets: got } = source.fetch(ids);
  // Each instance name once; values by position.
  assert.deepEqual(instances, ["i1", "i2"]);
  assert.deepEqual(got[0].values, {
    tag: "ok", val: { instances: Uint32Array.from([0, 1]), values: { tag: "real", val: Float64Array.from([1.5, 2]) } },
  });
  assert.deepEqual(got[1].values, { tag: "err", val: { tag: "unknown-pmid" } });
  assert.deepEqual(got[2].values, { tag: "err", val: { tag: "other", val: "boom" } });
  // fetched() changed the namespace.
  assert.deepEqual(namespace.namesOf({ domain: 9, cluster: 0, item: 1 }), ["a.n1"]);
});

test("fetched values take the metric's type", () => {
  const big = (1n << 60n) + 1n;
  assert.deepEqual(fetchedValues(big, "uint64"), [["", { tag: "uint", val: big }]]);
  assert.deepEqual(fetchedValues(2.6, "int32"), [["", { tag: "int", val: 3n }]]);
  assert.deepEqual(fetchedValues(-5, "uint64"), [["", { tag: "uint", val: 0n }]]);
  assert.deepEqual(fetchedValues([["cpu0", 1]], "double"), [["cpu0", { tag: "real", val: 1 }]]);
  assert.deepEqual(fetchedValues("idle", "text"), [["", { tag: "text", val: "idle" }]]);
});

test("column takes one numeric case as a typed array, else the atoms", () => {
  assert.deepEqual(column([atom("uint64", 1n), atom("uint64", 2n)]), { tag: "uint", val: BigUint64Array.from([1n, 2n]) });
  assert.deepEqual(column([atom("int64", -1)]), { tag: "int", val: BigInt64Array.from([-1n]) });
  const text = [atom("text", "a")];
  assert.deepEqual(column(text), { tag: "atoms", val: text });
  const mixed = [atom("int64", 1), atom("double", 2)];
  assert.deepEqual(column(mixed), { tag: "atoms", val: mixed });
  assert.deepEqual(column([]), { tag: "atoms", val: [] });
});

test("rfc3339 writes only the fraction digits needed", () => {
  assert.equal(rfc3339(1704067200000000000n), "2024-01-01T00:00:00Z");
  assert.equal(rfc3339(1704067200500000000n), "2024-01-01T00:00:00.500Z");
  assert.equal(rfc3339(1704067200000001000n), "2024-01-01T00:00:00.000001Z");
  assert.equal(rfc3339(1704067200123456789n), "2024-01-01T00:00:00.123456789Z");
  assert.equal(rfc3339(-1n), "1969-12-31T23:59:59.999999999Z");
});

test("sampleJson is wasmon's sample shape", () => {
  const s = new Sample("disk.used", "h1", 1.5, 1704067200000000001n, Kind.CUMULATIVE, "B", { dev: "sda", note: "é" });
  assert.equal(sampleJson(s), '{"name":"disk.used","resource":"h1","value":1.5,"unit":"B",'
    + '"type":"cumulative","timestamp":"2024-01-01T00:00:00.000000001Z","metadata":{"dev":"sda","note":"é"}}');
  assert.match(sampleJson(new Sample("a", "", NaN)), /"value":"NaN"/);
  assert.match(sampleJson(new Sample("a", "", -Infinity)), /"value":"-inf"/);
});

test("exportExporter decodes batches, checks requests and returns EncodeError as the WIT error", () => {
  class Lines {
    constructor(params) { this.suffix = params.string("suffix", ""); }
    encode(samples) {
      if (samples.some((s) => s.name === "bad")) throw new EncodeError("cannot encode `bad`");
      if (samples.some((s) => s.name === "bug")) throw new Error("a bug");
      return [new Request(samples.map((s) => s.name).join(","), { contentType: "text/plain", suffix: this.suffix, headers: [["X-K", "v"]] })];
    }
  }
  const encode = exportExporter(Lines);
  assert.throws(() => encode.encode(batch([], [], [], [], [], [])), (e) => e instanceof Error && /before configure/.test(e.message));
  assert.throws(() => encode.configure('{"suffix": 1}'), (e) => e === "`suffix` must be a string, got 1");
  encode.configure('{"suffix": "/x"}');
  const got = encode.encode(batch(["cpu", "h", ""], [[]], [0, 1, 2, 0, 0, 1, 2, 0], [0, 0], [1, 2], [1, 2]));
  assert.equal(got.length, 1);
  assert.deepEqual({ ...got[0], body: new TextDecoder().decode(got[0].body) },
    { suffix: "/x", contentType: "text/plain", headers: [["X-K", "v"]], body: "cpu,cpu" });
  assert.ok(got[0].body instanceof Uint8Array);
  assert.throws(() => encode.encode(batch(["bad"], [[]], [3, 1, 2, 0], [0], [1], [1])), (e) => e === "cannot encode `bad`");
  assert.throws(() => encode.encode(batch(["bug"], [[]], [4, 1, 2, 0], [0], [1], [1])), (e) => e instanceof Error);
  assert.throws(() => new Request(3).toWit(), /Request.body/);
  assert.throws(() => new Request("", { headers: [["a"]] }).toWit(), /Request.headers/);
});
