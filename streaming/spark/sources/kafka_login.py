"""The start-up login probe: does Kafka accept the TLS and SASL settings of `kafka.client`?

Why our own probe: kafka-python (3.0.12) cannot tell a refused login from an unreachable broker.
A broker that rejects a SASL login answers SaslAuthenticate with error 58 and closes the
connection at once; kafka-python reads the answer and the end of the stream in one go, drops the
answer, reports "socket disconnected", retries its bootstrap for 30 s and ends with "Unable to
bootstrap". `run` would then call a wrong password an outage and retry it forever.

The probe opens one connection to a bootstrap server and speaks the few requests of a login:
ApiVersions v0 (which versions the broker takes), SaslHandshake v1, then SaslAuthenticate
(v0/v1) with kafka-python's own SASL mechanism (SCRAM, PLAIN, ...) making the tokens. It reads
every answer to its end, so the broker's own reason comes back ("Authentication failed during
authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"). A refused
certificate (TLS) is reported the same way. Anything else (no answer, connection refused, an old
broker) is not decided here: the topic check that follows reports it as before.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
CLIENT_ID = "rebalance-monitor-login-check"


class KafkaLoginFailed(Exception):
    """Kafka refused the client's TLS or SASL settings (retrying cannot help).

    kind: "sasl" (the login was refused) or "tls" (the TLS handshake was); server: the
    bootstrap server that said so; user, mechanism: of the SASL login; reason: the broker's (or
    the TLS library's) own words."""

    def __init__(self, kind: str, server: str, reason: str, user: str | None = None,
                 mechanism: str | None = None) -> None:
        self.kind, self.server, self.reason = kind, server, reason
        self.user, self.mechanism = user, mechanism
        if kind == "sasl":
            text = f"authentication failed for user {user!r} at {server} ({mechanism}): {reason}"
        else:
            text = f"TLS handshake with {server} failed: {reason}"
        super().__init__(text)


class _Inconclusive(Exception):
    """The probe could not decide (no answer, unexpected bytes): leave it to the topic check."""


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise _Inconclusive("short answer")
        value = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value[0] if len(value) == 1 else value

    def blob(self, width: str) -> bytes | None:
        n = self.take(width)
        if n < 0:
            return None
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self) -> str | None:
        raw = self.blob(">h")
        return None if raw is None else raw.decode("utf-8", errors="replace")


