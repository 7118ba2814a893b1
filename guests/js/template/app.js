// The `template` scale transformer in JavaScript: multiplies every sample whose name starts with
// `prefix` by `factor` and may give it a new `unit` (the Rust guests/template, same output).
import { exportTransformer } from "./wasmon_guest.js";

class Scale {
  constructor(params) {
    this.factor = params.number("factor", 1);
    this.prefix = params.string("prefix", "");
    this.unit = params.string("unit", null);
  }

  handle(samples) {
    for (const s of samples) {
      if (s.name.startsWith(this.prefix)) {
        s.value *= this.factor;
        if (this.unit !== null) s.unit = this.unit;
      }
    }
    return samples;
  }
}

export const transform = exportTransformer(Scale);
