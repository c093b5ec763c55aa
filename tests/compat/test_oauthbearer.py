"""SASL/OAUTHBEARER (KIP-255) with JWT validation as Kafka's
OAuthBearerValidatorCallbackHandler does it (KIP-768), with real clients:
confluent-kafka's `oauth_cb` over SASL_SSL and kafka-python's token provider over
SASL_PLAINTEXT, producing and consuming with JWTs this test signs itself (openssl)
against a JWKS it serves over HTTP on loopback. An ACL grants only the token's
principal; expired, wrong-audience, wrong-issuer and forged tokens are refused with
an authentication error (not a hang); the failure exchange and the session lifetime
are checked on the wire; a rotated signing key is fetched for its new kid.
"""

import base64
import http.server
import json
import shutil
import struct
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka.net.sasl.oauth import AbstractTokenProvider

from broker_process import SaslListenersBroker
from compat_helpers import (
    DeliveryLog,
    assign_from,
    client_logger,
    consume_n,
    consumer,
    create_topic,
    kafka_python_roundtrip,
    produce_all,
    producer,
    unique,
)
from kafka_wire import Connection, Reader
from pki import make_pki, openssl

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER = "https://idp.tidelog.test"
AUDIENCE = "kafka"
CLIENT_TIMEOUT_S = 30
PROMPT_S = 10
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL_AUTHENTICATION_FAILED = 58
REAUTH_MS = 600_000


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Signer:
    """An RSA key made with openssl that signs RS256 JWTs, and its public JWK."""

    def __init__(self, directory, kid):
        self.kid = kid
        self.key = directory / f"jwt-{kid}.pem"
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", self.key.name,
                cwd=directory)

    def jwk(self):
        out = subprocess_out(["openssl", "rsa", "-in", str(self.key), "-noout", "-modulus"])
        modulus = bytes.fromhex(out.strip().split("=", 1)[1])
        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                "n": b64url(modulus), "e": b64url((65537).to_bytes(3, "big"))}

    def token(self, sub="alice", lifetime_s=600, kid=None, **overrides):
        now = int(time.time())
        claims = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime_s,
                  "scope": "kafka"}
        claims.update(overrides)
        header = {"alg": "RS256", "typ": "JWT", "kid": kid or self.kid}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = subprocess_out(["openssl", "dgst", "-sha256", "-sign", str(self.key), "-binary"],
                                   data=signing_input.encode(), text=False)
        return f"{signing_input}.{b64url(signature)}"


def subprocess_out(cmd, data=None, text=True):
    import subprocess

    return subprocess.run(cmd, input=data, capture_output=True, check=True, timeout=30, text=text).stdout


class JwksServer:
    """The identity provider's JWKS endpoint, on loopback; counts its requests."""

    def __init__(self, keys):
        self.keys = list(keys)
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests += 1
                body = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/oauth2/jwks"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("oauth-pki"))


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    directory = tmp_path_factory.mktemp("idp")
    signers = {kid: Signer(directory, kid) for kid in ("a", "b")}
    server = JwksServer([signers["a"].jwk()])
    yield signers, server
    server.close()


