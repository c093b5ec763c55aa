"""The admin port under security: a broker with Kafka's StandardAuthorizer, its admin port
served over HTTPS (`admin.listener.security.protocol=SSL`, the certificate from
`listener.name.admin.ssl.*`, client certificates requested), SCRAM users made with
confluent-kafka's AlterUserScramCredentials and ACLs made with CreateAcls through the
PLAINTEXT listener (User:ANONYMOUS, a super user there). At the HTTP level: no credentials
or a wrong password is 401 (the wrong one delayed and counted), /metrics and /healthz stay
open, a user sees the topics its ACLs let it describe and is refused (403, Kafka's error
code) what they do not let it do, a client certificate is a principal too. In Debian's
headless Chromium: a user without CREATE sees the refusal in the console, a user with it
creates a topic through the UI, which confluent-kafka then finds."""

import base64
import json
import re
import ssl
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from compat_helpers import admin, create_topic, unique, wait_until
from console_browser import ARTIFACTS, chromium, watch_errors  # noqa: F401 - a fixture
from pki import make_pki

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TIMEOUT_S = 20
WAIT_MS = 20_000
FAILED_DELAY_MS = 300
TOPIC_AUTHORIZATION_FAILED = 29
VIEWER, OPERATOR = ("viewer", "v-secret"), ("operator", "o-secret")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("admin-pki"), clients=("alice",))


@pytest.fixture(scope="module")
def secured(shared_broker_maker, pki):
    """(broker, topics): `seen` the viewer may describe, `hidden` it may not."""
    broker = shared_broker_maker({
        "authorizer.class.name": STANDARD,
        "super.users": "User:ANONYMOUS",
        "admin.console.actions.enabled": "true",
        "admin.listener.security.protocol": "SSL",
        "listener.name.admin.ssl.keystore.location": str(pki / "keystore.pem"),
        "listener.name.admin.ssl.truststore.location": str(pki / "ca.pem"),
        "listener.name.admin.ssl.client.auth": "requested",
        "listener.name.admin.ssl.principal.mapping.rules": "RULE:^CN=(.*?),O=.*$/$1/L,DEFAULT",
        "connection.failed.authentication.delay.ms": str(FAILED_DELAY_MS),
    }, pki)
    client = admin(broker.bootstrap)
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), pw.encode())
               for user, pw in (VIEWER, OPERATOR)]
    for future in client.alter_user_scram_credentials(upserts).values():
        future.result(timeout=TIMEOUT_S)
    seen, hidden = unique("seen"), unique("hidden")
    for topic in (seen, hidden):
        create_topic(broker.bootstrap, topic)

    def allow(principal, resource, name, operation, pattern=ResourcePatternType.LITERAL):
        return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)

    acls = [
        allow("User:viewer", ResourceType.TOPIC, seen, AclOperation.DESCRIBE),
        allow("User:alice", ResourceType.TOPIC, hidden, AclOperation.DESCRIBE),
        allow("User:operator", ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE),
        allow("User:operator", ResourceType.TOPIC, "*", AclOperation.DESCRIBE),
    ]
    for future in client.create_acls(acls).values():
        future.result(timeout=TIMEOUT_S)
    return broker, seen, hidden


@pytest.fixture(scope="module")
def shared_broker_maker(tmp_path_factory):
    import shutil

    from broker_process import Broker
    made = []

    def make(settings, pki):
        broker = Broker(tmp_path_factory.mktemp("secured-admin"), settings)
        broker.admin_scheme = "https"
        broker.admin_ca = pki / "ca.pem"
        broker.admin_ssl_context = ssl.create_default_context(cafile=str(broker.admin_ca))
        made.append(broker)
        return broker.start()

    yield make
    for broker in made:
        broker.cleanup()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