class _Connection:
    """One blocking connection; requests with header v1, answers with header v0 (the non-flexible
    versions every broker since 1.0 takes for these three requests)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.correlation = sock, deadline, 0

    def _recv_exactly(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            self.sock.settimeout(max(0.05, self.deadline - time.monotonic()))
            chunk = self.sock.recv(left)
            if not chunk:
                raise _Inconclusive("the broker closed the connection without an answer")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, body: bytes) -> _Reader:
        self.correlation += 1
        payload = struct.pack(">hhi", api_key, version, self.correlation) + _string(CLIENT_ID) + body
        self.sock.settimeout(max(0.05, self.deadline - time.monotonic()))
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        answer = _Reader(self._recv_exactly(size))
        if answer.take(">i") != self.correlation:
            raise _Inconclusive("answer to another request")
        return answer


def _sasl_versions(conn: _Connection) -> tuple[int, int]:
    """(SaslHandshake, SaslAuthenticate) versions to use: 1 and min(1, broker's max)."""
    answer = conn.request(API_VERSIONS, 0, b"")
    answer.take(">h")                 # an error here still lists the versions (KIP-511)
    versions = {}
    for _ in range(answer.take(">i")):
        key, low, high = answer.take(">hhh")
        versions[key] = (low, high)
    if SASL_HANDSHAKE not in versions or versions[SASL_HANDSHAKE][1] < 1 or SASL_AUTHENTICATE not in versions:
        raise _Inconclusive("the broker does not take SaslAuthenticate (Kafka before 1.0)")
    low, high = versions[SASL_AUTHENTICATE]
    if low > 1:
        raise _Inconclusive(f"SaslAuthenticate v{low}+ only")
    return 1, min(1, high)


def _mechanism(config: dict[str, Any], host: str) -> Any:
    """kafka-python's SASL mechanism for `config` (it makes and checks the tokens)."""
    try:
        from kafka.net.sasl import get_sasl_mechanism   # kafka-python 3.x
    except ImportError:                                  # kafka-python 2.x
        from kafka.sasl import get_sasl_mechanism  # type: ignore[no-redef,unused-ignore]
    name = config.get("sasl_mechanism") or "PLAIN"
    defaults = {"sasl_kerberos_service_name": "kafka", "sasl_kerberos_name": None,
                "sasl_kerberos_domain_name": None, "sasl_oauth_token_provider": None}
    try:
        return get_sasl_mechanism(name)(host=host, **{**defaults, **config, "sasl_mechanism": name})
    except Exception as exc:   # a missing username or password, an unknown mechanism
        raise ValueError(f"SASL {name}: {type(exc).__name__}: {exc}") from None


def _login(conn: _Connection, config: dict[str, Any], host: str, server: str) -> None:
    name = config.get("sasl_mechanism") or "PLAIN"
    user = config.get("sasl_plain_username")
    handshake, authenticate = _sasl_versions(conn)
    answer = conn.request(SASL_HANDSHAKE, handshake, _string(name))
    error = answer.take(">h")
    enabled = [answer.string() for _ in range(answer.take(">i"))]
    if error != 0:
        raise KafkaLoginFailed("sasl", server, f"the broker does not enable {name} (it enables "
                               f"{', '.join(str(m) for m in enabled) or 'no mechanism'} on this listener)",
                               user, name)
    mechanism = _mechanism(config, host)
    while not mechanism.is_done():
        token = mechanism.auth_bytes()
        answer = conn.request(SASL_AUTHENTICATE, authenticate, struct.pack(">i", len(token)) + token)
        error, message = answer.take(">h"), answer.string()
        if error != 0:
            raise KafkaLoginFailed("sasl", server, message or f"SASL error code {error}", user, name)
        try:
            mechanism.receive(answer.blob(">i") or b"")
        except Exception as exc:   # e.g. a SCRAM server signature that does not verify
            raise KafkaLoginFailed("sasl", server, f"{type(exc).__name__}: {exc}", user, name) from None
    if not mechanism.is_authenticated():
        raise KafkaLoginFailed("sasl", server, "the broker's final SASL message did not verify", user, name)


def _tls_context(config: dict[str, Any]) -> ssl.SSLContext:
    """The context kafka-python builds from the same settings (kafka.net.transport)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = bool(config.get("ssl_check_hostname", True))
    if config.get("ssl_cafile"):
        ctx.load_verify_locations(config["ssl_cafile"])
    else:
        ctx.load_default_certs()
    if config.get("ssl_certfile"):
        ctx.load_cert_chain(config["ssl_certfile"], config.get("ssl_keyfile"), config.get("ssl_password"))
    return ctx


def _probe_one(server: str, config: dict[str, Any], tls: ssl.SSLContext | None, deadline: float,
               adopt: Callable[[socket.socket], None]) -> None:
    host, _, port = server.rpartition(":")
    host = host.strip("[]")
    sock = socket.create_connection((host, int(port)), timeout=max(0.05, deadline - time.monotonic()))
    adopt(sock)   # the caller may close it from another thread (a stopping `run`)
    try:
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as exc:
                raise KafkaLoginFailed("tls", server, exc.verify_message or str(exc)) from None
        if str(config.get("security_protocol")).upper() in SASL_PROTOCOLS:
            _login(_Connection(sock, deadline), config, host, server)
    finally:
        sock.close()


def probe_login(bootstrap_servers: str, config: dict[str, Any], timeout_s: float = 10.0,
                adopt: Callable[[socket.socket], None] = lambda sock: None) -> None:
    """Raises KafkaLoginFailed when a bootstrap server refuses the TLS or SASL settings of
    `config` (kafka-python's names), ValueError when the settings themselves are unusable (a CA
    file that does not load, no password); returns when a server accepts them, or when none
    gives a clear answer (unreachable, silent, too old: the topic check reports those)."""
    protocol = str(config.get("security_protocol") or "PLAINTEXT").upper()
    if protocol not in TLS_PROTOCOLS and protocol not in SASL_PROTOCOLS:
        return
    tls = None
    if protocol in TLS_PROTOCOLS:
        if config.get("ssl_context") is not None:
            tls = config["ssl_context"]   # a ready-made context (Python callers only)
        else:
            try:
                tls = _tls_context(config)
            except (OSError, ssl.SSLError) as exc:
                files = ", ".join(f"{k} = {config[k]!r}" for k in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
                                  if config.get(k))
                raise ValueError(f"cannot load the TLS files ({files or 'the system CAs'}): {exc}") from None
    deadline = time.monotonic() + timeout_s
    for server in [s.strip() for s in bootstrap_servers.split(",") if s.strip()]:
        if time.monotonic() >= deadline:
            return
        try:
            _probe_one(server, config, tls, deadline, adopt)
            return
        except (OSError, _Inconclusive):   # unreachable or silent (an SSLError is an OSError)
            continue
