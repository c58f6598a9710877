"""The Helm chart, with the real helm binary (scripts/tools installs it into .tools/bin):
`helm lint --strict` and `helm template` for the default values and every profile in
helm/rebalance-monitor/ci/, then validation of what it renders.

- Core kinds (ConfigMap, PVC, Deployment, Service, ServiceAccount, Role, RoleBinding) are
  validated strictly against the Kubernetes OpenAPI schemas of K8S_VERSION (kubernetes-validate:
  unknown fields and wrong types fail).
- CRD kinds are not in those schemas. They are checked structurally against the operators'
  published API models: SparkApplication with kubeflow-spark-api (spark-operator's v1beta2
  models), PodMonitor/ServiceMonitor/PrometheusRule with cloudcoil's prometheus-operator models.
  The object must load into the model (types, required fields) and dump back to exactly what was
  rendered (so no field is unknown to the model). Enum values and cross-field rules of the CRDs
  are not checked this way.
- monitor.toml in the ConfigMap is loaded by the monitor's own settings loader.
"""
from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from dashboards import alert_rules

from testbed.chart import CHART, NAMESPACE, ROOT, by_kind, helm, one, render, values_args

PROFILES = [None] + sorted(p.name for p in (CHART / "ci").glob("*.yaml"))
K8S_VERSION = "1.33.0"
CORE_KINDS = {"ConfigMap", "PersistentVolumeClaim", "Deployment", "Service", "ServiceAccount", "Role",
              "RoleBinding"}
CRD_KINDS = {"SparkApplication", "PodMonitor", "ServiceMonitor", "PrometheusRule"}


def _strip_none(value):
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def check_crd(doc: dict) -> None:
    kind = doc["kind"]
    if kind == "SparkApplication":
        from kubeflow_spark_api.models import SparkV1beta2SparkApplication
        assert doc["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
        model = SparkV1beta2SparkApplication.from_dict(doc)
        dumped = model.to_dict()
    else:
        from cloudcoil.models.prometheus_operator import v1
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        model = getattr(v1, kind).model_validate(doc)
        dumped = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert _strip_none(dumped) == doc, f"{kind}: fields the {kind} model does not know, or changed values"


# ------------------------------------------------------------------------- lint and validation
@pytest.mark.parametrize("profile", PROFILES)
def test_helm_lint(profile):
    result = helm("lint", "--strict", str(CHART), *values_args(profile))
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("profile", PROFILES)
def test_rendered_manifests_validate(profile):
    import kubernetes_validate
    docs = render(profile)
    kinds = {d["kind"] for d in docs}
    assert kinds <= CORE_KINDS | CRD_KINDS, kinds - CORE_KINDS - CRD_KINDS
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        assert doc["metadata"].get("namespace") in (NAMESPACE, "monitoring"), where   # dashboards.namespace
        if doc["kind"] in CORE_KINDS:
            try:
                kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{where}: {exc.message} at {list(exc.path)}")
        else:
            check_crd(doc)


def test_the_validators_reject_mistakes():
    """Both checks fail on a wrong field, so a passing validation means something."""
    import kubernetes_validate
    deployment = one(render("deployment-values.yaml"), "Deployment")
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)
    app = yaml.safe_load(yaml.safe_dump(one(render(), "SparkApplication")))
    app["spec"]["driver"]["volumeMount"] = app["spec"]["driver"].pop("volumeMounts")
    with pytest.raises(AssertionError):
        check_crd(app)
    app = yaml.safe_load(yaml.safe_dump(one(render(), "SparkApplication")))
    app["spec"]["executor"]["instances"] = "three"
    with pytest.raises(Exception):   # noqa: B017 - the CRD models raise their own validation errors
        check_crd(app)
    monitor = yaml.safe_load(yaml.safe_dump(one(render(), "PodMonitor")))
    monitor["spec"]["podMetricsEndpoint"] = monitor["spec"].pop("podMetricsEndpoints")
    with pytest.raises(AssertionError):
        check_crd(monitor)


