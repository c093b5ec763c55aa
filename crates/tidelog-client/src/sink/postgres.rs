//! The PostgreSQL backend of the effectively-once sink (tokio-postgres).
//!
//! Dedup keys live in `tidelog_dedup(producer TEXT, idempotency_key BYTEA,
//! applied_at_ms BIGINT)`, primary key (producer, idempotency_key), in the same
//! database as the effect's tables, so that one PostgreSQL transaction covers both.
//! The key goes in with `INSERT ... ON CONFLICT (producer, idempotency_key) DO NOTHING`
//! and the duplicate decision is its row count, inside the transaction that then runs
//! the effect. Two consumers racing on one key are serialised by the primary key: the
//! second insert waits for the first transaction and inserts nothing if it committed
//! (a duplicate), or inserts the key if it rolled back.
//!
//! ```no_run
//! # async fn demo(record: &tidelog_client::ConsumerRecord) -> Result<(), tidelog_client::sink::SinkError> {
//! use std::time::Duration;
//! use tidelog_client::sink::{postgres::PostgresSink, DedupWindow, Outcome};
//!
//! let window = DedupWindow {
//!     session_timeout: Duration::from_secs(45),
//!     rebalance_time: Duration::from_secs(15),
//! };
//! let mut sink = PostgresSink::connect("host=127.0.0.1 user=app dbname=bank", window).await?;
//! let outcome = sink
//!     .apply(record, |tx| {
//!         Box::pin(async move {
//!             tx.execute("UPDATE balances SET cents = cents + 250 WHERE id = 1", &[])
//!                 .await
//!         })
//!     })
//!     .await?;
//! assert!(matches!(outcome, Outcome::Applied | Outcome::Duplicate));
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_postgres::{Client, NoTls, Statement, Transaction};

use super::{DedupKey, DedupWindow, Outcome, ReplayGuard, SinkError};
use crate::consumer::ConsumerRecord;

/// Creates the dedup table and its age index when missing. Run in a transaction holding
/// an advisory lock, so sinks opening at once do not race on `CREATE ... IF NOT EXISTS`
/// (which is not atomic against itself in PostgreSQL).
const SCHEMA: &str = "SELECT pg_advisory_xact_lock(7335348090318620263);
CREATE TABLE IF NOT EXISTS tidelog_dedup (
    producer TEXT NOT NULL,
    idempotency_key BYTEA NOT NULL,
    applied_at_ms BIGINT NOT NULL,
    PRIMARY KEY (producer, idempotency_key)
);
CREATE INDEX IF NOT EXISTS tidelog_dedup_by_age ON tidelog_dedup (applied_at_ms);";

const INSERT_KEY: &str = "INSERT INTO tidelog_dedup (producer, idempotency_key, applied_at_ms) \
     VALUES ($1, $2, $3) ON CONFLICT (producer, idempotency_key) DO NOTHING";
const CONTAINS_KEY: &str =
    "SELECT count(*) FROM tidelog_dedup WHERE producer = $1 AND idempotency_key = $2";
const EXPIRE_KEYS: &str = "DELETE FROM tidelog_dedup WHERE applied_at_ms < $1";

/// How long one database step (connect, open, one `apply`, one expiry) may take by
/// default; see [`PostgresSink::set_timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The future an effect returns: the number of rows it changed, or the database's error.
pub type EffectFuture<'t> =
    Pin<Box<dyn Future<Output = Result<u64, tokio_postgres::Error>> + Send + 't>>;

