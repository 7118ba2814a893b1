"""Unit tests of the Python SDK's codec, parameters and namespace tree (run natively by
`cargo test`, tests/all/polyglot.rs: `python3 -m unittest`)."""

import contextlib
import sys
import unittest
from types import SimpleNamespace

from wasmon_guest import (CUMULATIVE, DELTA, GAUGE, Codec, ConfigError, Kind, Metric, NonLeaf,
                          Params, Pmid, Request, Sample, Tree, UnknownName, UnknownPmid, rfc3339,
                          sample_json)


@contextlib.contextmanager
def stand_ins(mods):
    """`mods` in sys.modules (the modules componentize-py generates, stood in for) while the
    block runs; what was there before afterwards."""
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def batch(new_strings, metadata, ids, kinds, values, ts, reset=False):
    return SimpleNamespace(reset=reset, new_strings=new_strings, metadata=metadata, ids=ids,
                           kinds=bytes(kinds), values=values, timestamps_ns=ts)


class CodecTest(unittest.TestCase):
    def test_decode_then_encode_sends_no_string_twice(self):
        c = Codec()
        b = batch(["cpu", "h1", "", "k", "v"], [[], [(3, 4)]],
                  [0, 1, 2, 0, 0, 1, 2, 1], [GAUGE, CUMULATIVE], [1.5, 2.5], [10, 20])
        s = c.decode(b)
        self.assertEqual(len(s), 2)
        self.assertEqual((s[0].name, s[0].resource, s[0].unit), ("cpu", "h1", ""))
        self.assertEqual(s[1].kind, CUMULATIVE)
        self.assertEqual(dict(s[1].metadata), {"k": "v"})
        self.assertEqual(s[1].timestamp_ns, 20)
        out = c.encode(s)
        self.assertEqual(out["new_strings"], [])
        self.assertEqual(out["ids"], [0, 1, 2, 0, 0, 1, 2, 1])
        self.assertEqual(out["metadata"], [[], [(3, 4)]])
        self.assertEqual(out["kinds"], bytes([GAUGE, CUMULATIVE]))
        self.assertFalse(out["reset"])

    def test_new_strings_are_appended_once_and_reset_clears(self):
        c = Codec()
        c.decode(batch(["cpu"], [[]], [], [], [], []))
        out = c.encode([Sample("cpu.busy", "cpu", 1.0), Sample("cpu.busy", "h2", 2.0)])
        self.assertEqual(out["new_strings"], ["cpu.busy", "", "h2"])
        self.assertEqual(out["ids"], [1, 0, 2, 0, 1, 3, 2, 0])
        # Already known now: nothing new.
        self.assertEqual(c.encode([Sample("cpu.busy", "h2", 0)])["new_strings"], [])
        s = c.decode(batch(["mem"], [[]], [0, 0, 0, 0], [DELTA], [3.0], [5], reset=True))
        self.assertEqual((s[0].name, s[0].kind), ("mem", DELTA))
        out = c.encode([Sample("cpu.busy", "mem", 1.0)])
        self.assertEqual(out["new_strings"], ["cpu.busy", ""])
        self.assertEqual(out["ids"][:2], [1, 0])

    def test_metadata_sets_are_shared_and_new_ones_encoded(self):
        c = Codec()
        s = c.decode(batch(["a", "k", "v"], [[(1, 2)]], [0, 0, 0, 0] * 2, [0, 0], [1, 2],
                           [0, 0]))
        self.assertIs(s[0].metadata, s[1].metadata)
        with self.assertRaises(TypeError):
            s[0].metadata["x"] = "y"  # read-only: shared
        s[1].metadata = {**s[1].metadata, "anomaly": "true"}
        out = c.encode(s)
        self.assertEqual(out["metadata"], [[(1, 2)], [(1, 2), (3, 4)]])
        self.assertEqual(out["new_strings"], ["anomaly", "true"])
        self.assertEqual(out["ids"][3::4], [0, 1])

    def test_unknown_ids_and_kinds_read_as_empty_and_gauge(self):
        s = Codec().decode(batch([], [], [9, 9, 9, 9], [7], [1.0], [0]))
        self.assertEqual((s[0].name, s[0].kind, dict(s[0].metadata)), ("", GAUGE, {}))

    def test_bad_output_is_an_error(self):
        with self.assertRaises(ValueError):
            Codec().encode([Sample("a", "b", 1.0, kind=9)])
        with self.assertRaises(TypeError):
            Codec().encode([Sample(3, "b", 1.0)])