# ------------------------------------------------------------------------- what each profile renders
def test_default_is_a_spark_application_scraped_by_a_pod_monitor():
    kinds = by_kind(render())
    assert set(kinds) == {"ConfigMap", "PersistentVolumeClaim", "ServiceAccount", "Role", "RoleBinding",
                          "SparkApplication", "PodMonitor", "PrometheusRule"}
    app = kinds["SparkApplication"][0]["spec"]
    assert app["type"] == "Python" and app["mode"] == "cluster"
    assert app["mainApplicationFile"] == "local:///opt/rebalance-monitor/scripts/spark_entrypoint.py"
    assert app["arguments"] == ["run", "--config", "/etc/rebalance-monitor/monitor.toml"]
    assert "deps" not in app        # kafka-python Data Source unless packages are given
    assert app["driver"]["ports"] == [{"name": "metrics", "containerPort": 9108, "protocol": "TCP"}]
    monitor = kinds["PodMonitor"][0]["spec"]
    # the PodMonitor selects the driver (component=monitor), not the executors
    assert monitor["selector"]["matchLabels"].items() <= app["driver"]["labels"].items()
    assert not monitor["selector"]["matchLabels"].items() <= app["executor"]["labels"].items()
    assert monitor["podMetricsEndpoints"][0]["port"] == "metrics"
    assert monitor["jobLabel"] == "app.kubernetes.io/name"
    assert app["driver"]["labels"]["app.kubernetes.io/name"] == "rebalance-monitor"   # -> job label
    role = kinds["Role"][0]
    binding = kinds["RoleBinding"][0]
    assert binding["subjects"][0]["name"] == app["driver"]["serviceAccount"] == kinds["ServiceAccount"][0]["metadata"]["name"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert "pods" in role["rules"][0]["resources"] and "create" in role["rules"][0]["verbs"]
    # the checkpoint volume must be shared with executors on other nodes
    assert kinds["PersistentVolumeClaim"][0]["spec"]["accessModes"] == ["ReadWriteMany"]


def test_spark_connector_profile_adds_the_package_and_settings():
    docs = render("spark-connector-values.yaml")
    app = one(docs, "SparkApplication")["spec"]
    assert app["deps"] == {"packages": ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"]}
    assert app["executor"]["instances"] == 3
    settings = monitor_toml(docs)
    assert settings["kafka"]["source"] == "spark"
    assert settings["checkpoint_location"] == "s3a://kafka-monitoring/rebalance-monitor/checkpoint"
    assert settings["group_allow"] == ["^payments-"]           # config.extra wins
    assert settings["duration_buckets"][-1] == 3600
    board = one(docs, "ConfigMap", "-dashboards")
    assert board["metadata"]["namespace"] == "monitoring"
    assert board["metadata"]["annotations"] == {"grafana_folder": "Kafka"}


def test_deployment_mode_runs_the_driver_in_local_mode():
    kinds = by_kind(render("deployment-values.yaml"))
    assert "SparkApplication" not in kinds and "Role" not in kinds
    pod = kinds["Deployment"][0]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["rebalance-monitor"]
    assert container["args"] == ["run", "--config", "/etc/rebalance-monitor/monitor.toml"]
    assert kinds["Deployment"][0]["spec"]["strategy"] == {"type": "Recreate"}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    settings = monitor_toml(render("deployment-values.yaml"))
    assert settings["spark_master"] == "local[2]"
    # The heap reaches Spark as spark.driver.memory (get_spark); an -Xmx in JAVA_TOOL_OPTIONS would
    # lose against spark-submit's own -Xmx (issue 15), so the chart puts none there.
    assert settings["driver_memory"] == "2g"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "-Xmx" not in env["JAVA_TOOL_OPTIONS"]
    bigger = monitor_toml(render("deployment-values.yaml", "deployment.driverMemory=6g"))
    assert bigger["driver_memory"] == "6g"
    assert kinds["PersistentVolumeClaim"][0]["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert kinds["PersistentVolumeClaim"][0]["spec"]["storageClassName"] == "standard"
    assert kinds["PersistentVolumeClaim"][0]["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert kinds["PodMonitor"][0]["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()


def test_service_monitor_profile_replaces_the_pod_monitor():
    kinds = by_kind(render("servicemonitor-values.yaml"))
    assert "PodMonitor" not in kinds
    service = kinds["Service"][0]
    monitor = kinds["ServiceMonitor"][0]
    pod_labels = kinds["Deployment"][0]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert kinds["PrometheusRule"][0]["metadata"]["labels"]["release"] == "kube-prometheus-stack"


# ------------------------------------------------------------------------- configuration and secrets
def monitor_toml(docs) -> dict:
    cm = one(docs, "ConfigMap", "rm-rebalance-monitor")
    return tomllib.loads(cm["data"]["monitor.toml"])


@pytest.mark.parametrize("profile", PROFILES)
def test_monitor_toml_is_valid_for_the_monitor(profile, tmp_path):
    """The rendered monitor.toml passes the monitor's own validation (unknown keys, types, and
    what `run` requires). Secret files exist only in a pod: they are pointed at local files."""
    from streaming.app.settings import RunSettings, load
    docs = render(profile)
    text = one(docs, "ConfigMap", "rm-rebalance-monitor")["data"]["monitor.toml"]
    for key, pod_path in monitor_toml(docs).get("kafka", {}).get("client_secret_files", {}).items():
        (tmp_path / key).write_text("not-a-real-secret\n")
        text = text.replace(f'"{pod_path}"', f'"{tmp_path / key}"')
    path = tmp_path / "monitor.toml"
    path.write_text(text)
    settings = load(RunSettings, str(path))
    assert settings.metrics_host == "0.0.0.0" and settings.metrics_port == 9108
    assert settings.checkpoint_location.startswith(("/var/lib/rebalance-monitor/", "s3a://"))
    assert settings.events_dir == "/var/lib/rebalance-monitor/events"


def _mounts(container: dict, volumes: list[dict]) -> dict[str, dict]:
    by_name = {v["name"]: v for v in volumes}
    return {m["mountPath"]: by_name[m["name"]] for m in container["volumeMounts"]}


def _covered(path: str, mounts: dict[str, dict]) -> dict:
    hits = [v for mp, v in mounts.items() if path == mp or path.startswith(mp.rstrip("/") + "/")]
    assert hits, f"{path} is on no mounted volume"
    return hits[0]


@pytest.mark.parametrize("mode", ["sparkApplication", "deployment"])
def test_kafka_tls_and_sasl_come_from_existing_secrets(mode):
    docs = render("kafka-tls-sasl-values.yaml", f"mode={mode}")
    settings = monitor_toml(docs)
    kafka = settings["kafka"]
    assert kafka["client"]["security_protocol"] == "SASL_SSL"
    assert "sasl_plain_password" not in kafka["client"]          # never inlined
    assert set(kafka["client_secret_files"]) == {"sasl_plain_password"}
    assert kafka["spark_options"]["kafka.security.protocol"] == "SASL_SSL"
    assert "${dir:/etc/rebalance-monitor/kafka/sasl:password}" in kafka["spark_options"]["kafka.sasl.jaas.config"]
    if mode == "deployment":
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        containers = {"monitor": pod["containers"][0]}
        volumes = pod["volumes"]
    else:
        app = one(docs, "SparkApplication")["spec"]
        containers = {"driver": app["driver"], "executor": app["executor"]}   # executors read Kafka too
        volumes = app["volumes"]
    expected = {"ssl_cafile": "kafka-cluster-ca-cert", "ssl_certfile": "rebalance-monitor-client-tls",
                "ssl_keyfile": "rebalance-monitor-client-tls"}
    for role, container in containers.items():
        mounts = _mounts(container, volumes)
        for key, secret in expected.items():
            volume = _covered(kafka["client"][key], mounts)
            assert volume["secret"]["secretName"] == secret, (role, key)
        volume = _covered(kafka["client_secret_files"]["sasl_plain_password"], mounts)
        assert volume["secret"]["secretName"] == "rebalance-monitor-kafka-user", role
        for option in ("kafka.ssl.truststore.location", "kafka.ssl.keystore.key"):
            assert "secret" in _covered(kafka["spark_options"][option], mounts), (role, option)
    assert not [d for d in docs if d["kind"] == "Secret"], "the chart must not create Secrets"


@pytest.mark.parametrize("values,message", [
    (["mode=spark"], "mode must be sparkApplication or deployment"),
    (["kafkaSecrets.tls.enabled=true"], "kafkaSecrets.tls.caSecret.name"),
    (["kafkaSecrets.sasl.enabled=true"], "kafkaSecrets.sasl.passwordSecret.name"),
    (["serviceMonitor.enabled=true"], "enable either podMonitor or serviceMonitor"),
])
def test_bad_values_fail_with_a_message(values, message):
    result = helm("template", "rm", str(CHART), *values_args(None, values), check=False)
    assert result.returncode != 0
    assert message in result.stderr


# ------------------------------------------------------------------------- pods: security and scratch space
def _pods(docs) -> list[tuple[str, dict, dict, list]]:
    """(role, pod security context, container-ish spec, volumes) for every pod the chart makes."""
    out = []
    for doc in docs:
        if doc["kind"] == "Deployment":
            spec = doc["spec"]["template"]["spec"]
            out.append(("deployment", spec["securityContext"], spec["containers"][0], spec["volumes"]))
        elif doc["kind"] == "SparkApplication":
            spec = doc["spec"]
            for role in ("driver", "executor"):
                out.append((role, spec[role]["podSecurityContext"], spec[role], spec["volumes"]))
    return out


@pytest.mark.parametrize("profile", PROFILES)
def test_pods_run_as_non_root_with_a_read_only_root_and_scratch_volumes(profile):
    pods = _pods(render(profile))
    assert pods
    for role, pod_security, container, volumes in pods:
        assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] != 0, role
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, role
        assert security["allowPrivilegeEscalation"] is False, role
        assert security["capabilities"]["drop"] == ["ALL"], role
        mounts = _mounts(container, volumes)
        assert "emptyDir" in mounts["/tmp"], role
        assert "emptyDir" in mounts["/var/data/spark-local"], role
        assert "/var/lib/rebalance-monitor" in mounts, role
    spark_volumes = [v for _, _, c, vols in pods for v in vols if v["name"].startswith("spark-local-dir-")]
    assert spark_volumes            # Spark on Kubernetes uses volumes of that name as local dirs


# ------------------------------------------------------------------------- generated parts
def test_prometheus_rule_carries_exactly_the_plain_rules_file():
    rule = one(render(), "PrometheusRule")
    plain = yaml.safe_load((ROOT / "alerts" / "rebalance-monitor.rules.yml").read_text())
    assert rule["spec"] == {"groups": plain["groups"]}


def test_values_hold_every_alert_parameter_with_its_default():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["prometheusRule"]["params"] == alert_rules.DEFAULTS


def test_prometheus_rule_parameters_change_the_rules_and_stay_valid(tmp_path):
    params = {"stuckSeconds": 1234, "stuckTimeoutFactor": 3, "stuckMinSeconds": 90, "stormWindow": "30m",
              "rebalanceTimeoutWindow": "1h", "jobSelector": 'job=~"kafka/.*"',
              "runbookBaseUrl": "https://runbooks.example/rm.md"}
    rule = one(render(None, *(f"prometheusRule.params.{k}={v}" for k, v in params.items())), "PrometheusRule")
    rules = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    # the chart with these values carries the rules the plain file would have with them
    assert rule["spec"] == {"groups": alert_rules.rule_groups(params=params)}
    stuck = rules["KafkaConsumerGroupRebalanceStuck"]["expr"]
    assert "clamp_min(3 * max by" in stuck and "), 90)" in stuck and "1234 + 0 * max by" in stuck
    assert "offset 1h" in rules["KafkaConsumerGroupRebalanceTimeout"]["expr"]
    assert "offset 30m" in rules["KafkaConsumerGroupRebalanceStorm"]["expr"]
    assert rules["RebalanceMonitorAbsent"]["expr"] == 'absent(up{job=~"kafka/.*"})'
    assert rules["RebalanceMonitorDown"]["annotations"]["runbook_url"] == \
        "https://runbooks.example/rm.md#rebalancemonitordown"
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    promtool = shutil.which("promtool")
    assert promtool, "promtool not installed"
    check = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_dashboards_config_map_is_labelled_for_the_grafana_sidecar():
    board = one(render(), "ConfigMap", "-dashboards")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    files = {p.name: p.read_text() for p in (ROOT / "dashboards").glob("*.json")}
    assert set(board["data"]) == set(files) == {"rebalance-fleet.json", "rebalance-group.json"}
    for name, text in files.items():
        assert board["data"][name] == text.rstrip("\n"), name
    assert len(yaml.safe_dump(board).encode()) < 1_000_000    # ConfigMaps hold at most 1 MiB


# ------------------------------------------------------------------------- the chart as the cluster tests run it
def _submitted_conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")


@pytest.mark.parametrize("profile", [None, "spark-connector-values.yaml"])
def test_the_spark_cluster_tests_submit_with_the_charts_settings(profile, tmp_path):
    """tests/e2e/test_spark_cluster.py and scripts/spark-cluster-check submit to a standalone
    cluster with what spark-operator makes of the rendered SparkApplication: its driver and
    executor settings, sparkConf, packages, entry point and arguments. Only the settings named
    here differ, each for a reason given in StandaloneCluster.local_conf."""
    from testbed.chart import Submission, spark_application
    from testbed.spark_cluster import StandaloneCluster
    app = spark_application(profile)
    spec = app["spec"]
    cluster = StandaloneCluster(tmp_path)
    argv = cluster.submit_argv(["run", "--config", str(tmp_path / "monitor.toml")], Submission.of(app))
    conf = _submitted_conf(argv)
    driver, executor = spec["driver"], spec["executor"]
    assert conf["spark.driver.memory"] == driver["memory"] and conf["spark.driver.cores"] == str(driver["cores"])
    assert conf["spark.executor.memory"] == executor["memory"]
    assert conf["spark.executor.cores"] == str(executor["cores"])
    for key, value in spec["sparkConf"].items():
        if key != "spark.jars.ivy":         # the image's scratch volume: the cache here
            assert conf[key] == str(value), key
    chart_keys = set(Submission.of(app).conf)
    assert {k for k in chart_keys if conf[k] != Submission.of(app).conf[k]} == \
        {"spark.executor.instances", "spark.jars.ivy"}
    packages = spec.get("deps", {}).get("packages", [])
    assert (argv[argv.index("--packages") + 1].split(",") if "--packages" in argv else []) == packages
    assert "--deploy-mode" not in argv         # client mode: the chart's cluster mode is spark-operator's
    main = argv.index(str(ROOT / "scripts" / "spark_entrypoint.py"))
    assert spec["mainApplicationFile"] == "local:///opt/rebalance-monitor/scripts/spark_entrypoint.py"
    assert argv[main + 1:main + 3] == spec["arguments"][:2] == ["run", "--config"]


def test_the_deployment_runs_the_command_the_bed_runs(tmp_path):
    """Deployment mode starts `rebalance-monitor run --config ...` in local mode, as the real-Kafka
    bed's monitor (testbed/monitor.py) and the local runs of the cluster tests do."""
    from testbed.monitor import MonitorProcess
    container = one(render("deployment-values.yaml"), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    bed = MonitorProcess("127.0.0.1:9092", ["logs"], tmp_path).command()
    assert Path(bed[0]).name == container["command"][0] == "rebalance-monitor"
    assert bed[1:3] == container["args"][:2] == ["run", "--config"]
    assert monitor_toml(render("deployment-values.yaml"))["spark_master"] == "local[2]"