/// Applies records effectively-once to a PostgreSQL database.
pub struct PostgresSink {
    client: Client,
    insert_key: Statement,
    window: DedupWindow,
    timeout: Duration,
    replays: ReplayGuard,
    last_expiry_ms: i64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Runs `step` for at most `limit`; past it, [`SinkError::PostgresTimeout`].
async fn bounded<T>(
    what: &'static str,
    limit: Duration,
    step: impl Future<Output = Result<T, SinkError>>,
) -> Result<T, SinkError> {
    tokio::time::timeout(limit, step)
        .await
        .map_err(|_| SinkError::PostgresTimeout { what, limit })?
}

impl PostgresSink {
    /// Connects to `config` (a libpq-style `host=... user=...` string or a
    /// `postgresql://` URL) without TLS, runs the connection on the current tokio
    /// runtime, and opens the sink on it. For TLS or other settings, connect yourself
    /// and use [`PostgresSink::open`].
    pub async fn connect(config: &str, window: DedupWindow) -> Result<PostgresSink, SinkError> {
        let mut config: tokio_postgres::Config = config.parse()?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_TIMEOUT);
        }
        let (client, connection) = bounded("connect", DEFAULT_TIMEOUT, async {
            Ok(config.connect(NoTls).await?)
        })
        .await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "postgres sink: connection ended");
            }
        });
        PostgresSink::open(client, window).await
    }

    /// Uses `client` (creating the dedup table when missing) with keys kept for
    /// `window`. The client's connection must be driven by the caller (spawned).
    pub async fn open(client: Client, window: DedupWindow) -> Result<PostgresSink, SinkError> {
        let mut client = client;
        let insert_key = bounded("create the dedup table", DEFAULT_TIMEOUT, async {
            let tx = client.transaction().await?;
            tx.batch_execute(SCHEMA).await?;
            tx.commit().await?;
            Ok(client.prepare(INSERT_KEY).await?)
        })
        .await?;
        Ok(PostgresSink {
            client,
            insert_key,
            window,
            timeout: DEFAULT_TIMEOUT,
            replays: ReplayGuard::default(),
            last_expiry_ms: 0,
        })
    }

    /// The client, for reads and for setting up the effect's tables.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Replaces the window, e.g. after the consumer measured a longer rebalance.
    pub fn set_window(&mut self, window: DedupWindow) {
        self.window = window;
    }

    /// Bounds each `apply` (key, effect and commit together) and each expiry; the
    /// default is [`DEFAULT_TIMEOUT`]. An `apply` that times out is rolled back unless
    /// its commit had already reached the server; either way the redelivery is safe,
    /// since the key and the effect commit together or not at all.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Applies `record` once: in one transaction, records its dedup key and runs
    /// `effect`, whose future returns the number of rows it changed. A known key is
    /// [`Outcome::Duplicate`] and runs nothing; an effect that changed no row rolls back
    /// (key included) and is [`SinkError::NoOpEffect`]; an effect's error rolls back too.
    pub async fn apply<F>(
        &mut self,
        record: &ConsumerRecord,
        effect: F,
    ) -> Result<Outcome, SinkError>
    where
        F: for<'t> FnOnce(&'t Transaction<'t>) -> EffectFuture<'t>,
    {
        self.apply_at(record, now_ms(), effect).await
    }

    /// [`PostgresSink::apply`] with the wall clock given (ms since the epoch).
    pub async fn apply_at<F>(
        &mut self,
        record: &ConsumerRecord,
        now_ms: i64,
        effect: F,
    ) -> Result<Outcome, SinkError>
    where
        F: for<'t> FnOnce(&'t Transaction<'t>) -> EffectFuture<'t>,
    {
        let key = DedupKey::of(record)?;
        self.replays.check(record, self.window.length(), now_ms);
        self.expire_when_due(now_ms).await?;
        let insert_key = self.insert_key.clone();
        let client = &mut self.client;
        bounded("apply", self.timeout, async move {
            // Dropping the transaction without commit rolls it back.
            let tx = client.transaction().await?;
            let inserted = tx
                .execute(&insert_key, &[&key.producer, &key.idempotency_key, &now_ms])
                .await?;
            if inserted == 0 {
                tx.rollback().await?;
                return Ok(Outcome::Duplicate);
            }
            let changed = effect(&tx).await?;
            if changed == 0 {
                tx.rollback().await?;
                return Err(SinkError::NoOpEffect {
                    key: key.to_string(),
                });
            }
            tx.commit().await?;
            Ok(Outcome::Applied)
        })
        .await
    }

    /// Whether `key` is remembered.
    pub async fn contains(&self, key: &DedupKey) -> Result<bool, SinkError> {
        let client = &self.client;
        bounded("contains", self.timeout, async move {
            let row = client
                .query_one(CONTAINS_KEY, &[&key.producer, &key.idempotency_key])
                .await?;
            let n: i64 = row.try_get(0)?;
            Ok(n > 0)
        })
        .await
    }

    /// Forgets keys applied longer than the window before `now_ms`; returns how many.
    pub async fn expire_keys(&mut self, now_ms: i64) -> Result<u64, SinkError> {
        let window_ms = i64::try_from(self.window.length().as_millis()).unwrap_or(i64::MAX);
        self.last_expiry_ms = now_ms;
        let client = &self.client;
        bounded("expire keys", self.timeout, async move {
            Ok(client
                .execute(EXPIRE_KEYS, &[&now_ms.saturating_sub(window_ms)])
                .await?)
        })
        .await
    }

    /// Expires at most every half window, so the table stays near one window of keys.
    async fn expire_when_due(&mut self, now_ms: i64) -> Result<(), SinkError> {
        let half = self.window.length() / 2;
        let half_ms =
            i64::try_from(half.max(Duration::from_secs(1)).as_millis()).unwrap_or(i64::MAX);
        if now_ms.saturating_sub(self.last_expiry_ms) >= half_ms {
            self.expire_keys(now_ms).await?;
        }
        Ok(())
    }
}