class ParamsTest(unittest.TestCase):
    def test_typed_getters_name_the_parameter(self):
        p = Params.parse('{"factor": 0.5, "prefix": "disk.", "window": 10, "on": true, "n": null}')
        self.assertEqual(p.number("factor", 1.0), 0.5)
        self.assertEqual(p.number("missing", 2.0), 2.0)
        self.assertEqual(p.number("n", 3.0), 3.0)
        self.assertEqual(p.string("prefix"), "disk.")
        self.assertEqual(p.integer("window", min=2), 10)
        self.assertTrue(p.boolean("on"))
        with self.assertRaisesRegex(ConfigError, r"`prefix` must be a number, got \"disk.\""):
            p.number("prefix")
        with self.assertRaisesRegex(ConfigError, "`window` must be at least 20"):
            p.integer("window", min=20)
        with self.assertRaisesRegex(ConfigError, "`absent` is required"):
            p.string("absent")
        with self.assertRaisesRegex(ConfigError, "`on` must be a number"):
            p.number("on")

    def test_documents(self):
        self.assertEqual(Params.parse(""), {})
        self.assertEqual(Params.parse("null"), {})
        with self.assertRaisesRegex(ConfigError, "must be an object"):
            Params.parse("[1]")
        with self.assertRaisesRegex(ConfigError, "not valid JSON"):
            Params.parse("{")

    def test_kind_names(self):
        self.assertEqual(Kind.parse("cumulative"), CUMULATIVE)
        with self.assertRaises(ValueError):
            Kind.parse("counter")


class TreeTest(unittest.TestCase):
    def setUp(self):
        self.t = Tree("a.b", {
            "a.b.x": Metric((9, 0, 1), "counter"),
            "a.b.y.z": Metric((9, 0, 2)),
        })

    def test_lookups(self):
        self.assertEqual(self.t.lookup_name("a.b.x"), Pmid(9, 0, 1))
        with self.assertRaises(NonLeaf):
            self.t.lookup_name("a.b.y")
        with self.assertRaises(UnknownName):
            self.t.lookup_name("a.b.q")
        self.assertEqual(self.t.names_of((9, 0, 2)), ["a.b.y.z"])
        with self.assertRaises(UnknownPmid):
            self.t.names_of((9, 9, 9))
        self.assertEqual(self.t.describe((9, 0, 1)).semantics, "counter")

    def test_children(self):
        self.assertEqual(self.t.children("a.b"), [("x", True), ("y", False)])
        self.assertEqual(self.t.children("a.b.y"), [("z", True)])
        with self.assertRaises(UnknownName):
            self.t.children("a.c")

    def test_values_take_the_metric_type(self):
        from wasmon_guest import _values
        big = 2**60 + 1
        self.assertEqual(_values(big, "uint64"), [("", big)])
        self.assertEqual(_values(2.6, "int32"), [("", 3)])
        self.assertEqual(_values([("cpu0", 1)], "double"), [("cpu0", 1.0)])
        self.assertIsInstance(_values(1, "double")[0][1], float)
        self.assertEqual(_values("idle", "text"), [("", "idle")])
        with self.assertRaises(ValueError):
            Metric((1, 0, 0), type="int")

    def test_columns_take_the_metric_type(self):
        from wasmon_guest import _column
        # The WIT constructors componentize-py generates, as tagged tuples.
        t = SimpleNamespace(**{
            name: (lambda name: lambda v: (name, v))(name)
            for name in ("Column_Int", "Column_Uint", "Column_Real", "Column_Atoms", "Atom_Text")})
        self.assertEqual(_column(t, "uint64", [2**64, 5, -1]), ("Column_Uint", [2**64 - 1, 5, 0]))
        self.assertEqual(_column(t, "int32", [-2**70, 3]), ("Column_Int", [-2**63, 3]))
        self.assertEqual(_column(t, "double", [0.5]), ("Column_Real", [0.5]))
        self.assertEqual(_column(t, "text", ["idle"]), ("Column_Atoms", [("Atom_Text", "idle")]))

    def test_metrics_outside_the_root_are_refused(self):
        with self.assertRaises(ValueError):
            Tree("a.b", {"a.c": Metric((1, 0, 0))})


