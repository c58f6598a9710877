"""Broker log4j configurations that write `server.log` like a real installation.

The default layout is Kafka's own (`config/log4j.properties` up to 3.x,
`config/log4j2.yaml` in 4.x): `[%d] %p %m (%c)%n`, root at INFO to stdout and server.log,
`kafka` / `org.apache.kafka` at INFO, the controller, state-change, request, cleaner and
authorizer loggers in their own files. The coordinator loggers are named explicitly at INFO.
The 4.x file is written as XML (same appenders and loggers as Kafka's YAML; XML needs no
Jackson-YAML on the classpath).

LAYOUTS maps a name to the layout per log4j family, so other layouts (Strimzi, JSON, ...)
are one entry each. `None` means the layout is not available for that family.
"""
from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import quoteattr

LAYOUTS: dict[str, dict[str, str | None]] = {
    # Kafka's default (all versions).
    "default": {"log4j1": "[%d] %p %m (%c)%n", "log4j2": "[%d] %p %m (%c)%n"},
    # Strimzi's Kafka 4.x image (log4j2 pattern; log4j1 accepts the same conversion characters).
    "strimzi4": {"log4j1": "%d{yyyy-MM-dd HH:mm:ss} %-5p [%t] %c{1}:%L - %m%n",
                 "log4j2": "%d{yyyy-MM-dd HH:mm:ss} %-5p [%t] %c{1}:%L - %m%n"},
    # Strimzi's Kafka 3.x pattern (log4j 1.x / reload4j; log4j2's ISO8601 writes a `T`).
    "strimzi3": {"log4j1": "%d{ISO8601} %p %m (%c) [%t]%n", "log4j2": "%d{ISO8601} %p %m (%c) [%t]%n"},
    # Kafka's default with a padded level (`%-5p`) and with the location (Kafka's own test log4j).
    "padded": {"log4j1": "[%d] %-5p %m (%c)%n", "log4j2": "[%d] %-5p %m (%c)%n"},
    "location": {"log4j1": "[%d] %p %m (%c:%L)%n", "log4j2": "[%d] %p %m (%c:%L)%n"},
    # `|`-separated columns with the source file and line, as vendor distributions write them.
    "pipe": {"log4j1": "%d{yyyy-MM-dd HH:mm:ss,SSS} | %-5p | [%t] | %m | %c (%F:%L)%n",
             "log4j2": "%d{yyyy-MM-dd HH:mm:ss,SSS} | %-5p | [%t] | %m | %c (%F:%L)%n"},
    # Confluent for Kubernetes' shape (`{broker}` is the node id).
    "cfk": {"log4j1": "[%p] %d{yyyy-MM-dd HH:mm:ss,SSS} [%t] %c %M - app=kafka, clusterId=kafkabed, "
                      "server={broker} - %m%n",
            "log4j2": "[%p] %d{yyyy-MM-dd HH:mm:ss,SSS} [%t] %c %M - app=kafka, clusterId=kafkabed, "
                      "server={broker} - %m%n"},
    # One ECS JSON document per line (log4j-layout-template-json's bundled EcsLayout.json).
    "json": {"log4j1": None, "log4j2": "json:classpath:EcsLayout.json"},
    # log4j2's JsonLayout (Jackson, which the 4.x broker ships): `instant`, `level`, `loggerName`, `message`.
    "jsonlayout": {"log4j1": None, "log4j2": "jsonlayout:"},
}

COORDINATOR_LOGGERS = ["kafka.coordinator.group", "org.apache.kafka.coordinator.group"]
# logger -> own appender (additivity false), as in Kafka's shipped configuration.
_SIDE_FILES = {
    "kafka.request.logger": ("kafka-request.log", "WARN"),
    "kafka.network.RequestChannel$": ("kafka-request.log", "WARN"),
    "kafka.controller": ("controller.log", "TRACE"),
    "org.apache.kafka.controller": ("controller.log", "INFO"),
    "kafka.log.LogCleaner": ("log-cleaner.log", "INFO"),
    "org.apache.kafka.storage.internals.log.LogCleaner": ("log-cleaner.log", "INFO"),
    "state.change.logger": ("state-change.log", "INFO"),
    "kafka.authorizer.logger": ("kafka-authorizer.log", "INFO"),
}


