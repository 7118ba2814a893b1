"""wasmon guest SDK for Python (componentize-py).

A transformer is a class whose constructor takes the parameters (``Params``) and which has
``handle(samples)`` and, optionally, ``flush()``; both return an iterable of ``Sample``::

    from wasmon_guest import Sample, export_transformer

    class Scale:
        def __init__(self, params):
            self.factor = params.number("factor", 1.0)

        def handle(self, samples):
            for s in samples:
                s.value *= self.factor
            return samples

    Transform = export_transformer(Scale)

An agent is a class answering look-ups and fetches; ``Tree`` answers the namespace part from a
table of metrics, so an agent built on it only implements ``fetch``::

    Namespace, Metrics = export_agent(MyAgent)

An exporter is a class whose constructor takes the parameters and whose ``encode(samples)``
returns the requests that carry them (the host sends them, retries and acknowledges)::

    from wasmon_guest import Request, export_exporter, sample_json

    class Lines:
        def __init__(self, params):
            pass

        def encode(self, samples):
            body = "".join(sample_json(s) + "\n" for s in samples)
            return [Request(body, content_type="application/x-ndjson")]

    Encode = export_exporter(Lines)

What this module hides (see ``wit/types.wit``): the string table the host and the guest share
(strings cross the boundary as ids; only strings the host has not seen are sent back, in
``new-strings``; ``reset`` clears the table), the metadata sets, the column-wise batches and the
kinds' byte encoding. The codec below is plain Python so that it is unit-tested natively; only
``export_*`` touch the generated bindings (``wit_world``), which exist inside a component.
"""

import json
import math
import time
from types import MappingProxyType

__all__ = [
    "Kind", "Sample", "Params", "ConfigError", "Codec", "export_transformer", "log",
    "Request", "EncodeError", "sample_json", "rfc3339", "export_exporter",
    "Pmid", "Metric", "Tree", "UnknownName", "NonLeaf", "UnknownPmid", "export_agent",
    "read_file",
]

# Kinds, as the `kinds` column encodes them (`sample-kind`'s declaration order).
GAUGE, DELTA, CUMULATIVE = 0, 1, 2


class Kind:
    GAUGE = GAUGE
    DELTA = DELTA
    CUMULATIVE = CUMULATIVE
    NAMES = ("gauge", "delta", "cumulative")

    @staticmethod
    def parse(text):
        """`gauge`, `delta` or `cumulative` -> the kind; anything else -> ValueError."""
        try:
            return Kind.NAMES.index(text)
        except ValueError:
            raise ValueError("unknown kind %r (gauge, delta or cumulative)" % (text,)) from None


EMPTY_METADATA = MappingProxyType({})


class Sample:
    """One sample. `metadata` is a read-only mapping shared by the samples of a batch that
    carry the same set: to change it, assign a new dict (``s.metadata = {**s.metadata, k: v}``)."""

    __slots__ = ("name", "resource", "unit", "kind", "value", "timestamp_ns", "metadata")

    def __init__(self, name, resource, value, timestamp_ns=0, kind=GAUGE, unit="",
                 metadata=EMPTY_METADATA):
        self.name = name
        self.resource = resource
        self.unit = unit
        self.kind = kind
        self.value = value
        self.timestamp_ns = timestamp_ns
        self.metadata = metadata

    def copy(self, **changes):
        s = Sample(self.name, self.resource, self.value, self.timestamp_ns, self.kind,
                   self.unit, self.metadata)
        for k, v in changes.items():
            setattr(s, k, v)
        return s

    def __eq__(self, other):
        return isinstance(other, Sample) and all(
            getattr(self, f) == getattr(other, f) for f in Sample.__slots__
        )

    def __repr__(self):
        return "Sample(%r, %r, %r, ts=%r, kind=%s, unit=%r, metadata=%r)" % (
            self.name, self.resource, self.value, self.timestamp_ns,
            Kind.NAMES[self.kind], self.unit, dict(self.metadata))


class ConfigError(Exception):
    """Raised while configuring: the message should name the offending parameter."""


_MISSING = object()


