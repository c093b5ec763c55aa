"""Certificate reload without a restart: when an SSL listener's PEM key store or trust
store file changes on disk, new connections get the new certificate (and the new trust
store decides which client certificates pass), connections opened before carry on,
and a broken replacement is refused with a log line while the old certificate is
still served.
"""

import shutil
import socket
import ssl
import subprocess
import time

import pytest

from broker_process import Broker
from compat_helpers import free_port, wait_until
from kafka_wire import API_API_VERSIONS, Reader, request
from pki import make_cert, make_pki

PROMPT_S = 10


class SslBroker(Broker):
    """A PLAINTEXT and an SSL listener."""

    def __init__(self, workdir, settings):
        self.ssl_port = free_port()
        super().__init__(workdir, settings)
        self.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port}"
        self.choose_new_ports = lambda: False


@pytest.fixture
def pki(tmp_path):
    """Two CAs: the first signs the server certificates and client `first`; the second
    (another directory) signs client `second`."""
    first = make_pki(tmp_path / "pki", clients=("first",))
    other = make_pki(tmp_path / "other-pki", clients=("second",))
    return first, other


def served_certificate(port, cafile, client=None):
    """(subject, serial) of the certificate a new TLS connection is shown."""
    context = ssl.create_default_context(cafile=str(cafile))
    if client:
        context.load_cert_chain(*client)
    with socket.create_connection(("127.0.0.1", port), timeout=PROMPT_S) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            der = tls.getpeercert(binary_form=True)
            api_versions_roundtrip(tls)
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject", "-serial"],
                         input=der, capture_output=True, check=True, timeout=30).stdout.decode()
    return out


def api_versions_roundtrip(tls):
    """One ApiVersions v0 over an open TLS connection; its error code."""
    tls.sendall(request(API_API_VERSIONS, 0, 7))
    size = int.from_bytes(recv_exact(tls, 4), "big")
    body = recv_exact(tls, size)
    return Reader(body[4:]).i16()


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def replace(path, text):
    """As cert-manager or `mv` replace a file: write aside, then rename over it."""
    staged = path.with_suffix(".staged")
    staged.write_text(text)
    staged.rename(path)


def test_a_replaced_certificate_is_served_to_new_connections_only(pki, tmp_path):
    first, _ = pki
    keystore = tmp_path / "keystore.pem"
    shutil.copy(first / "keystore.pem", keystore)
    broker = SslBroker(tmp_path / "broker", {"ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": str(keystore)})
    broker.start()
    try:
        before = served_certificate(broker.ssl_port, first / "ca.pem")
        assert "CN = localhost" in before or "CN=localhost" in before, before
        context = ssl.create_default_context(cafile=str(first / "ca.pem"))
        opened = context.wrap_socket(socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=PROMPT_S),
                                     server_hostname="localhost")
        assert api_versions_roundtrip(opened) == 0

        # A new certificate (another subject, another serial) for the same key pair's place.
        make_cert(first, "renewed", "/CN=localhost/O=renewed",
                  "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        replace(keystore, (first / "renewed.key").read_text() + (first / "renewed.pem").read_text())
        wait_until(lambda: served_certificate(broker.ssl_port, first / "ca.pem") != before, PROMPT_S,
                   "the renewed certificate to be served")
        after = served_certificate(broker.ssl_port, first / "ca.pem")
        assert "renewed" in after, after
        # The connection opened before goes on, on its old session.
        assert api_versions_roundtrip(opened) == 0
        assert "renewed" not in ssl.DER_cert_to_PEM_cert(opened.getpeercert(binary_form=True))
        opened.close()

        # A broken replacement is refused: the renewed certificate is still served,
        # and why is logged once (files are looked at when a handshake comes).
        replace(keystore, "-----BEGIN CERTIFICATE-----\nnot a certificate\n")

        def refusal_logged():
            assert served_certificate(broker.ssl_port, first / "ca.pem") == after
            return "changed on disk but is refused" in broker.log_path.read_text(errors="replace")

        wait_until(refusal_logged, PROMPT_S, "the broken key store to be refused")
        time.sleep(1.5)
        assert served_certificate(broker.ssl_port, first / "ca.pem") == after
        log = broker.log_path.read_text(errors="replace")
        assert log.count("changed on disk but is refused") == 1, log[-3000:]
        assert "reloaded (new connections use it)" in log
    finally:
        broker.cleanup()


def test_a_replaced_trust_store_decides_which_clients_pass(pki, tmp_path):
    first, other = pki
    truststore = tmp_path / "truststore.pem"
    shutil.copy(first / "ca.pem", truststore)
    broker = SslBroker(tmp_path / "broker", {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(first / "keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(truststore),
        "ssl.client.auth": "required",
    })
    broker.start()
    try:
        second_client = (str(other / "second.pem"), str(other / "second.key"))
        first_client = (str(first / "first.pem"), str(first / "first.key"))
        served_certificate(broker.ssl_port, first / "ca.pem", first_client)
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            served_certificate(broker.ssl_port, first / "ca.pem", second_client)
        # Trust both CAs from now on.
        replace(truststore, (first / "ca.pem").read_text() + (other / "ca.pem").read_text())

        def second_passes():
            try:
                served_certificate(broker.ssl_port, first / "ca.pem", second_client)
                return True
            except (ssl.SSLError, ConnectionError, OSError):
                return False

        wait_until(second_passes, PROMPT_S, "a client of the newly trusted CA to pass")
        served_certificate(broker.ssl_port, first / "ca.pem", first_client)
    finally:
        broker.cleanup()
