// `dyn_agent`: an agent in JavaScript serving a dynamic subtree (guests/python/dyn_agent's
// twin). Under `root` (default `jsagent.dyn`) it serves `count` counters `root.slot.sN.hits`
// (cluster 1, item N) plus `root.slots` (cluster 0, item 0: how many there are). Every
// `grow_every` fetches one more slot appears, up to `max`. A slot's hits grow by N + 1 at each
// fetch. Parameters: {"domain": 47, "root": "jsagent.dyn", "count": 3, "grow_every": 0, "max": 16}
import { Metric, Tree, UnknownPmid, exportAgent } from "./wasmon_guest.js";

class Dyn extends Tree {
  constructor(params) {
    const domain = params.integer("domain", 47, { min: 1, max: 510 });
    const root = params.string("root", "jsagent.dyn");
    const count = params.integer("count", 3, { min: 0, max: 1000 });
    super(root, {});
    this.domain = domain;
    this.count = count;
    this.growEvery = params.integer("grow_every", 0, { min: 0 });
    this.max = params.integer("max", 16, { min: count, max: 1000 });
    this.fetches = 0;
    this.hits = new Map();
    this.rebuild();
  }

  rebuild() {
    const metrics = {
      [`${this.root}.slots`]: new Metric([this.domain, 0, 0], "discrete", "", "number of slots", undefined, "uint32"),
    };
    for (let n = 0; n < this.count; n++) {
      metrics[`${this.root}.slot.s${n}.hits`] = new Metric([this.domain, 1, n], "counter", "count", `hits of slot ${n}`, undefined, "uint64");
    }
    this.setMetrics(this.root, metrics);
  }

  fetch(pmid) {
    if (pmid.equals([this.domain, 0, 0])) return this.count;
    if (pmid.domain === this.domain && pmid.cluster === 1 && pmid.item < this.count) {
      const n = pmid.item;
      const v = (this.hits.get(n) ?? 0) + n + 1;
      this.hits.set(n, v);
      return v;
    }
    throw new UnknownPmid();
  }

  fetched() {
    this.fetches += 1;
    if (this.growEvery && this.fetches % this.growEvery === 0 && this.count < this.max) {
      this.count += 1;
      this.rebuild();
    }
  }
}

export const { namespace, metrics } = exportAgent(Dyn);
