"""`dyn_agent`: an agent in Python serving a dynamic subtree.

Under `root` (default `pyagent.dyn`) it serves `count` counters `root.slot.sN.hits` (cluster 1,
item N) plus `root.slots` (cluster 0, item 0: how many there are). The set of slots is
dynamic: every `grow_every` fetches one more slot appears, up to `max`. Values change at each
fetch (a slot's hits grow by N + 1). Parameters::

    {"domain": 45, "root": "pyagent.dyn", "count": 3, "grow_every": 0, "max": 16}
"""

from wasmon_guest import Metric, Tree, UnknownPmid, export_agent


class Dyn(Tree):
    def __init__(self, params):
        self.domain = params.integer("domain", 45, min=1, max=510)
        self.root_name = params.string("root", "pyagent.dyn")
        self.count = params.integer("count", 3, min=0, max=1000)
        self.grow_every = params.integer("grow_every", 0, min=0)
        self.max = params.integer("max", 16, min=self.count, max=1000)
        self.fetches = 0
        self.hits = {}
        self._rebuild()

    def _rebuild(self):
        metrics = {
            self.root_name + ".slots": Metric((self.domain, 0, 0), "discrete", "",
                                              "number of slots", type="uint32"),
        }
        for n in range(self.count):
            metrics["%s.slot.s%d.hits" % (self.root_name, n)] = Metric(
                (self.domain, 1, n), "counter", "count", "hits of slot %d" % n, type="uint64")
        Tree.__init__(self, self.root_name, metrics)

    def fetch(self, pmid):
        if pmid == (self.domain, 0, 0):
            value = self.count
        elif pmid.domain == self.domain and pmid.cluster == 1 and pmid.item < self.count:
            n = pmid.item
            self.hits[n] = self.hits.get(n, 0) + n + 1
            value = self.hits[n]
        else:
            raise UnknownPmid()
        return value

    def fetched(self):
        self.fetches += 1
        if self.grow_every and self.fetches % self.grow_every == 0 and self.count < self.max:
            self.count += 1
            self._rebuild()


Namespace, Metrics = export_agent(Dyn)
