"""The roof domain: what a launch is judged against, as data and pure functions.

``metricset`` (metrics/hierarchical.toml: formulas, roofs, clocks, pipes, what to collect), ``catalog``
(metrics/gpus.toml: GPUs and their datasheet peaks), ``rates`` (metrics/rates.toml: dense rates per SM per
cycle), ``formulas`` (raw metrics to SI quantities), ``report`` (a report's own roofs), ``ceilings`` (the roofs of
each launch of a run: report, datasheet at the clock, or measured).
"""
