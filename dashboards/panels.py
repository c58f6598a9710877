"""Small builders for Grafana dashboard JSON (schema version 39, Grafana 10/11).

A dashboard is a list of rows; a row is a title plus panels; each panel states its queries,
unit and description. `Dashboard.to_json()` lays the panels out left to right (24 columns) and
numbers them. Adding a panel = adding one call in fleet.py or group.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DS = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39


@dataclass
class Query:
    expr: str
    legend: str = ""
    instant: bool = False        # tables and stats: one value per series
    fmt: str = "time_series"     # "table", "heatmap"


@dataclass
class Panel:
    type: str
    title: str
    description: str
    unit: str
    queries: list[Query]
    width: int = 12
    height: int = 8
    options: dict = field(default_factory=dict)
    custom: dict = field(default_factory=dict)          # fieldConfig.defaults.custom
    defaults: dict = field(default_factory=dict)        # other fieldConfig.defaults keys
    overrides: list = field(default_factory=list)
    transformations: list = field(default_factory=list)

    def to_json(self, panel_id: int, x: int, y: int) -> dict:
        targets = []
        for i, q in enumerate(self.queries):
            target: dict[str, Any] = {"datasource": DS, "refId": chr(ord("A") + i), "expr": q.expr,
                                      "legendFormat": q.legend or "__auto", "format": q.fmt}
            if q.instant:
                target.update(instant=True, range=False)
            else:
                target.update(instant=False, range=True)
            targets.append(target)
        doc: dict[str, Any] = {
            "id": panel_id, "type": self.type, "title": self.title, "description": self.description,
            "datasource": DS, "gridPos": {"h": self.height, "w": self.width, "x": x, "y": y},
            "targets": targets,
            "fieldConfig": {"defaults": {"unit": self.unit, **self.defaults,
                                         **({"custom": self.custom} if self.custom else {})},
                            "overrides": self.overrides},
            "options": self.options,
        }
        if self.transformations:
            doc["transformations"] = self.transformations
        return doc


def thresholds(*steps: tuple[float | None, str]) -> dict:
    return {"thresholds": {"mode": "absolute",
                           "steps": [{"color": color, "value": value} for value, color in steps]}}


LEGEND = {"displayMode": "table", "placement": "right", "showLegend": True, "calcs": ["max", "lastNotNull"]}
TOOLTIP = {"mode": "multi", "sort": "desc"}


def timeseries(title: str, description: str, unit: str, *queries: Query, width: int = 12,
               stacked: bool = False, bars: bool = False, threshold: float | None = None,
               min_zero: bool = True) -> Panel:
    custom: dict[str, Any] = {"drawStyle": "bars" if bars else "line", "lineWidth": 1,
                              "fillOpacity": 60 if bars else (30 if stacked else 10),
                              "showPoints": "never", "spanNulls": False,
                              "stacking": {"mode": "normal" if stacked else "none", "group": "A"}}
    defaults: dict[str, Any] = {}
    if min_zero:
        defaults["min"] = 0
    if threshold is not None:
        custom["thresholdsStyle"] = {"mode": "line+area"}
        defaults.update(thresholds((None, "transparent"), (threshold, "red")))
    return Panel("timeseries", title, description, unit, list(queries), width=width,
                 options={"legend": LEGEND, "tooltip": TOOLTIP}, custom=custom, defaults=defaults)


def stat(title: str, description: str, unit: str, query: Query, width: int = 4,
         steps: tuple = ((None, "green"),), mappings: list | None = None) -> Panel:
    query.instant = True
    defaults: dict[str, Any] = dict(thresholds(*steps))
    if mappings:
        defaults["mappings"] = mappings
    return Panel("stat", title, description, unit, [query], width=width, height=4,
                 options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                          "colorMode": "value", "graphMode": "none", "textMode": "auto",
                          "justifyMode": "auto", "orientation": "auto"},
                 defaults=defaults)


def table(title: str, description: str, unit: str, *queries: Query, width: int = 12,
          sort_by: str = "Value", hide: tuple = ("Time",), rename: dict | None = None,
          links: list | None = None, keep_above: float | None = None,
          steps: tuple = ((None, "green"),)) -> Panel:
    for q in queries:
        q.instant, q.fmt = True, "table"
    transformations: list[dict] = []
    if len(queries) > 1:
        transformations.append({"id": "merge", "options": {}})
    if keep_above is not None:
        transformations.append({"id": "filterByValue", "options": {
            "type": "include", "match": "any",
            "filters": [{"fieldName": "Value" if len(queries) == 1 else "Value #A",
                         "config": {"id": "greater", "options": {"value": keep_above}}}]}})
    transformations.append({"id": "organize", "options": {
        "excludeByName": dict.fromkeys(hide, True), "renameByName": rename or {}}})
    defaults: dict[str, Any] = dict(thresholds(*steps))
    defaults["custom"] = {"align": "auto", "cellOptions": {"type": "color-text"}}
    if links:
        defaults["links"] = links
    return Panel("table", title, description, unit, list(queries), width=width,
                 options={"showHeader": True, "cellHeight": "sm",
                          "sortBy": [{"displayName": sort_by, "desc": True}],
                          "footer": {"show": False, "reducer": ["sum"], "fields": ""}},
                 defaults=defaults, transformations=transformations)


def heatmap(title: str, description: str, expr: str, width: int = 12) -> Panel:
    return Panel("heatmap", title, description, "s", [Query(expr, legend="{{le}}", fmt="heatmap")],
                 width=width,
                 options={"calculate": False, "cellGap": 1, "yAxis": {"axisPlacement": "left", "unit": "s"},
                          "rowsFrame": {"layout": "auto"},
                          "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64, "exponent": 0.5,
                                    "fill": "dark-orange", "reverse": False},
                          "tooltip": {"mode": "single", "yHistogram": True, "showColorScale": False},
                          "legend": {"show": True}},
                 custom={"hideFrom": {"legend": False, "tooltip": False, "viz": False},
                         "scaleDistribution": {"type": "linear"}})


def state_timeline(title: str, description: str, query: Query, mappings: list, width: int = 24) -> Panel:
    return Panel("state-timeline", title, description, "none", [query], width=width,
                 options={"mergeValues": True, "showValue": "auto", "alignValue": "left",
                          "rowHeight": 0.8, "legend": {"displayMode": "list", "placement": "bottom",
                                                       "showLegend": True},
                          "tooltip": {"mode": "single", "sort": "none"}},
                 custom={"fillOpacity": 80, "lineWidth": 0},
                 defaults={"mappings": mappings, "color": {"mode": "thresholds"},
                           **thresholds((None, "transparent"))})


def value_mappings(texts: dict[int, tuple[str, str]]) -> list:
    return [{"type": "value", "options": {str(value): {"text": text, "color": color, "index": i}
                                          for i, (value, (text, color)) in enumerate(sorted(texts.items()))}}]


@dataclass
class Row:
    title: str
    panels: list[Panel]


@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    variables: list[dict]
    rows: list[Row]
    tags: tuple = ("kafka", "rebalance-monitor")
    links: list = field(default_factory=list)
    # Prometheus annotations drawn on every time series panel (e.g. the group's rebalances)
    annotations: list = field(default_factory=list)

    def to_json(self) -> dict:
        panels: list[dict] = []
        next_id, y = 1, 0
        for row in self.rows:
            panels.append({"id": next_id, "type": "row", "title": row.title, "collapsed": False,
                           "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
            next_id += 1
            y += 1
            x, line_height = 0, 0
            for panel in row.panels:
                if x + panel.width > 24:
                    x, y = 0, y + line_height
                    line_height = 0
                panels.append(panel.to_json(next_id, x, y))
                next_id += 1
                x += panel.width
                line_height = max(line_height, panel.height)
            y += line_height
        return {
            "uid": self.uid, "title": self.title, "description": self.description,
            "tags": list(self.tags), "editable": True, "graphTooltip": 1, "timezone": "browser",
            "schemaVersion": SCHEMA_VERSION, "version": 1, "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"}, "timepicker": {}, "fiscalYearStartMonth": 0,
            "liveNow": False, "weekStart": "",
            "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                      "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                      "name": "Annotations & Alerts", "type": "dashboard"},
                                     *self.annotations]},
            "links": self.links,
            "templating": {"list": self.variables},
            "panels": panels,
        }


def prometheus_annotation(name: str, expr: str, title: str, color: str) -> dict:
    """An annotation at each step where `expr` has a sample (Grafana's Prometheus annotations)."""
    return {"name": name, "enable": True, "hide": False, "iconColor": color,
            "datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": expr, "step": "30s",
            "titleFormat": title, "tagKeys": "group", "textFormat": "", "useValueForTime": False}


def datasource_variable() -> dict:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [],
            "refresh": 1, "regex": "", "skipUrlSync": False}


def query_variable(name: str, label: str, query: str, multi: bool = True) -> dict:
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "definition": query,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "current": {}, "hide": 0, "includeAll": multi, "multi": multi,
            "allValue": ".*" if multi else None, "options": [], "refresh": 2, "regex": "",
            "skipUrlSync": False, "sort": 1}


def constant_variable(name: str, label: str, value: str, description: str) -> dict:
    """A hidden constant, e.g. a window shared with an alert rule; editable in the settings."""
    return {"name": name, "label": label, "type": "constant", "query": value, "hide": 2,
            "description": description, "skipUrlSync": False,
            "current": {"selected": False, "text": value, "value": value},
            "options": [{"selected": True, "text": value, "value": value}]}
