//! OAUTHBEARER's server side as Kafka's OAuthBearerValidatorCallbackHandler (KIP-768)
//! does it: the token is a JWT signed by a key of the JWKS at
//! `sasl.oauthbearer.jwks.endpoint.url`, checked with the `sasl.oauthbearer.*` rules
//! (`tidelog_sasl::oauthbearer::jwt`); the principal is `User:<sub claim>`.
//!
//! The key set is read when first needed, again every
//! `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and again when a token names a `kid`
//! the set lacks (a key rotation), at most once per [`KID_REFRESH_INTERVAL`] so that
//! tokens with made-up kids cannot make the broker hammer the identity provider. A
//! failed read keeps the keys it had and waits (the retry backoff settings) before
//! the next try. No part of a token is ever logged.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tidelog_sasl::oauthbearer::jwks::Jwks;
use tidelog_sasl::oauthbearer::jwt::{JwtError, Rules, SignedJwt, ValidToken};

use super::jwks_fetch::JwksSource;

/// The least time between two reads of the key set caused by unknown kids.
pub(crate) const KID_REFRESH_INTERVAL: Duration = Duration::from_secs(10);

/// The Kafka class whose behaviour this is; the only server callback handler a
/// listener's OAUTHBEARER may name.
pub(crate) const VALIDATOR_CLASS: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";

/// How keys are read and re-read.
#[derive(Debug, Clone)]
pub(crate) struct RefreshPolicy {
    pub(crate) every: Duration,
    pub(crate) backoff: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) kid_interval: Duration,
}

#[derive(Default)]
struct RefreshState {
    /// When the key set was last read successfully.
    loaded_at: Option<Instant>,
    /// When an unknown kid last caused a read.
    kid_refresh_at: Option<Instant>,
    /// Failed reads in a row, and when the next may be tried.
    failures: u32,
    retry_at: Option<Instant>,
}

pub(crate) struct OAuthValidator {
    rules: Rules,
    source: JwksSource,
    /// What the listener's settings call it (for log lines).
    url: String,
    policy: RefreshPolicy,
    keys: RwLock<Option<Arc<Jwks>>>,
    refresh: tokio::sync::Mutex<RefreshState>,
}

impl std::fmt::Debug for OAuthValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthValidator")
            .field("url", &self.url)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

impl OAuthValidator {
    pub(crate) fn new(
        rules: Rules,
        source: JwksSource,
        url: String,
        policy: RefreshPolicy,
    ) -> Self {
        OAuthValidator {
            rules,
            source,
            url,
            policy,
            keys: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(RefreshState::default()),
        }
    }

    /// Reads the key set before the listener serves. A `file://` set that cannot be
    /// read stops start-up; an HTTP one is only logged (an identity provider that is
    /// down must not keep the broker down) and tried again when a token comes.
    pub(crate) async fn load_at_start(&self) -> Result<(), String> {
        let mut state = self.refresh.lock().await;
        match self.reload(&mut state).await {
            Ok(()) => Ok(()),
            Err(why) if matches!(self.source, JwksSource::File(_)) => Err(why),
            Err(_) => Ok(()),
        }
    }

    /// Checks a token; the reason it is refused is for the debug log.
    pub(crate) async fn validate(&self, token: &str) -> Result<ValidToken, String> {
        let jwt = SignedJwt::decode(token).map_err(|e| e.to_string())?;
        let keys = self
            .keys_in_force()
            .await
            .ok_or("no JWKS could be read yet")?;
        match jwt.verify(&keys) {
            Err(JwtError::UnknownKid) => {
                let fresher = self.keys_with_kid(jwt.kid().unwrap_or_default()).await;
                jwt.verify(&fresher).map_err(|e| e.to_string())?;
            }
            other => other.map_err(|e| e.to_string())?,
        }
        jwt.check_claims(&self.rules, unix_millis())
            .map_err(|e| e.to_string())
    }

    fn current(&self) -> Option<Arc<Jwks>> {
        self.keys.read().ok().and_then(|keys| keys.clone())
    }

    /// The keys to check with, read again first when they are due (and no other
    /// connection is reading them right now: then the old ones serve).
    async fn keys_in_force(&self) -> Option<Arc<Jwks>> {
        let current = self.current();
        let state = if current.is_none() {
            Some(self.refresh.lock().await)
        } else {
            self.refresh.try_lock().ok()
        };
        if let Some(mut state) = state {
            let now = Instant::now();
            let stale = state
                .loaded_at
                .is_none_or(|at| now.duration_since(at) >= self.policy.every);
            let may_try = state.retry_at.is_none_or(|at| now >= at);
            if stale && may_try {
                let _ = self.reload(&mut state).await;
            }
        }
        self.current()
    }

    /// The keys after a read caused by `kid` not being in them, if one is allowed now.
    async fn keys_with_kid(&self, kid: &str) -> Arc<Jwks> {
        let mut state = self.refresh.lock().await;
        let current = self.current().unwrap_or_default();
        if current.has_kid(kid) {
            // Another connection's read brought it meanwhile.
            return current;
        }
        let now = Instant::now();
        let allowed = state
            .kid_refresh_at
            .is_none_or(|at| now.duration_since(at) >= self.policy.kid_interval);
        if !allowed {
            return current;
        }
        state.kid_refresh_at = Some(now);
        tracing::debug!(url = %self.url, "a token names a kid the JWKS lacks; reading the JWKS again");
        let _ = self.reload(&mut state).await;
        self.current().unwrap_or_default()
    }

    /// Reads and parses the key set; on success it replaces the old one.
    async fn reload(&self, state: &mut RefreshState) -> Result<(), String> {
        let read = self.source.read().await;
        let parsed = read.and_then(|bytes| Jwks::parse(&bytes).map_err(|e| e.to_string()));
        let now = Instant::now();
        match parsed {
            Ok(jwks) => {
                if state.failures > 0 {
                    tracing::info!(url = %self.url, keys = jwks.keys().len(), "the JWKS is read again");
                } else {
                    tracing::debug!(url = %self.url, keys = jwks.keys().len(), skipped = jwks.skipped(), "JWKS read");
                }
                if jwks.keys().is_empty() {
                    tracing::warn!(url = %self.url, skipped = jwks.skipped(), "the JWKS has no RSA or EC (P-256, P-384) signature key: no token can be accepted");
                }
                if let Ok(mut keys) = self.keys.write() {
                    *keys = Some(Arc::new(jwks));
                }
                state.loaded_at = Some(now);
                state.failures = 0;
                state.retry_at = None;
                Ok(())
            }
            Err(why) => {
                if state.failures == 0 {
                    tracing::warn!(url = %self.url, "cannot read the JWKS ({why}); keeping the keys read before, if any");
                }
                state.failures = state.failures.saturating_add(1);
                let doublings = state.failures.saturating_sub(1).min(20);
                let wait = self
                    .policy
                    .backoff
                    .saturating_mul(1 << doublings)
                    .min(self.policy.backoff_max);
                state.retry_at = Some(now + wait);
                Err(why)
            }
        }
    }
}

/// The wall clock in Unix milliseconds (what token times are compared with).
pub(crate) fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
