"""OTLP/HTTP exporter: each batch as one `ExportMetricsServiceRequest` (protobuf), the same
bytes as the bundled Rust `otlp` guest (`guests/otlp`) writes, for any OpenTelemetry
collector's `/v1/metrics`.

Parameters: {"resource": {"service.name": "wasmon"}, "suffix": "/v1/metrics"}
- `resource`: the attributes of the request's one resource (strings), in key order;
- `suffix`: appended to the sink's URL (default "": the URL names the route).

Mapping: one Metric per distinct (name, unit, kind) in the order they first appear, its
points in input order; gauge -> Gauge; cumulative -> Sum (monotonic, CUMULATIVE); delta ->
Sum (not monotonic, DELTA). A point's attributes are the sample's metadata (`hostname` as
OTel's `host.name`, which wasmon's receiver maps back), plus `wasmon.resource` = the sample's
resource when it has one (OTLP points have no resource of their own). Its time is the
sample's timestamp, its value `as_double`. The scope is `wasmon` at wasmon's version.

The protobuf is written by hand (field numbers from opentelemetry-proto's metrics/v1,
common/v1, resource/v1 and collector/metrics/v1) in field-number order, making the choices
the Rust guest makes where proto3 leaves one (a point's time and an attribute's key are
written even when zero or empty; an empty resource is left out), so that both write the same
bytes (tests/all/polyglot/exporters.rs compares them); no protobuf library is needed inside
the component.
"""

import json
import struct

from wasmon_guest import CUMULATIVE, DELTA, ConfigError, Request, export_exporter

CONTENT_TYPE = "application/x-protobuf"
SCOPE_NAME = "wasmon"
# The Rust guest's crate version (the workspace's), which it writes as the scope's version.
SCOPE_VERSION = "0.1.0"
RESOURCE_KEY = "wasmon.resource"

# AggregationTemporality.
TEMPORALITY_DELTA = 1
TEMPORALITY_CUMULATIVE = 2

# Wire types.
VARINT, I64, LEN = 0, 1, 2


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1  # negative values as their two's complement, as protobuf has them
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def message(field, payload):
    """A length-delimited field (a message, a string, bytes), emitted even when empty."""
    return key(field, LEN) + varint(len(payload)) + payload


def string(field, text):
    """A proto3 string field: omitted when empty (the default)."""
    return message(field, text.encode("utf-8")) if text else b""


def key_value(k, v):
    """common.v1.KeyValue {key = 1; value = 2 (AnyValue {string_value = 1})}. `string_value`
    is a oneof member, so it is written even when empty; the key too (as the Rust guest)."""
    return message(1, k.encode("utf-8")) + message(2, message(1, v.encode("utf-8")))


def attribute_key(k):
    """OTel's name for the host: wasmon's receiver maps `host.name` back to `hostname`, the
    key its store sink reads."""
    return "host.name" if k == "hostname" else k


# The attributes of a point's metadata set and resource, by identity (a batch's samples share
# their metadata mappings): most points reuse an encoding already made.
class Attributes:
    def __init__(self):
        self.cache = {}

    def of(self, s):
        k = (id(s.metadata), s.resource)
        got = self.cache.get(k)
        if got is None:
            # NumberDataPoint.attributes = 7.
            parts = [message(7, key_value(attribute_key(a), b)) for a, b in s.metadata.items()]
            if s.resource:
                parts.append(message(7, key_value(RESOURCE_KEY, s.resource)))
            got = b"".join(parts)
            # Kept alive by the batch's samples while the cache is: ids are not reused.
            self.cache[k] = got
        return got


def number_point(s, attributes):
    """metrics.v1.NumberDataPoint: time_unix_nano = 3 (fixed64, written even when 0),
    as_double = 4 (double, a oneof member: always written), attributes = 7."""
    return (key(3, I64) + struct.pack("<Q", s.timestamp_ns & ((1 << 64) - 1))
            + key(4, I64) + struct.pack("<d", s.value) + attributes)


def metric(name, unit, kind, points):
    """metrics.v1.Metric: name = 1, unit = 3, gauge = 5 | sum = 7; Gauge and Sum hold
    data_points = 1; Sum also aggregation_temporality = 2 and is_monotonic = 3."""
    pts = b"".join(message(1, p) for p in points)
    if kind == CUMULATIVE:
        data = message(7, pts + key(2, VARINT) + varint(TEMPORALITY_CUMULATIVE)
                       + key(3, VARINT) + varint(1))
    elif kind == DELTA:
        # is_monotonic false: the proto3 default, omitted.
        data = message(7, pts + key(2, VARINT) + varint(TEMPORALITY_DELTA))
    else:
        data = message(5, pts)
    return message(1, name.encode("utf-8")) + string(3, unit) + data


KNOWN = ("resource", "suffix")


class Otlp:
    def __init__(self, params):
        for k in params:
            if k not in KNOWN:
                # A typo must not fall back to a default silently.
                raise ConfigError("unknown parameter `%s` (known: %s)" % (k, ", ".join(KNOWN)))
        resource = params.get("resource")
        if resource is None:
            resource = {}
        if not isinstance(resource, dict):
            raise ConfigError("parameter `resource`: expected an object of strings, got %s"
                              % json.dumps(resource))
        for k, v in resource.items():
            if not isinstance(v, str):
                raise ConfigError("parameter `resource.%s`: expected a string, got %s"
                                  % (k, json.dumps(v)))
        self.suffix = params.string("suffix", "")
        # resource.v1.Resource {attributes = 1}, in key order, written once: it is the same in
        # every request.
        res = b"".join(message(1, key_value(k, resource[k])) for k in sorted(resource))
        # ResourceMetrics.resource = 1: omitted when it has no attributes (an empty message).
        self.resource = message(1, res) if res else b""
        # ScopeMetrics.scope = 1: InstrumentationScope {name = 1, version = 2}.
        self.scope = message(1, string(1, SCOPE_NAME) + string(2, SCOPE_VERSION))

    def encode(self, samples):
        if not samples:
            return []  # nothing to send
        attrs = Attributes()
        # (name, unit, kind) -> encoded points, in first-appearance order (dicts keep it).
        metrics = {}
        for s in samples:
            points = metrics.get((s.name, s.unit, s.kind))
            if points is None:
                points = metrics[(s.name, s.unit, s.kind)] = []
            points.append(number_point(s, attrs.of(s)))
        # ScopeMetrics {scope = 1, metrics = 2}.
        scope_metrics = self.scope + b"".join(
            message(2, metric(name, unit, kind, points))
            for (name, unit, kind), points in metrics.items())
        # ResourceMetrics {resource = 1, scope_metrics = 2};
        # ExportMetricsServiceRequest {resource_metrics = 1}.
        body = message(1, self.resource + message(2, scope_metrics))
        return [Request(body, content_type=CONTENT_TYPE, suffix=self.suffix)]


Encode = export_exporter(Otlp)
