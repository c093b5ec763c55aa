"""Test certificates made with Debian's `openssl` command: a CA, a server certificate
for 127.0.0.1/localhost, and client certificates `O=tidelog tests, CN=<name>`, all
signed by that CA, plus Kafka's PEM keystore (the server key and chain in one file).
"""

import shutil
import subprocess

import pytest

OPENSSL_TIMEOUT_S = 30


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)


def make_cert(cwd, name, subject, extensions):
    """A P-256 key and a certificate for `subject` signed by ca.pem/ca.key."""
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd)
    (cwd / f"{name}.ext").write_text(extensions)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=cwd)


def make_pki(d, clients=()):
    """Writes ca.pem, server.pem/.key, keystore.pem and `<client>.pem/.key` into `d`."""
    d.mkdir(parents=True, exist_ok=True)
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed (./scripts/test installs it)", pytrace=False)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=tidelog test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    make_cert(d, "server", "/CN=localhost",
              "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    for client in clients:
        make_cert(d, client, f"/O=tidelog tests/CN={client}", "extendedKeyUsage=clientAuth\n")
    (d / "keystore.pem").write_text((d / "server.key").read_text() + (d / "server.pem").read_text())
    return d
