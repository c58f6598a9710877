"""`run`'s start-up login probe and its one-line error, against a fake broker on loopback that
speaks the three requests of a SASL login (ApiVersions, SaslHandshake, SaslAuthenticate) and,
like a real one, answers a refused login and closes the connection at once. A real broker:
tests/e2e/kafka/test_sources_live.py."""
from __future__ import annotations

import re
import socket
import ssl
import struct
import subprocess
import threading

import pytest

from streaming.app import service
from streaming.app.settings import RunSettings, StartupError, load
from streaming.spark.sources.kafka_login import KafkaLoginFailed, probe_login

pytestmark = pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")   # kafka-python 3.0.12 loading its schemas
REFUSED = "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text)) + text.encode()


class FakeBroker:
    """One connection at a time; `mechanisms` enabled; `password` accepted (PLAIN);
    `silent`: accept, read the first request, close without an answer."""

    def __init__(self, mechanisms=("PLAIN",), password="right", silent=False, tls: ssl.SSLContext | None = None):
        self.mechanisms, self.password, self.silent, self.tls = mechanisms, password, silent, tls
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.requests: list[tuple[int, int]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                if self.tls is not None:
                    conn = self.tls.wrap_socket(conn, server_side=True)
                self._session(conn)
            except (OSError, ssl.SSLError, struct.error):
                pass
            finally:
                conn.close()

    @staticmethod
    def _exactly(conn, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            if not chunk:
                raise OSError("closed")
            out += chunk
        return out

    def _read(self, conn) -> tuple[int, int, int, bytes]:
        size = struct.unpack(">i", self._exactly(conn, 4))[0]
        data = self._exactly(conn, size)
        key, version, correlation = struct.unpack_from(">hhi", data)
        client_len = struct.unpack_from(">h", data, 8)[0]
        return key, version, correlation, data[10 + max(0, client_len):]

    def _answer(self, conn, correlation: int, body: bytes) -> None:
        payload = struct.pack(">i", correlation) + body
        conn.sendall(struct.pack(">i", len(payload)) + payload)

    def _session(self, conn) -> None:
        while True:
            key, version, correlation, body = self._read(conn)
            self.requests.append((key, version))
            if self.silent:
                return
            if key == 18:      # ApiVersions v0: SaslHandshake 0-1, SaslAuthenticate 0-2
                self._answer(conn, correlation, struct.pack(">hi", 0, 2) + struct.pack(">hhh", 17, 0, 1)
                             + struct.pack(">hhh", 36, 0, 2))
            elif key == 17:
                mechanism = body[2:].decode()
                ok = mechanism in self.mechanisms
                self._answer(conn, correlation, struct.pack(">hi", 0 if ok else 33, len(self.mechanisms))
                             + b"".join(_string(m) for m in self.mechanisms))
            elif key == 36:
                token = body[4:]
                _, user, password = token.decode().split("\0")
                if password == self.password:
                    self._answer(conn, correlation, struct.pack(">h", 0) + _string(None) + struct.pack(">i", 0)
                                 + (struct.pack(">q", 0) if version >= 1 else b""))
                    continue
                # A refused login: the answer, then the connection closes at once (what kafka-python drops).
                self._answer(conn, correlation, struct.pack(">h", 58) + _string(REFUSED) + struct.pack(">i", 0)
                             + (struct.pack(">q", 0) if version >= 1 else b""))
                return

    def close(self) -> None:
        self.sock.close()


def _plain(password: str) -> dict:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "monitor",
            "sasl_plain_password": password}


@pytest.fixture
def broker():
    made = []

    def make(**kw):
        made.append(FakeBroker(**kw))
        return made[-1]
    yield make
    for b in made:
        b.close()


def test_a_refused_login_is_reported_with_the_brokers_reason(broker):
    fake = broker()
    with pytest.raises(KafkaLoginFailed) as refused:
        probe_login(fake.bootstrap, _plain("wrong"), timeout_s=5)
    exc = refused.value
    assert (exc.kind, exc.server, exc.user, exc.mechanism, exc.reason) == \
        ("sasl", fake.bootstrap, "monitor", "PLAIN", REFUSED)
    assert str(exc) == f"authentication failed for user 'monitor' at {fake.bootstrap} (PLAIN): {REFUSED}"
    assert fake.requests == [(18, 0), (17, 1), (36, 1)]


def test_an_accepted_login_passes(broker):
    fake = broker()
    probe_login(fake.bootstrap, _plain("right"), timeout_s=5)     # returns: no error
    assert fake.requests == [(18, 0), (17, 1), (36, 1)]


def test_a_mechanism_the_listener_does_not_enable(broker):
    fake = broker(mechanisms=("SCRAM-SHA-512",))
    with pytest.raises(KafkaLoginFailed, match=r"the broker does not enable PLAIN \(it enables SCRAM-SHA-512"):
        probe_login(fake.bootstrap, _plain("right"), timeout_s=5)


def test_no_answer_or_no_broker_is_left_to_the_topic_check(broker):
    silent = broker(silent=True)
    probe_login(silent.bootstrap, _plain("wrong"), timeout_s=5)     # returns: no error
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    probe_login(f"127.0.0.1:{closed_port}", _plain("wrong"), timeout_s=5)     # returns: no error


def test_the_next_bootstrap_server_is_asked_when_one_does_not_answer(broker):
    silent, fake = broker(silent=True), broker()
    with pytest.raises(KafkaLoginFailed) as refused:
        probe_login(f"{silent.bootstrap},{fake.bootstrap}", _plain("wrong"), timeout_s=5)
    assert refused.value.server == fake.bootstrap


def test_plaintext_is_not_probed(broker):
    fake = broker()
    probe_login(fake.bootstrap, {}, timeout_s=5)     # returns: no error
    assert fake.requests == []


def test_a_certificate_the_ca_does_not_sign(broker, tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out",
                    "cert.pem", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   cwd=tmp_path, check=True, capture_output=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    fake = broker(tls=server)
    config = {**_plain("right"), "security_protocol": "SASL_SSL"}   # the system CAs: not this certificate
    with pytest.raises(KafkaLoginFailed) as refused:
        probe_login(fake.bootstrap, config, timeout_s=5)
    assert refused.value.kind == "tls" and "self-signed certificate" in str(refused.value), str(refused.value)
    # With its own certificate as the CA the handshake and the login pass.
    probe_login(fake.bootstrap, {**config, "ssl_cafile": str(tmp_path / "cert.pem")}, timeout_s=5)     # returns: no error
    with pytest.raises(ValueError, match=r"cannot load the TLS files \(ssl_cafile = '/nonexistent/ca.pem'\)"):
        probe_login(fake.bootstrap, {**config, "ssl_cafile": "/nonexistent/ca.pem"}, timeout_s=5)


def _settings(tmp_path, **kafka) -> RunSettings:
    return load(RunSettings, None, checkpoint_location=str(tmp_path / "checkpoint"),
                kafka={"bootstrap_servers": "kafka-0:9093", "log_topics": ["broker-logs"], **kafka})


def test_the_line_names_the_settings_of_the_source(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    refused = KafkaLoginFailed("sasl", "kafka-0:9093", REFUSED, "monitor", "SCRAM-SHA-512")
    kafka = _settings(tmp_path, client_secret_files={"sasl_plain_password": str(secret)}).kafka
    assert service.login_error(refused, kafka, "python") == (
        f"Kafka authentication failed for user 'monitor' at kafka-0:9093 (SCRAM-SHA-512): {REFUSED}; check "
        f"kafka.client.sasl_plain_username, the password in {secret} (kafka.client_secret_files.sasl_plain_password) "
        "and kafka.client.sasl_mechanism")
    assert "check kafka.client.sasl_plain_username, kafka.client.sasl_plain_password and" in \
        service.login_error(refused, _settings(tmp_path).kafka, "python")
    assert service.login_error(refused, kafka, "spark").endswith(
        'check kafka.spark_options "kafka.sasl.jaas.config" (username, password) and "kafka.sasl.mechanism"')
    tls = KafkaLoginFailed("tls", "kafka-0:9093", "certificate verify failed: self-signed certificate")
    assert service.login_error(tls, kafka, "python") == (
        "Kafka TLS handshake with kafka-0:9093 failed: certificate verify failed: self-signed certificate; "
        "check kafka.client.ssl_cafile (the CA that signed the brokers' certificates)")


def test_a_refused_login_stops_the_start_instead_of_being_retried(tmp_path):
    calls = []

    def check(topics, stop):
        calls.append(topics)
        raise KafkaLoginFailed("sasl", "kafka-0:9093", REFUSED, "monitor", "PLAIN")

    from sinks.metrics import MetricsSink
    with pytest.raises(StartupError, match=re.escape("Kafka authentication failed for user 'monitor'")):
        service._wait_for_kafka(_settings(tmp_path), MetricsSink([1.0]), threading.Event(), check=check)
    assert len(calls) == 1


def test_run_prints_one_line_and_exits_2(monkeypatch, capsys):
    from streaming.app import cli

    def refused(settings, stop):
        raise StartupError("Kafka authentication failed for user 'monitor' at kafka-0:9093 (PLAIN): no; check x")
    monkeypatch.setattr(service, "run", refused)
    code = cli.main(["run", "--bootstrap-servers", "kafka-0:9093", "--log-topic", "broker-logs",
                     "--checkpoint", "/nonexistent/checkpoint"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "rebalance-monitor: Kafka authentication failed for user 'monitor' at kafka-0:9093 (PLAIN): no; check x\n"