class OAuthBroker(SaslListenersBroker):
    """SASL_PLAINTEXT and SASL_SSL with OAUTHBEARER only, under StandardAuthorizer
    (the PLAINTEXT listener's ANONYMOUS is the super user)."""

    def __init__(self, workdir, pki, jwks_url):
        super().__init__(workdir, pki / "keystore.pem")
        self.settings.update({
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "sasl.oauthbearer.jwks.endpoint.url": jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "connections.max.reauth.ms": str(REAUTH_MS),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        })


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki, idp):
    _, jwks = idp
    b = OAuthBroker(tmp_path_factory.mktemp("oauth-broker"), pki, jwks.url)
    b.start()
    yield b
    b.cleanup()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def oauth_conf(pki, token):
    """confluent-kafka over SASL_SSL with a token from `oauth_cb` (librdkafka needs an
    expiry in the future whatever the token says: the broker judges the token)."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (token, time.time() + 300),
        "ssl.ca.location": str(pki / "ca.pem"),
        "socket.timeout.ms": 10000,
    }


def grant(broker, principal, topic, group):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap}, logger=client_logger("admin"))
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW)
                for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
    bindings.append(AclBinding(ResourceType.GROUP, group, ResourcePatternType.PREFIXED, principal, "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(bindings, request_timeout=CLIENT_TIMEOUT_S).values():
        f.result(timeout=CLIENT_TIMEOUT_S)


def test_a_rotated_signing_key_is_fetched_for_its_new_kid(broker, pki, idp):
    # First in this module: a kid the broker has not seen makes it read the JWKS
    # again at once (at most once per 10 s, so a later unknown kid would wait).
    signers, jwks = idp
    admin_conf = {"bootstrap.servers": broker.sasl_ssl_bootstrap}
    before = jwks.requests
    jwks.keys.append(signers["b"].jwk())
    try:
        admin = AdminClient({**admin_conf, **oauth_conf(pki, signers["b"].token(sub="bob"))},
                            logger=client_logger("admin"))
        started = time.monotonic()
        admin.list_topics(timeout=CLIENT_TIMEOUT_S)
        assert time.monotonic() - started < 5, "the new key was not fetched at the first token"
    finally:
        jwks.keys.pop()
    assert jwks.requests > before


def test_confluent_oauth_cb_round_trip_and_only_the_tokens_principal_is_authorized(broker, pki, idp):
    signers, _ = idp
    topic = create_topic(broker.bootstrap, unique("oauth"), 1)
    group = unique("oauth-group")
    grant(broker, "User:alice", topic, group)
    token = signers["a"].token(sub="alice")
    conf = {"bootstrap.servers": broker.sasl_ssl_bootstrap, **oauth_conf(pki, token)}
    records = [(i, f"k{i}".encode(), f"value-{i}".encode() * (1 + i % 7), [], None) for i in range(300)]
    log = DeliveryLog()
    prod = producer(conf["bootstrap.servers"], **{k: v for k, v in conf.items() if k != "bootstrap.servers"})
    produce_all(prod, topic, records, log, flush_timeout=60)
    assert not log.failed, list(log.failed.items())[:3]
    cons = consumer(conf["bootstrap.servers"], **{k: v for k, v in conf.items() if k != "bootstrap.servers"},
                    **{"group.id": group + "-1"})
    try:
        assign_from(cons, topic, 1, 0)
        messages, _ = consume_n(cons, len(records), timeout=60)
    finally:
        cons.close()
    assert [(m.key(), m.value()) for m in messages] == [(r[1], r[2]) for r in records]
    assert broker.authentications(None, "OAUTHBEARER", "success") >= 1

    # A valid token of another principal authenticates but the ACL is alice's only.
    other = signers["a"].token(sub="mallory")
    log = DeliveryLog()
    prod = producer(conf["bootstrap.servers"], **oauth_conf(pki, other))
    produce_all(prod, topic, [(0, b"k", b"not allowed", [], None)], log, flush_timeout=30)
    assert [e.code() for e in log.failed.values()] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    # tidelog logs nothing of a token.
    text = broker.log_path.read_text(errors="replace")
    for t in (token, other):
        for part in t.split("."):
            assert part not in text


@pytest.mark.parametrize("case", ["expired", "wrong audience", "wrong issuer", "forged", "no kid known"])
def test_bad_tokens_fail_promptly_with_an_authentication_error(broker, pki, idp, case):
    signers, _ = idp
    a = signers["a"]
    token = {
        "expired": lambda: a.token(lifetime_s=-120, iat=int(time.time()) - 700),
        "wrong audience": lambda: a.token(aud="billing"),
        "wrong issuer": lambda: a.token(iss="https://evil.test"),
        # Signed by b's key but naming a's kid.
        "forged": lambda: signers["b"].token(kid="a"),
        "no kid known": lambda: a.token(kid="nobody"),
    }[case]()
    failures_before = broker.authentications(None, "OAUTHBEARER", "failure")
    errors = []
    conf = {"bootstrap.servers": broker.sasl_ssl_bootstrap, "error_cb": errors.append,
            **oauth_conf(pki, token)}
    started = time.monotonic()
    admin = AdminClient(conf, logger=client_logger("admin"))
    # The request only makes the client connect; the refusal comes through error_cb.
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=1)
    deadline = started + PROMPT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        admin.poll(0.2)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "invalid_token" in auth[0].str(), auth[0].str()
    assert broker.authentications(None, "OAUTHBEARER", "failure") > failures_before


def sasl_handshake(conn, mechanism=b"OAUTHBEARER"):
    r = Reader(conn.call(SASL_HANDSHAKE, 1, struct.pack(">h", len(mechanism)) + mechanism))
    assert r.i16() == 0


def sasl_authenticate(conn, auth_bytes):
    """SaslAuthenticate v1: (error code, error message, auth bytes, session lifetime ms)."""
    r = Reader(conn.call(SASL_AUTHENTICATE, 1, struct.pack(">i", len(auth_bytes)) + auth_bytes,
                         timeout=PROMPT_S))
    return r.i16(), r.string(), r.nullable_bytes(), r.i64()


def client_first(token):
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_the_failure_exchange_and_the_session_lifetime_on_the_wire(broker, idp):
    signers, _ = idp
    a = signers["a"]
    # A refused token: the JSON error comes as a challenge, the client's 0x01 then
    # gets SASL_AUTHENTICATION_FAILED carrying it, and the connection closes.
    with Connection("127.0.0.1", broker.sasl_port) as conn:
        sasl_handshake(conn)
        error, _, challenge, _ = sasl_authenticate(conn, client_first(a.token(aud="billing")))
        assert (error, json.loads(challenge)) == (0, {"status": "invalid_token"})
        error, message, _, _ = sasl_authenticate(conn, b"\x01")
        assert (error, json.loads(message)) == (SASL_AUTHENTICATION_FAILED, {"status": "invalid_token"})
        assert conn.wait_closed(timeout=PROMPT_S) == 0
    # A malformed message gets Kafka's generic refusal.
    with Connection("127.0.0.1", broker.sasl_port) as conn:
        sasl_handshake(conn)
        error, message, _, _ = sasl_authenticate(conn, b"n,,auth=Bearer x\x01\x01")
        assert error == SASL_AUTHENTICATION_FAILED and "OAUTHBEARER" in message, message
    # The session ends when the token does, or at connections.max.reauth.ms if sooner.
    for lifetime_s, low, high in [(20, 15_000, 20_000), (3600, REAUTH_MS, REAUTH_MS)]:
        with Connection("127.0.0.1", broker.sasl_port) as conn:
            sasl_handshake(conn)
            error, _, token, session_ms = sasl_authenticate(conn, client_first(a.token(lifetime_s=lifetime_s)))
            assert (error, token) == (0, b"")
            assert low <= session_ms <= high, session_ms
    # An authorization id other than the token's subject is refused with Kafka's words.
    with Connection("127.0.0.1", broker.sasl_port) as conn:
        sasl_handshake(conn)
        message = f"n,a=admin,\x01auth=Bearer {a.token()}\x01\x01".encode()
        error, text, _, _ = sasl_authenticate(conn, message)
        assert error == SASL_AUTHENTICATION_FAILED and "authorization id (admin)" in text, text


class StaticToken(AbstractTokenProvider):
    def __init__(self, token):
        super().__init__()
        self._token = token

    def token(self):
        return self._token


def test_kafka_python_oauthbearer_over_sasl_plaintext(broker, idp):
    signers, _ = idp
    topic = create_topic(broker.bootstrap, unique("oauth-kp"), 1)
    grant(broker, "User:kp-client", topic, "kp-")
    sasl = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                sasl_oauth_token_provider=StaticToken(signers["a"].token(sub="kp-client")))
    values = [f"kp-{i}".encode() for i in range(100)]
    got = kafka_python_roundtrip(broker.sasl_bootstrap, topic, values, group_id=unique("kp-"), **sasl)
    assert got == values


def test_a_short_lived_token_is_refreshed_and_the_session_renewed(broker, pki, idp):
    """A 6 s token: the broker's session ends with it (not at connections.max.reauth.ms),
    librdkafka asks `oauth_cb` for a new one and authenticates again, and a producer
    working across several token lifetimes loses nothing."""
    signers, _ = idp
    topic = create_topic(broker.bootstrap, unique("oauth-refresh"), 1)
    grant(broker, "User:refresher", topic, "refresh-")
    issued = []

    def oauth_cb(_config):
        issued.append(time.monotonic())
        return signers["a"].token(sub="refresher", lifetime_s=6), time.time() + 6

    conf = {**oauth_conf(pki, None), "oauth_cb": oauth_cb}
    successes_before = broker.authentications(None, "OAUTHBEARER", "success")
    log = DeliveryLog()
    prod = producer(broker.sasl_ssl_bootstrap, **conf)
    deadline = time.monotonic() + 15
    sent = 0
    while time.monotonic() < deadline:
        prod.produce(topic, value=f"r-{sent}".encode(), on_delivery=log.callback(sent))
        sent += 1
        prod.poll(0.05)
    assert prod.flush(30) == 0
    assert not log.failed, list(log.failed.items())[:3]
    assert len(log.acked) == sent
    assert len(issued) >= 3, issued
    renewed = broker.authentications(None, "OAUTHBEARER", "success") - successes_before
    # Two connections (bootstrap and broker) at the start, then each session renewed
    # (or reconnected) at least at 6 s and 12 s.
    assert renewed >= 4, renewed