class LayoutError(ValueError):
    """A layout name that does not exist or has no form for this log4j family."""


def layout_for(name: str, family: str, broker: int = 0) -> str:
    if name not in LAYOUTS:
        raise LayoutError(f"unknown log layout {name!r}; known: {', '.join(LAYOUTS)}")
    value = LAYOUTS[name].get(family)
    if value is None:
        raise LayoutError(f"log layout {name!r} is not available with {family}")
    return value.replace("{broker}", str(broker))


def layouts_of(family: str) -> list[str]:
    """The layouts a log4j family can write."""
    return [name for name, forms in LAYOUTS.items() if forms.get(family) is not None]


def extra_log_name(layout: str) -> str:
    """The file an extra appender writes the same lines to in another layout."""
    return f"server-{layout}.log"


def write_log4j1(path: Path, log_dir: Path, layout: str = "default",
                 rotate_bytes: int | None = None, extra_layouts: tuple[str, ...] = (), broker: int = 0) -> Path:
    """log4j 1.x / reload4j properties (Kafka 2.x/3.x). `rotate_bytes` switches server.log from
    hourly to size-based rolling (to exercise the shipper's rotation handling). `extra_layouts`:
    more files (extra_log_name) with every line server.log gets, each in another layout."""
    pattern = layout_for(layout, "log4j1", broker)
    extra = {f"extra{i}": name for i, name in enumerate(extra_layouts)}
    lines = ["log4j.rootLogger=" + ", ".join(["INFO", "stdout", "kafkaAppender", *extra]),
             "log4j.appender.stdout=org.apache.log4j.ConsoleAppender",
             "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout",
             f"log4j.appender.stdout.layout.ConversionPattern={pattern}"]

    def appender(name: str, filename: str, rolling: int | None, conversion: str = pattern) -> None:
        if rolling:
            lines.extend([f"log4j.appender.{name}=org.apache.log4j.RollingFileAppender",
                          f"log4j.appender.{name}.MaxFileSize={rolling}",
                          f"log4j.appender.{name}.MaxBackupIndex=20"])
        else:
            lines.extend([f"log4j.appender.{name}=org.apache.log4j.DailyRollingFileAppender",
                          f"log4j.appender.{name}.DatePattern='.'yyyy-MM-dd-HH"])
        lines.extend([f"log4j.appender.{name}.File={log_dir / filename}",
                      f"log4j.appender.{name}.layout=org.apache.log4j.PatternLayout",
                      f"log4j.appender.{name}.layout.ConversionPattern={conversion}"])
    appender("kafkaAppender", "server.log", rotate_bytes)
    for name, extra_layout in extra.items():
        appender(name, extra_log_name(extra_layout), None, layout_for(extra_layout, "log4j1", broker))
    lines += ["log4j.logger.kafka=INFO", "log4j.logger.org.apache.kafka=INFO",
              "log4j.logger.org.apache.zookeeper=INFO"]
    lines += [f"log4j.logger.{name}=INFO" for name in COORDINATOR_LOGGERS]
    files: dict[str, str] = {}    # side file -> its appender's name
    for logger, (filename, level) in _SIDE_FILES.items():
        name = files.setdefault(filename, f"side{len(files)}")
        lines += [f"log4j.logger.{logger}={level}, {name}", f"log4j.additivity.{logger}=false"]
    for filename, name in files.items():
        appender(name, filename, None)
    path.write_text("\n".join(lines) + "\n")
    return path


