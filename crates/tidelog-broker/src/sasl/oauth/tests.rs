use std::path::Path;

use serde_json::json;
use tidelog_sasl::oauthbearer::test_util::{
    rs256, rsa_jwk as jwk, rsa_key_a, rsa_key_b, RsaKeyPair,
};

use super::*;

/// The test-only keys of tidelog-sasl's unit tests.
fn keys() -> (RsaKeyPair, RsaKeyPair) {
    (rsa_key_a(), rsa_key_b())
}

fn write_jwks(path: &Path, entries: &[serde_json::Value]) {
    std::fs::write(path, json!({ "keys": entries }).to_string()).unwrap();
}

fn token(key: &RsaKeyPair, kid: &str, sub: &str) -> String {
    let now = unix_millis() / 1000;
    let claims = json!({"sub": sub, "aud": "kafka", "iat": now, "exp": now + 600});
    rs256(key, &json!({"alg": "RS256", "kid": kid}), &claims)
}

fn validator(path: &Path, kid_interval: Duration) -> OAuthValidator {
    let rules = Rules {
        expected_audiences: vec!["kafka".into()],
        expected_issuer: None,
        clock_skew_secs: 30,
        sub_claim: "sub".into(),
        scope_claim: "scope".into(),
    };
    let url = format!("file://{}", path.display());
    OAuthValidator::new(
        rules,
        JwksSource::parse(&url).unwrap(),
        url,
        RefreshPolicy {
            every: Duration::from_secs(3600),
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            kid_interval,
        },
    )
}

#[tokio::test]
async fn an_unknown_kid_reads_the_key_set_again_at_most_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    let (a, b) = keys();
    write_jwks(&path, &[jwk(&a, "a")]);
    let v = validator(&path, Duration::from_secs(3600));
    v.load_at_start().await.unwrap();
    assert_eq!(
        v.validate(&token(&a, "a", "alice")).await.unwrap().subject,
        "alice"
    );
    // The provider rotates to key b: the first token with kid b reads the set again.
    write_jwks(&path, &[jwk(&a, "a"), jwk(&b, "b")]);
    assert_eq!(
        v.validate(&token(&b, "b", "bob")).await.unwrap().subject,
        "bob"
    );
    // Another unknown kid within the interval does not read it again (the file has
    // it by now, but the broker does not look).
    write_jwks(&path, &[jwk(&a, "a"), jwk(&b, "b"), jwk(&b, "c")]);
    let refused = v.validate(&token(&b, "c", "carol")).await.unwrap_err();
    assert!(refused.contains("kid"), "{refused}");
    // With the interval passed (zero here) it does.
    let v = validator(&path, Duration::ZERO);
    v.load_at_start().await.unwrap();
    write_jwks(&path, &[jwk(&a, "a"), jwk(&b, "d")]);
    assert_eq!(
        v.validate(&token(&b, "d", "dave")).await.unwrap().subject,
        "dave"
    );
}

#[tokio::test]
async fn a_broken_key_set_keeps_the_keys_read_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    let missing = validator(&path, Duration::ZERO);
    let refused = missing.load_at_start().await.unwrap_err();
    assert!(refused.contains("jwks.json"), "{refused}");
    let (a, b) = keys();
    write_jwks(&path, &[jwk(&a, "a")]);
    let v = validator(&path, Duration::ZERO);
    v.load_at_start().await.unwrap();
    std::fs::write(&path, "{not json").unwrap();
    // The kid-caused read fails; the old key still checks kid a's tokens.
    assert!(v.validate(&token(&b, "b", "bob")).await.is_err());
    assert_eq!(
        v.validate(&token(&a, "a", "alice")).await.unwrap().subject,
        "alice"
    );
    // And a token signed by the wrong key under a known kid is refused.
    let forged = v.validate(&token(&b, "a", "alice")).await.unwrap_err();
    assert!(forged.contains("signature"), "{forged}");
}
