// Unit tests of the JavaScript SDK (run natively by `cargo test`, tests/all/polyglot.rs:
// `node --test`).
import { test } from "node:test";
import assert from "node:assert/strict";

import { Codec, ConfigError, Kind, Params, Sample, exportTransformer } from "./wasmon_guest.js";

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
