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
    # One ECS JSON document per line (log4j-layout-template-json's bundled EcsLayout.json).
    "json": {"log4j1": None, "log4j2": "json:classpath:EcsLayout.json"},
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


def layout_for(name: str, family: str) -> str:
    if name not in LAYOUTS:
        raise LayoutError(f"unknown log layout {name!r}; known: {', '.join(LAYOUTS)}")
    value = LAYOUTS[name].get(family)
    if value is None:
        raise LayoutError(f"log layout {name!r} is not available with {family}")
    return value


def write_log4j1(path: Path, log_dir: Path, layout: str = "default",
                 rotate_bytes: int | None = None) -> Path:
    """log4j 1.x / reload4j properties (Kafka 2.x/3.x). `rotate_bytes` switches server.log from
    hourly to size-based rolling (to exercise the shipper's rotation handling)."""
    pattern = layout_for(layout, "log4j1")
    lines = ["log4j.rootLogger=INFO, stdout, kafkaAppender",
             "log4j.appender.stdout=org.apache.log4j.ConsoleAppender",
             "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout",
             f"log4j.appender.stdout.layout.ConversionPattern={pattern}"]

    def appender(name: str, filename: str, rolling: int | None) -> None:
        if rolling:
            lines.extend([f"log4j.appender.{name}=org.apache.log4j.RollingFileAppender",
                          f"log4j.appender.{name}.MaxFileSize={rolling}",
                          f"log4j.appender.{name}.MaxBackupIndex=20"])
        else:
            lines.extend([f"log4j.appender.{name}=org.apache.log4j.DailyRollingFileAppender",
                          f"log4j.appender.{name}.DatePattern='.'yyyy-MM-dd-HH"])
        lines.extend([f"log4j.appender.{name}.File={log_dir / filename}",
                      f"log4j.appender.{name}.layout=org.apache.log4j.PatternLayout",
                      f"log4j.appender.{name}.layout.ConversionPattern={pattern}"])
    appender("kafkaAppender", "server.log", rotate_bytes)
    lines += ["log4j.logger.kafka=INFO", "log4j.logger.org.apache.kafka=INFO",
              "log4j.logger.org.apache.zookeeper=INFO"]
    lines += [f"log4j.logger.{name}=INFO" for name in COORDINATOR_LOGGERS]
    files = {}
    for logger, (filename, level) in _SIDE_FILES.items():
        name = files.setdefault(filename, f"side{len(files)}")
        lines += [f"log4j.logger.{logger}={level}, {name}", f"log4j.additivity.{logger}=false"]
    for filename, name in files.items():
        appender(name, filename, None)
    path.write_text("\n".join(lines) + "\n")
    return path


def write_log4j2(path: Path, log_dir: Path, layout: str = "default",
                 rotate_bytes: int | None = None) -> Path:
    """log4j2 XML (Kafka 4.x); the broker reads it from -Dlog4j2.configurationFile."""
    spec = layout_for(layout, "log4j2")
    if spec.startswith("json:"):
        layout_xml = f"<JsonTemplateLayout eventTemplateUri={quoteattr(spec[5:])}/>"
    else:
        layout_xml = f"<PatternLayout pattern={quoteattr(spec)}/>"

    def rolling(name: str, filename: str, size: int | None) -> str:
        policy = (f"<SizeBasedTriggeringPolicy size=\"{size}\"/>" if size
                  else "<TimeBasedTriggeringPolicy modulate=\"true\" interval=\"1\"/>")
        pattern = f"{filename}.%i" if size else f"{filename}.%d{{yyyy-MM-dd-HH}}"
        strategy = "<DefaultRolloverStrategy max=\"20\"/>" if size else ""
        return (f"<RollingFile name=\"{name}\" fileName={quoteattr(str(log_dir / filename))} "
                f"filePattern={quoteattr(str(log_dir / pattern))}>{layout_xml}{policy}{strategy}</RollingFile>")
    appenders = [f"<Console name=\"STDOUT\">{layout_xml}</Console>",
                 rolling("KafkaAppender", "server.log", rotate_bytes)]
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
           "<AppenderRef ref=\"KafkaAppender\"/></Root>\n" + "\n".join(loggers) + "\n</Loggers>\n</Configuration>\n")
    path.write_text(xml)
    return path


def write_config(family: str, conf_dir: Path, log_dir: Path, layout: str = "default",
                 rotate_bytes: int | None = None) -> tuple[Path, str]:
    """Writes the configuration file; returns (path, JVM system property that points at it)."""
    if family == "log4j2":
        path = write_log4j2(conf_dir / "log4j2.xml", log_dir, layout, rotate_bytes)
        return path, f"-Dlog4j2.configurationFile={path}"
    path = write_log4j1(conf_dir / "log4j.properties", log_dir, layout, rotate_bytes)
    return path, f"-Dlog4j.configuration=file:{path}"
