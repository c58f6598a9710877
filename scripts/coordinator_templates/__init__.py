"""Rebuild tests/data/coordinator_templates.jsonl and tests/data/rebalance_reasons.jsonl.

Every log call (info/warn/error, and the DEBUG ones that carry rebalance facts) of Kafka's group
coordinator, for the newest served patch release of every minor line 1.1-4.4, read from the
`-sources.jar` artifacts that Maven Central publishes. Standard library only (Python 3.11);
`mvn` downloads the jars into a cache outside the repository.

    python3 scripts/extract-coordinator-templates            # download what is missing, extract, write
    python3 scripts/extract-coordinator-templates --offline  # use the cache only
    python3 scripts/extract-coordinator-templates --check    # exit 1 if the files would change

(`python3 -m scripts.coordinator_templates ...` from the repository root is the same.) The modules:

    releases   the patch releases of every line, the jars, downloading them with mvn
    loggers    which files, which loggers, which LogContext prefixes
    lexing     masking strings and comments of Java/Scala source
    templates  a log call's message expression -> template text and placeholders
    sources    one Java/Scala source file -> its log calls
    reasons    the rebalance reasons passed to prepareRebalance & co.
    bytecode   releases without sources jars: the log calls of the compiled classes (javap)
    scope      which levels and which DEBUG templates are kept
    examples   example arguments of templates and prefixes
    rows       versions -> rows, the JSON lines of both files
    cli        the command line: counts, --check, writing the files

See tests/data/README.md for the scope, the row format and what was checked by hand.
"""
