"""`zscore`: flags anomalies by z-score over a sliding window, per series (name, resource).

Each sample's value is compared with the mean and standard deviation of the `window` values
before it in its series; once the window holds `min_samples` values and the deviation is not
zero, a sample `threshold` or more deviations away is flagged: its metadata gains
`anomaly = "true"` and `zscore` (two decimals). Every sample is passed on unless
`only_anomalies` is set. Parameters::

    {"window": 30, "threshold": 3.0, "min_samples": 5, "only_anomalies": false}
"""

import math
from collections import deque

from wasmon_guest import export_transformer


class ZScore:
    def __init__(self, params):
        self.window = params.integer("window", 30, min=2, max=100000)
        self.threshold = params.number("threshold", 3.0, min=0.0)
        self.min_samples = params.integer("min_samples", min(5, self.window), min=2,
                                          max=self.window)
        self.only_anomalies = params.boolean("only_anomalies", False)
        # (name, resource) -> (values, sum, sum of squares)
        self.series = {}

    def handle(self, samples):
        out = []
        for s in samples:
            key = (s.name, s.resource)
            st = self.series.get(key)
            if st is None:
                st = self.series[key] = [deque(), 0.0, 0.0]
            values, total, squares = st
            n = len(values)
            flagged = False
            if n >= self.min_samples:
                mean = total / n
                var = max(squares / n - mean * mean, 0.0)
                std = math.sqrt(var)
                if std > 0:
                    z = (s.value - mean) / std
                    if abs(z) >= self.threshold:
                        flagged = True
                        s.metadata = {**s.metadata, "anomaly": "true", "zscore": "%.2f" % z}
            values.append(s.value)
            total += s.value
            squares += s.value * s.value
            if len(values) > self.window:
                old = values.popleft()
                total -= old
                squares -= old * old
            st[1], st[2] = total, squares
            if flagged or not self.only_anomalies:
                out.append(s)
        return out


Transform = export_transformer(ZScore)
