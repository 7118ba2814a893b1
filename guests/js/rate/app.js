// `rate`: per-second rates of cumulative counters, per series (name, resource). The first
// sample of a series only primes it; later ones become `delta` samples named `name + suffix`
// with unit `unit` and value (v - previous) / seconds elapsed. A counter that went down (a
// reset) primes again. Other kinds pass through unless `drop_other` is set.
//
// Parameters: {"suffix": ".rate", "unit": "/s", "drop_other": false}
import { Kind, exportTransformer } from "./wasmon_guest.js";

class Rate {
  constructor(params) {
    this.suffix = params.string("suffix", ".rate");
    this.unit = params.string("unit", "/s");
    this.dropOther = params.boolean("drop_other", false);
    this.last = new Map(); // "name\0resource" -> [value, timestampNs]
  }

  handle(samples) {
    const out = [];
    for (const s of samples) {
      if (s.kind !== Kind.CUMULATIVE) {
        if (!this.dropOther) out.push(s);
        continue;
      }
      const key = `${s.name}\0${s.resource}`;
      const prev = this.last.get(key);
      this.last.set(key, [s.value, s.timestampNs]);
      if (prev === undefined || s.value < prev[0] || s.timestampNs <= prev[1]) continue;
      const seconds = Number(s.timestampNs - prev[1]) / 1e9;
      s.name = s.name + this.suffix;
      s.unit = this.unit;
      s.kind = Kind.DELTA;
      s.value = (s.value - prev[0]) / seconds;
      out.push(s);
    }
    return out;
  }
}

export const transform = exportTransformer(Rate);
