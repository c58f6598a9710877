"""The bed's optional SASL_SSL listener (SCRAM-SHA-512, openssl-made PEM certificates): a
client with the right password reads metadata over TLS, a wrong password is an
authentication error (not a silent retry), on 2.8 (users in ZooKeeper) and 4.x (users formatted
into the KRaft metadata)."""
from __future__ import annotations

import pytest

from testbed.bed import KafkaCluster, wait_for
from testbed.bed.admin import make_admin
from testbed.bed.tls import SaslSsl

from .conftest import NEWEST_4X

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("version", ["2.8.2", NEWEST_4X])
def test_scram_over_tls(version, tmp_path):
    from confluent_kafka import KafkaError
    sasl = SaslSsl({"bed": "bed-secret"})
    with KafkaCluster(version, workdir=tmp_path / "cluster", sasl=sasl) as cluster:
        md = make_admin(cluster.sasl_bootstrap, sasl.client_conf()).list_topics(timeout=20)
        assert set(md.brokers) == {1, 2}
        errors: list[KafkaError] = []
        bad = make_admin(cluster.sasl_bootstrap, {**sasl.client_conf(password="wrong"),
                                                  "error_cb": errors.append})
        with pytest.raises(Exception):   # noqa: B017 - confluent-kafka raises KafkaException subclasses
            bad.list_topics(timeout=5)
        def auth_error():
            bad.poll(0.2)   # serves error_cb
            return next((e for e in errors if e.code() == KafkaError._AUTHENTICATION), None)
        err = wait_for(auth_error, 20, "an authentication error for the wrong password")
        assert "SCRAM" in err.str() or "uthentication" in err.str(), err.str()