class Params(dict):
    """The parameters from the pipeline config (a JSON object), with typed getters that name
    the parameter in their error."""

    @staticmethod
    def parse(text):
        try:
            value = json.loads(text) if text.strip() else None
        except ValueError as e:
            raise ConfigError("parameters are not valid JSON: %s" % e) from None
        if value is None:
            return Params()
        if not isinstance(value, dict):
            raise ConfigError("parameters must be an object, got %s" % json.dumps(value))
        return Params(value)

    def _get(self, key, default, check, what):
        value = self.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise ConfigError("`%s` is required (%s)" % (key, what))
            return default
        if not check(value):
            raise ConfigError("`%s` must be %s, got %s" % (key, what, json.dumps(value)))
        return value

    def number(self, key, default=_MISSING, min=None, max=None):
        v = self._get(key, default, lambda v: isinstance(v, (int, float))
                      and not isinstance(v, bool) and math.isfinite(v), "a number")
        return float(self._bounded(key, v, min, max))

    def integer(self, key, default=_MISSING, min=None, max=None):
        v = self._get(key, default, lambda v: isinstance(v, int) and not isinstance(v, bool),
                      "an integer")
        return self._bounded(key, v, min, max)

    def string(self, key, default=_MISSING):
        return self._get(key, default, lambda v: isinstance(v, str), "a string")

    def boolean(self, key, default=_MISSING):
        return self._get(key, default, lambda v: isinstance(v, bool), "true or false")

    @staticmethod
    def _bounded(key, v, lo, hi):
        if lo is not None and v < lo:
            raise ConfigError("`%s` must be at least %s, got %s" % (key, lo, v))
        if hi is not None and v > hi:
            raise ConfigError("`%s` must be at most %s, got %s" % (key, hi, v))
        return v


class Codec:
    """The guest's half of the string table, and batches to samples and back. Any object with
    the fields of the WIT `batch` record (snake_case) decodes; `encode` returns the fields as a
    dict for the caller to build its record from."""

    def __init__(self):
        self.strings = []
        self.ids = {}

    def _append(self, text):
        self.ids.setdefault(text, len(self.strings))
        self.strings.append(text)

    def decode(self, batch):
        if batch.reset:
            self.strings = []
            self.ids = {}
        for text in batch.new_strings:
            self._append(text)
        table = self.strings
        n_strings = len(table)

        def s(i):
            # The host only sends ids it has defined; an unknown one reads as "".
            return table[i] if i < n_strings else ""

        sets = [
            EMPTY_METADATA if not pairs
            else MappingProxyType({s(k): s(v) for k, v in pairs})
            for pairs in batch.metadata
        ]
        ids, kinds, values, ts = batch.ids, batch.kinds, batch.values, batch.timestamps_ns
        out = []
        for i in range(len(values)):
            j = 4 * i
            m = ids[j + 3]
            k = kinds[i]
            out.append(Sample(s(ids[j]), s(ids[j + 1]), values[i], ts[i],
                              k if k <= CUMULATIVE else GAUGE, s(ids[j + 2]),
                              sets[m] if m < len(sets) else EMPTY_METADATA))
        return out

    def _id(self, text, new):
        i = self.ids.get(text)
        if i is None:
            if not isinstance(text, str):
                raise TypeError("sample strings must be str, got %r" % (text,))
            i = len(self.strings)
            self._append(text)
            new.append(text)
        return i

    def encode(self, samples):
        new = []
        sets = []
        by_obj = {}
        by_pairs = {}
        ids = []
        kinds = bytearray()
        values = []
        ts = []
        for x in samples:
            md = x.metadata
            m = by_obj.get(id(md))
            if m is None:
                pairs = tuple(md.items())
                m = by_pairs.get(pairs)
                if m is None:
                    m = len(sets)
                    sets.append([(self._id(k, new), self._id(v, new)) for k, v in pairs])
                    by_pairs[pairs] = m
                # Keyed by identity while `samples` keeps the mapping alive.
                by_obj[id(md)] = m
            ids += (self._id(x.name, new), self._id(x.resource, new), self._id(x.unit, new), m)
            if x.kind not in (GAUGE, DELTA, CUMULATIVE):
                raise ValueError("sample %r: kind must be GAUGE, DELTA or CUMULATIVE" % (x.name,))
            kinds.append(x.kind)
            values.append(float(x.value))
            ts.append(int(x.timestamp_ns))
        return dict(reset=False, new_strings=new, metadata=sets, ids=ids, kinds=bytes(kinds),
                    values=values, timestamps_ns=ts)


# --- exporters: requests and wasmon's sample JSON (plain Python, unit-tested natively) ------

class EncodeError(Exception):
    """Raised by an exporter's `encode` when the batch can never be encoded: the host
    dead-letters it with the message. Any other exception traps, and the host retries the batch
    on a fresh instance (a bug may be transient; a batch that cannot be encoded is not)."""


