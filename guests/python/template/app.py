"""The `template` scale transformer in Python: multiplies every sample whose name starts with
`prefix` by `factor` and may give it a new `unit` (the Rust `guests/template`, same output)."""

from wasmon_guest import export_transformer


class Scale:
    def __init__(self, params):
        self.factor = params.number("factor", 1.0)
        self.prefix = params.string("prefix", "")
        self.unit = params.string("unit", None)

    def handle(self, samples):
        for s in samples:
            if s.name.startswith(self.prefix):
                s.value *= self.factor
                if self.unit is not None:
                    s.unit = self.unit
        return samples


Transform = export_transformer(Scale)
