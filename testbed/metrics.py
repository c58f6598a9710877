"""/metrics pages as the bed, the judge and the benches read them: one parser, prometheus_client's
own (`text_string_to_metric_families`), and `Samples`, the page's series keyed by sample name
(`rebalance_monitor_rebalances_total`, `..._bucket`, `..._count`) and sorted label pairs.

    page = parse(monitor.scrape())
    page.value("rebalance_monitor_batches_total")                          # one series, or None
    page.value("rebalance_monitor_input_records_total", source="offsets")
    page.total("rebalance_monitor_rebalances_total", group="g", trigger="member_join")   # a sum
    page.series("rebalance_monitor_group_state", group="g")                # [(labels, value), ...]
"""
from __future__ import annotations

from collections.abc import Callable, Collection

from prometheus_client.parser import text_string_to_metric_families

PREFIX = "rebalance_monitor_"
Labels = tuple[tuple[str, str], ...]


class Samples(dict[tuple[str, Labels], float]):
    """{(sample name, sorted (label, value) pairs): value} of one page."""

    def value(self, name: str, **labels: str) -> float | None:
        """The series of `name` with exactly these labels (None when the page has none)."""
        return self.get((name, tuple(sorted(labels.items()))))

    def series(self, name: str, **match: str) -> list[tuple[dict[str, str], float]]:
        """Every series of `name` whose labels include `match`, as (labels, value)."""
        out = []
        for (sample, labels), value in self.items():
            if sample == name:
                d = dict(labels)
                if all(d.get(k) == v for k, v in match.items()):
                    out.append((d, value))
        return out

    def total(self, name: str, **match: str) -> float:
        """The sum of the series of `name` whose labels include `match` (0.0 when none)."""
        return sum(value for _, value in self.series(name, **match))

    def where(self, keep: Callable[[str, dict[str, str]], bool]) -> Samples:
        """The series for which keep(sample name, labels) is true."""
        return Samples({key: value for key, value in self.items() if keep(key[0], dict(key[1]))})


def parse(page: str, prefix: str = PREFIX, names: Collection[str] | None = None) -> Samples:
    """The series of an exposition page whose sample names start with `prefix` (the monitor's own;
    "" for all). `names`: only these sample names; the page's other lines are left out before
    parsing (a scraper that polls a whole page several times a second parses a few lines of it;
    /metrics?name[]=... filters on the server instead, group gauges included since a1e886b)."""
    if names is not None:
        wanted = set(names)
        page = "\n".join(line for line in page.splitlines()
                         if line[:1] != "#" and line.split("{", 1)[0].split(" ", 1)[0] in wanted)
    out = Samples()
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name.startswith(prefix):
                out[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return out


def family_names(page: str) -> set[str]:
    """The families a page declares, with or without samples, as prometheus_client names them (a
    counter without its `_total`)."""
    return {family.name for family in text_string_to_metric_families(page)}