class Request:
    """One request for the host to send: `body` (bytes, or a str sent as UTF-8), its
    `content_type`, a `suffix` appended to the sink's URL or NATS subject, and more `headers`
    as (name, value) pairs (the host refuses the ones it owns, such as Content-Length)."""

    __slots__ = ("body", "content_type", "suffix", "headers")

    def __init__(self, body, content_type="application/octet-stream", suffix="", headers=()):
        self.body = body
        self.content_type = content_type
        self.suffix = suffix
        self.headers = headers

    def fields(self):
        """The WIT record's fields, checked: (suffix, content_type, headers, body)."""
        body = self.body
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif isinstance(body, (bytearray, memoryview)):
            body = bytes(body)
        elif not isinstance(body, bytes):
            raise TypeError("Request.body must be bytes or str, got %s" % type(body).__name__)
        for field in ("content_type", "suffix"):
            if not isinstance(getattr(self, field), str):
                raise TypeError("Request.%s must be a str, got %r" % (field, getattr(self, field)))
        headers = []
        for h in self.headers:
            if (not isinstance(h, (tuple, list)) or len(h) != 2
                    or not all(isinstance(x, str) for x in h)):
                raise TypeError("Request.headers must be (name, value) pairs of str, got %r" % (h,))
            headers.append((h[0], h[1]))
        return self.suffix, self.content_type, headers, body


