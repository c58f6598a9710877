"""An optional SASL_SSL listener (SCRAM-SHA-512) with certificates the bed makes with openssl.

PEM stores (Kafka 2.7+ reads `ssl.keystore.type=PEM`), so no keytool/JKS: a CA, a broker key
(PKCS#8, unencrypted) and certificate for 127.0.0.1/localhost. Users: KRaft formats them into
the metadata log (`kafka-storage format --add-scram`), ZooKeeper mode writes them with
`kafka-configs --zookeeper` (kafka.admin.ConfigCommand) before the brokers start. Inter-broker
traffic stays on PLAINTEXT."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testbed.bed.procs import BedError, Proc

MECHANISM = "SCRAM-SHA-512"
KEY_PASSWORD = "kafkabed-key"   # a throwaway test key, made per cluster


def _openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        raise BedError("openssl not found (needed for the SASL_SSL listener's certificates)")
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BedError(f"openssl {args[0]} failed: {proc.stderr.strip().splitlines()[-1:]}")


class SaslSsl:
    def __init__(self, users: dict | None = None):
        self.users = dict(users or {"bed": "bed-secret"})
        self.dir: Path | None = None

    @property
    def _certs_dir(self) -> Path:
        """The directory of the certificates (`prepare`)."""
        if self.dir is None:
            raise BedError("SaslSsl.prepare() has not run: no certificates yet")
        return self.dir

    @property
    def ca(self) -> Path:
        return self._certs_dir / "ca.pem"

    def prepare(self, directory: Path) -> None:
        """CA + broker certificate (SAN IP:127.0.0.1, DNS:localhost), valid 2 days."""
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                 "-days", "2", "-subj", "/CN=kafkabed-ca", cwd=directory)
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "broker.key",
                 cwd=directory)
        _openssl("req", "-new", "-key", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost", cwd=directory)
        (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "broker.crt", "-days", "2", "-extfile", "san.ext", cwd=directory)
        # 2.8 wants an encrypted PEM key (ssl.key.password); PBE-SHA1-3DES is what every JDK reads.
        _openssl("pkcs8", "-topk8", "-in", "broker.key", "-out", "broker-enc.key", "-v1", "PBE-SHA1-3DES",
                 "-passout", f"pass:{KEY_PASSWORD}", cwd=directory)
        # PEM keystore: the private key then the certificate chain, in one file.
        (directory / "broker-keystore.pem").write_text((directory / "broker-enc.key").read_text()
                                                        + (directory / "broker.crt").read_text()
                                                        + (directory / "ca.pem").read_text())

    def broker_properties(self, node) -> dict:
        return {
            "sasl.enabled.mechanisms": MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.location": str(self._certs_dir / "broker-keystore.pem"),
            "listener.name.sasl_ssl.ssl.key.password": KEY_PASSWORD,
            "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
            "listener.name.sasl_ssl.ssl.truststore.location": str(self.ca),
        }

    def jvm_opts(self, node) -> list:
        return []

    def format_args(self) -> list:
        args = []
        for user, password in self.users.items():
            args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
        return args

    def create_zk_users(self, cluster) -> None:
        """ZooKeeper mode: kafka-configs --zookeeper ... --alter --add-config SCRAM-SHA-512=[...]."""
        zk = cluster.nodes[0]
        for user, password in self.users.items():
            args = ["--zookeeper", f"127.0.0.1:{zk.port}", "--alter", "--add-config",
                    f"{MECHANISM}=[password={password}]", "--entity-type", "users", "--entity-name", user]
            p = Proc(cluster._java("kafka.admin.ConfigCommand", args, zk), f"scram-{user}", zk.home,
                     env=cluster._env())
            code = p.wait(120)
            p.close_files()
            if code != 0:
                raise BedError(f"kafka-configs could not add SCRAM user {user}: {p.tail(400)}")

    def client_conf(self, user: str = "bed", password: str | None = None) -> dict:
        """confluent-kafka settings for the SASL_SSL listener."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": user,
                "sasl.password": self.users.get(user, "") if password is None else password,
                "ssl.ca.location": str(self.ca)}

    def kafka_python_conf(self, user: str = "bed", password: str | None = None) -> dict:
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": MECHANISM, "sasl_plain_username": user,
                "sasl_plain_password": self.users.get(user, "") if password is None else password,
                "ssl_cafile": str(self.ca)}