def _layout_xml(spec: str) -> str:
    if spec.startswith("json:"):
        return f"<JsonTemplateLayout eventTemplateUri={quoteattr(spec[5:])}/>"
    if spec.startswith("jsonlayout:"):
        return "<JsonLayout compact=\"true\" eventEol=\"true\" properties=\"false\"/>"
    return f"<PatternLayout pattern={quoteattr(spec)}/>"


def write_log4j2(path: Path, log_dir: Path, layout: str = "default",
                 rotate_bytes: int | None = None, extra_layouts: tuple[str, ...] = (), broker: int = 0) -> Path:
    """log4j2 XML (Kafka 4.x); the broker reads it from -Dlog4j2.configurationFile. `extra_layouts`:
    more files (extra_log_name) with every line server.log gets, each in another layout."""
    layout_xml = _layout_xml(layout_for(layout, "log4j2", broker))

    def rolling(name: str, filename: str, size: int | None, xml: str = layout_xml) -> str:
        policy = (f"<SizeBasedTriggeringPolicy size=\"{size}\"/>" if size
                  else "<TimeBasedTriggeringPolicy modulate=\"true\" interval=\"1\"/>")
        pattern = f"{filename}.%i" if size else f"{filename}.%d{{yyyy-MM-dd-HH}}"
        strategy = "<DefaultRolloverStrategy max=\"20\"/>" if size else ""
        return (f"<RollingFile name=\"{name}\" fileName={quoteattr(str(log_dir / filename))} "
                f"filePattern={quoteattr(str(log_dir / pattern))}>{xml}{policy}{strategy}</RollingFile>")
    appenders = [f"<Console name=\"STDOUT\">{layout_xml}</Console>",
                 rolling("KafkaAppender", "server.log", rotate_bytes)]
    extra = {f"Extra{i}": name for i, name in enumerate(extra_layouts)}
    for name, extra_layout in extra.items():
        appenders.append(rolling(name, extra_log_name(extra_layout), None,
                                 _layout_xml(layout_for(extra_layout, "log4j2", broker))))
    names: dict[str, str] = {}
    loggers = ["<Logger name=\"kafka\" level=\"INFO\"/>", "<Logger name=\"org.apache.kafka\" level=\"INFO\"/>"]
    loggers += [f"<Logger name=\"{n}\" level=\"INFO\"/>" for n in COORDINATOR_LOGGERS]
    for logger, (filename, level) in _SIDE_FILES.items():
        if filename not in names:
            names[filename] = f"Side{len(names)}"
            appenders.append(rolling(names[filename], filename, None))
        loggers.append(f"<Logger name={quoteattr(logger)} level=\"{level}\" additivity=\"false\">"
                       f"<AppenderRef ref=\"{names[filename]}\"/></Logger>")
    xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Configuration status=\"WARN\">\n<Appenders>\n"
           + "\n".join(appenders) + "\n</Appenders>\n<Loggers>\n<Root level=\"INFO\"><AppenderRef ref=\"STDOUT\"/>"
           "<AppenderRef ref=\"KafkaAppender\"/>" + "".join(f"<AppenderRef ref=\"{n}\"/>" for n in extra)
           + "</Root>\n" + "\n".join(loggers) + "\n</Loggers>\n</Configuration>\n")
    path.write_text(xml)
    return path


def write_config(family: str, conf_dir: Path, log_dir: Path, layout: str = "default",
                 rotate_bytes: int | None = None, extra_layouts: tuple[str, ...] = (),
                 broker: int = 0) -> tuple[Path, str]:
    """Writes the configuration file; returns (path, JVM system property that points at it)."""
    if family == "log4j2":
        path = write_log4j2(conf_dir / "log4j2.xml", log_dir, layout, rotate_bytes, extra_layouts, broker)
        return path, f"-Dlog4j2.configurationFile={path}"
    path = write_log4j1(conf_dir / "log4j.properties", log_dir, layout, rotate_bytes, extra_layouts, broker)
    return path, f"-Dlog4j.configuration=file:{path}"