class ExporterTest(unittest.TestCase):
    def test_rfc3339_writes_only_the_fraction_digits_needed(self):
        self.assertEqual(rfc3339(1_704_067_200_000_000_000), "2024-01-01T00:00:00Z")
        self.assertEqual(rfc3339(1_704_067_200_500_000_000), "2024-01-01T00:00:00.500Z")
        self.assertEqual(rfc3339(1_704_067_200_000_001_000), "2024-01-01T00:00:00.000001Z")
        self.assertEqual(rfc3339(1_704_067_200_123_456_789), "2024-01-01T00:00:00.123456789Z")
        self.assertEqual(rfc3339(-1), "1969-12-31T23:59:59.999999999Z")

    def test_sample_json_is_wasmons_shape(self):
        s = Sample("disk.used", "h1", 1.5, 1_704_067_200_000_000_001, CUMULATIVE, "B",
                   {"dev": "sda", "note": "é"})
        self.assertEqual(sample_json(s),
                         '{"name":"disk.used","resource":"h1","value":1.5,"unit":"B",'
                         '"type":"cumulative","timestamp":"2024-01-01T00:00:00.000000001Z",'
                         '"metadata":{"dev":"sda","note":"é"}}')
        self.assertIn('"value":"NaN"', sample_json(Sample("a", "", float("nan"))))
        self.assertIn('"value":"-inf"', sample_json(Sample("a", "", float("-inf"))))

    def test_request_fields_are_checked_and_text_bodies_encoded(self):
        r = Request("é\n", content_type="application/x-ndjson", headers=[("X-Key", "k")])
        self.assertEqual(r.fields(), ("", "application/x-ndjson", [("X-Key", "k")],
                                      "é\n".encode()))
        self.assertEqual(Request(bytearray(b"ab"), suffix="/v1").fields()[::3], ("/v1", b"ab"))
        with self.assertRaisesRegex(TypeError, "Request.body"):
            Request(3).fields()
        with self.assertRaisesRegex(TypeError, "Request.headers"):
            Request(b"", headers=[("a",)]).fields()
        with self.assertRaisesRegex(TypeError, "Request.content_type"):
            Request(b"", content_type=None).fields()

    def test_export_exporter_with_stand_ins_for_the_bindings(self):
        # The modules componentize-py generates, stood in for: a record and the Err exception.
        import types as pytypes
        from collections import namedtuple

        from wasmon_guest import EncodeError, export_exporter

        class Err(Exception):
            def __init__(self, value):
                self.value = value

        mods = {
            "componentize_py_types": pytypes.SimpleNamespace(Err=Err),
            "wit_world": pytypes.ModuleType("wit_world"),
            "wit_world.exports": pytypes.ModuleType("wit_world.exports"),
            "wit_world.exports.encode": pytypes.SimpleNamespace(Request=namedtuple(
                "Request", "suffix content_type headers body")),
        }
        with stand_ins(mods):
            class Names:
                def __init__(self, params):
                    self.suffix = params.string("suffix")

                def encode(self, samples):
                    if any(s.name == "bad" for s in samples):
                        raise EncodeError("cannot encode `bad`")
                    return [Request(",".join(s.name for s in samples), suffix=self.suffix)]

            enc = export_exporter(Names)()
            with self.assertRaises(RuntimeError):  # a trap: the host retries
                enc.encode(batch([], [], [], [], [], []))
            with self.assertRaises(Err) as e:
                enc.configure("{}")
            self.assertEqual(e.exception.value, "`suffix` is required (a string)")
            enc.configure('{"suffix": "/x"}')
            got = enc.encode(batch(["cpu", "h", ""], [[]], [0, 1, 2, 0] * 2, [0, 0], [1, 2],
                                   [1, 2]))
            self.assertEqual([tuple(r) for r in got],
                             [("/x", "application/octet-stream", [], b"cpu,cpu")])
            with self.assertRaises(Err) as e:
                enc.encode(batch(["bad"], [[]], [3, 1, 2, 0], [0], [1], [1]))
            self.assertEqual(e.exception.value, "cannot encode `bad`")


class FilesTest(unittest.TestCase):
    def test_read_file_through_files_and_open(self):
        # Natively: open(), bounded by `max`.
        import os
        import tempfile
        import types as pytypes

        from wasmon_guest import read_file

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "count")
            with open(path, "wb") as f:
                f.write(b"42\n")
            self.assertEqual(read_file(path, 64), b"42\n")
            self.assertIsNone(read_file(path, 2), "larger than max")
            self.assertIsNone(read_file(os.path.join(d, "absent"), 64))

            # In a component: the `files` import, and open() where it answers `elsewhere`.
            class Err(Exception):
                def __init__(self, value):
                    self.value = value

            class FileError:
                ACCESS, ELSEWHERE = "access", "elsewhere"

            asked = []

            def files_read(p, m):
                asked.append((p, m))
                if p == "/granted":
                    return b"7\n"
                raise Err(FileError.ELSEWHERE if p == path else FileError.ACCESS)

            imports = pytypes.ModuleType("wit_world.imports")
            imports.files = pytypes.SimpleNamespace(read_file=files_read, FileError=FileError)
            mods = {
                "componentize_py_types": pytypes.SimpleNamespace(Err=Err),
                "wit_world": pytypes.ModuleType("wit_world"),
                "wit_world.imports": imports,
            }
            with stand_ins(mods):
                self.assertEqual(read_file("/granted", 64), b"7\n")
                self.assertEqual(read_file(path, 64), b"42\n", "elsewhere: open()")
                self.assertIsNone(read_file("/sys/../secret", 64), "access: no value")
                self.assertEqual(asked, [("/granted", 64), (path, 64), ("/sys/../secret", 64)])


if __name__ == "__main__":
    unittest.main()