def ask(broker, path, user=None, method="GET", body=None, cert=None):
    """(status, headers, body) of a request to the HTTPS admin port."""
    context = ssl.create_default_context(cafile=str(broker.admin_ca))
    if cert:
        context.load_cert_chain(*cert)
    headers = {}
    if user:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers.update({"Content-Type": "application/json", "X-Tidelog-Console": "1"})
    request = urllib.request.Request(f"https://127.0.0.1:{broker.admin_port}{path}", data=data,
                                     headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as resp:
            return resp.status, resp.headers, resp.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers, refused.read().decode()


def topic_names(answer):
    return {t["name"] for t in json.loads(answer)["topics"]}


def auth_failures(broker):
    _, _, text = ask(broker, "/metrics")
    found = re.search(r'tidelog_authentication_total\{[^}]*listener="ADMIN"[^}]*result="failure"[^}]*\} (\d+)', text)
    return int(found.group(1)) if found else 0


def test_no_or_wrong_credentials_are_401_and_the_scrape_paths_stay_open(secured):
    broker, seen, _ = secured
    for path in ("/", "/v1/topics", "/v1/console"):
        status, headers, _ = ask(broker, path)
        assert status == 401, path
        assert headers["WWW-Authenticate"].startswith("Basic realm="), path
    assert ask(broker, "/healthz")[0] == 200
    assert ask(broker, "/readyz")[0] == 200
    assert ask(broker, "/metrics")[0] == 200

    before = auth_failures(broker)
    started = time.monotonic()
    status, _, body = ask(broker, "/v1/topics", user=("viewer", "not-it"))
    took = time.monotonic() - started
    assert status == 401 and "wrong user name or password" in body, body
    assert took >= FAILED_DELAY_MS / 1000, f"a failed login answered after {took:.3f} s"
    status, _, _ = ask(broker, "/v1/topics", user=("nobody", "x"))
    assert status == 401
    assert auth_failures(broker) == before + 2
    # The right password.
    status, _, body = ask(broker, "/v1/topics", user=VIEWER)
    assert status == 200 and seen in topic_names(body)


def test_a_user_sees_what_it_may_describe_and_is_refused_what_it_may_not_do(secured):
    broker, seen, hidden = secured
    _, _, body = ask(broker, "/v1/topics", user=VIEWER)
    assert topic_names(body) == {seen}, "only the topic its ACLs let it describe"
    topic = json.loads(body)["topics"][0]
    assert topic["configs"] is None, "configs need DESCRIBE_CONFIGS"
    status, _, body = ask(broker, "/v1/console", user=VIEWER)
    assert json.loads(body)["principal"] == "User:viewer"
    cluster = json.loads(ask(broker, "/v1/cluster", user=VIEWER)[2])
    assert cluster["topics"] == 1 and len(cluster["brokers"]) == 1
    # Without DESCRIBE on the cluster, no quorum; without READ, no records.
    status, _, body = ask(broker, "/v1/quorum", user=VIEWER)
    assert status == 403 and "DESCRIBE on the cluster" in json.loads(body)["error"]
    status, _, body = ask(broker, f"/v1/topics/{seen}/partitions/0/records", user=VIEWER)
    assert status == 403 and "READ" in json.loads(body)["error"]
    # Actions: each as its Kafka API, a check included.
    status, _, body = ask(broker, f"/v1/topics/{seen}/partitions", user=VIEWER, method="POST",
                          body={"count": 3, "validate_only": True})
    refused = json.loads(body)
    assert status == 403 and refused["error_code"] == TOPIC_AUTHORIZATION_FAILED, body
    assert "may not ALTER topic" in refused["error"]
    status, _, body = ask(broker, "/v1/topics", user=VIEWER, method="POST",
                          body={"name": unique("nope"), "validate_only": True})
    assert status == 403 and json.loads(body)["error_code"] == TOPIC_AUTHORIZATION_FAILED, body
    # A topic it may not describe is refused alike: no hint that it exists.
    status, _, body = ask(broker, f"/v1/topics/{hidden}/delete-records", user=VIEWER, method="POST",
                          body={"offsets": {"0": -1}, "dry_run": True})
    assert status == 403 and json.loads(body)["error_code"] == TOPIC_AUTHORIZATION_FAILED, body
    # The operator may create (CREATE on the cluster): the check passes.
    status, _, body = ask(broker, "/v1/topics", user=OPERATOR, method="POST",
                          body={"name": unique("checked"), "validate_only": True})
    assert status == 200, body


def test_a_client_certificate_is_a_principal(secured, pki):
    broker, seen, hidden = secured
    alice = (str(pki / "alice.pem"), str(pki / "alice.key"))
    status, _, body = ask(broker, "/v1/topics", cert=alice)
    assert status == 200, body
    assert topic_names(body) == {hidden}
    assert json.loads(ask(broker, "/v1/console", cert=alice)[2])["principal"] == "User:alice"


def browser_page(chromium, broker, user):
    context = chromium.new_context(
        viewport={"width": 1280, "height": 800}, ignore_https_errors=True,
        http_credentials={"username": user[0], "password": user[1]},
    )
    page = context.new_page()
    return context, page, watch_errors(page)


def test_the_console_shows_a_refusal_and_acts_for_a_user_with_the_rights(secured, chromium):
    broker, seen, hidden = secured
    base = f"https://127.0.0.1:{broker.admin_port}/"
    wanted = unique("made-in-ui")

    context, page, errors = browser_page(chromium, broker, VIEWER)
    try:
        page.goto(base + "#topics", wait_until="load")
        page.locator(f'details[data-topic="{seen}"]').wait_for(timeout=WAIT_MS)
        assert page.locator(f'details[data-topic="{hidden}"]').count() == 0
        wait_until(lambda: "signed in as User:viewer" in page.locator("#status").inner_text(), 10, "the principal shown")
        page.locator("#create-name").fill(wanted)
        page.locator("#create-check").click()
        result = page.locator("#create-result")
        wait_until(lambda: "Refused" in result.inner_text(), 10, "the refusal shown")
        assert f"User:viewer may not CREATE topic {wanted}" in result.inner_text()
        page.screenshot(path=str(ARTIFACTS / "secured-refused-1280x800.png"), full_page=True)
        # The refusal came as an answer: the page itself logged no error.
        assert [e for e in errors if "403" not in e] == [], errors
    finally:
        context.close()

    context, page, errors = browser_page(chromium, broker, OPERATOR)
    try:
        page.goto(base + "#topics", wait_until="load")
        page.locator("#create-name").fill(wanted)
        page.locator("#create-partitions").fill("2")
        page.locator("#create-check").click()
        page.locator("#create-confirm").wait_for(timeout=WAIT_MS)
        page.locator("#create-confirm").click()
        wait_until(lambda: f"Created topic {wanted}" in page.locator("#create-result").inner_text(), 20, "created")
        described = admin(broker.bootstrap).list_topics(timeout=10).topics
        assert wanted in described and len(described[wanted].partitions) == 2
        page.locator(f'details[data-topic="{wanted}"]').wait_for(timeout=WAIT_MS)
        page.screenshot(path=str(ARTIFACTS / "secured-created-1280x800.png"), full_page=True)
        assert errors == [], errors
    finally:
        context.close()


def test_metrics_taken_out_of_the_public_paths_need_a_user_with_describe_on_the_cluster(broker_factory):
    """Plain HTTP this time (Basic over HTTP works; the node warns about it at start)."""
    broker = broker_factory({
        "authorizer.class.name": STANDARD,
        "super.users": "User:ANONYMOUS",
        "admin.public.paths": "/healthz,/readyz",
    })
    client = admin(broker.bootstrap)
    users = [("scraper", "s-secret"), ("nosy", "n-secret")]
    upserts = [UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), p.encode())
               for u, p in users]
    for future in client.alter_user_scram_credentials(upserts).values():
        future.result(timeout=TIMEOUT_S)
    grant = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:scraper", "*",
                       AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in client.create_acls([grant]).values():
        future.result(timeout=TIMEOUT_S)

    def metrics(user=None):
        headers = {}
        if user:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
        request = urllib.request.Request(f"http://127.0.0.1:{broker.admin_port}/metrics", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    assert metrics()[0] == 401
    status, body = metrics(users[1])
    assert status == 403 and "DESCRIBE on the cluster" in body, body
    status, body = metrics(users[0])
    assert status == 200 and body.endswith("# EOF\n")
    assert 'tidelog_authentication_total{listener="ADMIN",mechanism="HTTP-BASIC",result="success"}' in body
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.admin_port}/readyz", timeout=TIMEOUT_S) as resp:
        assert resp.status == 200
    assert "the admin port is plain HTTP while an authorizer is on" in broker.log_path.read_text()