def rfc3339(ns):
    """Nanoseconds since the epoch as RFC 3339 in UTC, with as many fraction digits as needed
    (0, 3, 6 or 9), as wasmon writes timestamps."""
    secs, frac = divmod(int(ns), 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    if frac == 0:
        return text + "Z"
    if frac % 1_000_000 == 0:
        return "%s.%03dZ" % (text, frac // 1_000_000)
    if frac % 1_000 == 0:
        return "%s.%06dZ" % (text, frac // 1_000)
    return "%s.%09dZ" % (text, frac)


def sample_json(s):
    """One sample as wasmon's sample JSON (no newline): what `wasmon transform` writes and the
    HTTP sample endpoint reads. JSON has no NaN or infinity: they are written as strings, as
    wasmon writes them."""
    v = float(s.value)
    if math.isnan(v):
        v = "NaN"
    elif math.isinf(v):
        v = "inf" if v > 0 else "-inf"
    return json.dumps({
        "name": s.name, "resource": s.resource, "value": v, "unit": s.unit,
        "type": Kind.NAMES[s.kind], "timestamp": rfc3339(s.timestamp_ns),
        "metadata": dict(s.metadata),
    }, ensure_ascii=False, separators=(",", ":"))


# --- the component's glue (only inside a component: `wit_world` is generated there) ---------

def _err(value):
    from componentize_py_types import Err
    return Err(value)


def log(level, message):
    """A log line attributed to this guest; `level` is one of trace, debug, info, warn, error."""
    from wit_world.imports import host, types
    host.log(getattr(types.Level, level.upper()), message)


def read_file(path, max):
    """The whole file at `path` (absolute, as the guest sees it) as bytes, at most `max` of them;
    None when it cannot be read (absent, not permitted, not a regular file, larger than `max`).
    In a component it is one call of the host's `files` interface where a read-only grant on a
    local filesystem serves the path (open() would take a dozen host calls); elsewhere, and
    natively (tests), open()."""
    try:
        from wit_world.imports import files
    except ImportError:
        files = None
    if files is not None:
        from componentize_py_types import Err
        try:
            return bytes(files.read_file(path, max))
        except Err as e:
            if e.value != files.FileError.ELSEWHERE:
                return None
    try:
        with open(path, "rb") as f:
            data = f.read(max + 1)
    except OSError:
        return None
    return data if len(data) <= max else None


def _configure(cls, params):
    """`cls(params)`, or the WIT error naming what is wrong."""
    try:
        return cls(Params.parse(params))
    except ConfigError as e:
        raise _err(str(e))
    except (TypeError, ValueError) as e:
        raise _err("bad parameters: %s" % e)


def export_transformer(cls):
    """The class componentize-py exports as the `transform` interface (assign it to
    `Transform` in the app module). `cls(params)` configures; `handle` and `flush` return
    iterables of samples."""
    state = {"impl": None, "codec": Codec()}

    def batch(fields):
        from wit_world.imports.types import Batch
        return Batch(**fields)

    class Transform:
        def configure(self, params):
            state["impl"] = _configure(cls, params)

        def handle(self, input):
            samples = state["codec"].decode(input)
            impl = state["impl"]
            if impl is None:
                log("error", "handle called before configure")
                return batch(state["codec"].encode([]))
            return batch(state["codec"].encode(list(impl.handle(samples) or ())))

        def flush(self):
            impl = state["impl"]
            f = getattr(impl, "flush", None)
            out = list(f() or ()) if f is not None else []
            return batch(state["codec"].encode(out))

    return Transform


def export_exporter(cls):
    """The class componentize-py exports as the `encode` interface (assign it to `Encode` in
    the app module). `cls(params)` configures; `encode(samples)` returns an iterable of
    `Request`s (sent in order) or raises `EncodeError` for a batch that can never be encoded."""
    state = {"impl": None, "codec": Codec()}

    class Encode:
        def configure(self, params):
            state["impl"] = _configure(cls, params)

        def encode(self, input):
            from wit_world.exports.encode import Request as WitRequest
            # Decoded even before configure: the string table must follow every batch.
            samples = state["codec"].decode(input)
            impl = state["impl"]
            if impl is None:
                # The host always configures first. An Err would dead-letter the batch; a trap
                # (this exception) leaves it queued for a fresh, configured instance.
                raise RuntimeError("encode called before configure")
            try:
                out = impl.encode(samples)
            except EncodeError as e:
                raise _err(str(e))
            return [WitRequest(*r.fields()) for r in out or ()]

    return Encode


# --- agents -----------------------------------------------------------------------------------

class NsError(Exception):
    """A namespace error; raise one of its subclasses from an agent."""


class UnknownName(NsError):
    """PM_ERR_NAME: unknown metric name."""


class NonLeaf(NsError):
    """PM_ERR_NONLEAF: the name is not a leaf."""


class UnknownPmid(NsError):
    """PM_ERR_PMID: unknown or illegal metric identifier."""


class Pmid(tuple):
    """domain.cluster.item"""

    def __new__(cls, domain, cluster, item):
        return tuple.__new__(cls, (domain, cluster, item))

    domain = property(lambda self: self[0])
    cluster = property(lambda self: self[1])
    item = property(lambda self: self[2])

    def __repr__(self):
        return "%d.%d.%d" % self


# PCP's value types (`pmDesc.type`) by the names the WIT `value-type` gives them.
TYPES = ("int32", "uint32", "int64", "uint64", "float", "double", "text")


class Metric:
    """What an agent says about one metric: `semantics` is counter, instant or discrete;
    `units` as PCP writes them; `indom` None for a singular metric; `type` PCP's data type,
    one of TYPES (fetched values are converted to it: an int stays exact past 2**53)."""

    def __init__(self, pmid, semantics="instant", units="", help="", indom=None, type="double"):
        if semantics not in ("counter", "instant", "discrete"):
            raise ValueError("semantics must be counter, instant or discrete, got %r" % semantics)
        if type not in TYPES:
            raise ValueError("type must be one of %s, got %r" % (", ".join(TYPES), type))
        self.pmid = Pmid(*pmid)
        self.semantics = semantics
        self.units = units
        self.help = help
        self.indom = indom
        self.type = type


class Tree:
    """Answers the namespace callbacks (lookup, names, children, describe) for a table of
    metrics `{full.dotted.name: Metric}` under `root`; an agent derives from it (calling
    `Tree.__init__(self, root, metrics)`, possibly again when its metrics change) and
    implements `fetch(pmid)`."""

    def __init__(self, root, metrics):
        self.root = root
        self.metrics = dict(metrics)
        self.by_pmid = {}
        for name, m in self.metrics.items():
            if not name.startswith(root + "."):
                raise ValueError("metric %s is not under %s" % (name, root))
            self.by_pmid.setdefault(m.pmid, []).append(name)

    def _is_inner(self, name):
        prefix = name + "."
        return name == self.root or any(n.startswith(prefix) for n in self.metrics)

    def lookup_name(self, name):
        m = self.metrics.get(name)
        if m is not None:
            return m.pmid
        if self._is_inner(name):
            raise NonLeaf()
        raise UnknownName()

    def names_of(self, pmid):
        names = self.by_pmid.get(Pmid(*pmid))
        if not names:
            raise UnknownPmid()
        return list(names)

    def children(self, name):
        if name in self.metrics:
            return []
        if not self._is_inner(name):
            raise UnknownName()
        prefix = name + "."
        kids = {}
        for n in self.metrics:
            if n.startswith(prefix):
                rest = n[len(prefix):]
                head = rest.split(".", 1)[0]
                kids[head] = kids.get(head, True) and "." not in rest
        return list(kids.items())

    def describe(self, pmid):
        names = self.names_of(pmid)
        return self.metrics[names[0]]


def _values(result, type="double"):
    """What `fetch` returned -> list of (instance, value) in `type`: a number (or, for a text
    metric, a string) alone is a singular value. Integer types take ints (a float is
    rounded), float and double take floats, text takes strings."""
    if isinstance(result, (int, float, str)) and not isinstance(result, bool):
        result = [("", result)]
    if type == "text":
        return [(str(i), str(v)) for i, v in result]
    if type in ("float", "double"):
        return [(str(i), float(v)) for i, v in result]
    out = []
    for i, v in result:
        if isinstance(v, float):
            v = round(v)
        out.append((str(i), int(v)))
    return out


def _column(t, type, values):
    """A metric's values as the WIT `column` case its type calls for: numbers as one typed
    list (copied by the host as one block), text as atoms."""
    if type == "text":
        return t.Column_Atoms([t.Atom_Text(v) for v in values])
    if type in ("float", "double"):
        return t.Column_Real(values)
    if type in ("uint32", "uint64"):
        return t.Column_Uint([max(0, min(v, 2**64 - 1)) for v in values])
    return t.Column_Int([max(-2**63, min(v, 2**63 - 1)) for v in values])


def export_agent(cls):
    """The classes componentize-py exports as `namespace` and `metrics` (assign them to
    `Namespace, Metrics` in the app module). `cls(params)` configures; the instance answers
    `lookup_name`, `names_of`, `children` (list of (name, leaf)), `describe` (a Metric) and
    `fetch(pmid)` (a value, or a list of (instance, value), in the Metric's `type`), raising `UnknownName`,
    `NonLeaf` or `UnknownPmid`; an optional `fetched()` runs after each fetch call."""
    state = {"impl": None}

    def wit():
        from wit_world.imports import types
        return types

    def ns_err(e):
        t = wit()
        if isinstance(e, UnknownName):
            return _err(t.NsError_UnknownName())
        if isinstance(e, NonLeaf):
            return _err(t.NsError_NonLeaf())
        if isinstance(e, UnknownPmid):
            return _err(t.NsError_UnknownPmid())
        return _err(t.NsError_Other(str(e)))

    def call(f, *args):
        impl = state["impl"]
        if impl is None:
            raise ns_err(NsError("agent not configured"))
        try:
            return getattr(impl, f)(*args)
        except NsError as e:
            raise ns_err(e)

    def to_pmid(p):
        return wit().Pmid(*Pmid(*p))

    class Namespace:
        def lookup_name(self, name):
            return to_pmid(call("lookup_name", name))

        def names_of(self, id):
            return list(call("names_of", Pmid(id.domain, id.cluster, id.item)))

        def children(self, name):
            return [wit().Child(n, bool(leaf)) for n, leaf in call("children", name)]

    class Metrics:
        def configure(self, params):
            state["impl"] = _configure(cls, params)

        def describe(self, id):
            t = wit()
            m = call("describe", Pmid(id.domain, id.cluster, id.item))
            sem = {"counter": t.Semantics.COUNTER, "instant": t.Semantics.INSTANT,
                   "discrete": t.Semantics.DISCRETE}[m.semantics]
            ty = getattr(t.ValueType, getattr(m, "type", "double").upper())
            return t.MetricDesc(to_pmid(m.pmid), ty, sem, m.units, m.indom, m.help)

        def fetch(self, ids):
            t = wit()
            from componentize_py_types import Err, Ok
            out = []
            # Each instance name crosses once per fetch call; values carry its position.
            numbers = {}
            number = numbers.setdefault
            for id in ids:
                try:
                    pmid = Pmid(id.domain, id.cluster, id.item)
                    got = call("fetch", pmid)
                    # The type the agent describes the metric with (a dict look-up for a Tree).
                    ty = getattr(call("describe", pmid), "type", "double")
                    vals = _values(got, ty)
                    out.append(t.IndexedSet(id, Ok(t.IndexedValues(
                        [number(i, len(numbers)) for i, _ in vals], _column(t, ty, [v for _, v in vals])))))
                except Err as e:
                    # `call` turned an NsError into the WIT error.
                    out.append(t.IndexedSet(id, e))
                except Exception as e:
                    # One metric failing does not fail the others.
                    out.append(t.IndexedSet(id, Err(t.NsError_Other("fetch failed: %s" % e))))
            # An agent may change its namespace between fetches (a dynamic subtree).
            hook = getattr(state["impl"], "fetched", None)
            if hook is not None:
                hook()
            # Dicts keep insertion order: the names in the order their numbers were given.
            return t.Fetched(list(numbers), out)

    return Namespace, Metrics

