//! The SQLite backend of the effectively-once sink.
//!
//! Dedup keys live in `tidelog_dedup(producer TEXT, idempotency_key BLOB,
//! applied_at_ms INTEGER)`, primary key (producer, idempotency_key), in the same
//! database as the effect's tables, so that one SQLite transaction covers both.
//!
//! ```no_run
//! # fn demo(record: &tidelog_client::ConsumerRecord) -> Result<(), tidelog_client::sink::SinkError> {
//! use std::time::Duration;
//! use tidelog_client::sink::{sqlite::SqliteSink, DedupWindow, Outcome};
//!
//! let db = rusqlite::Connection::open("balances.db")?;
//! let window = DedupWindow {
//!     session_timeout: Duration::from_secs(45),
//!     rebalance_time: Duration::from_secs(15),
//! };
//! let mut sink = SqliteSink::open(db, window)?;
//! let outcome = sink.apply(record, |tx| {
//!     tx.execute("UPDATE balances SET cents = cents + 250 WHERE id = 1", [])
//! })?;
//! assert!(matches!(outcome, Outcome::Applied | Outcome::Duplicate));
//! # Ok(())
//! # }
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, Transaction};

use super::{DedupKey, DedupWindow, Outcome, ReplayGuard, SinkError};
use crate::consumer::ConsumerRecord;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS tidelog_dedup (
    producer TEXT NOT NULL,
    idempotency_key BLOB NOT NULL,
    applied_at_ms INTEGER NOT NULL,
    PRIMARY KEY (producer, idempotency_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tidelog_dedup_by_age ON tidelog_dedup (applied_at_ms);";

/// Applies records effectively-once to a SQLite database.
pub struct SqliteSink {
    db: Connection,
    window: DedupWindow,
    replays: ReplayGuard,
    last_expiry_ms: i64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl SqliteSink {
    /// Uses `db` (creating the dedup table when missing) with keys kept for `window`.
    pub fn open(db: Connection, window: DedupWindow) -> Result<SqliteSink, SinkError> {
        db.execute_batch(SCHEMA)?;
        Ok(SqliteSink {
            db,
            window,
            replays: ReplayGuard::default(),
            last_expiry_ms: 0,
        })
    }

    /// The database, for reads and for setting up the effect's tables.
    pub fn db(&self) -> &Connection {
        &self.db
    }

    /// Replaces the window, e.g. after the consumer measured a longer rebalance.
    pub fn set_window(&mut self, window: DedupWindow) {
        self.window = window;
    }

    /// Applies `record` once: in one transaction, records its dedup key and runs
    /// `effect`, which returns the number of rows it changed. A known key is
    /// [`Outcome::Duplicate`] and runs nothing; an effect that changed no row rolls back
    /// (key included) and is [`SinkError::NoOpEffect`]; an effect's error rolls back too.
    pub fn apply<F>(&mut self, record: &ConsumerRecord, effect: F) -> Result<Outcome, SinkError>
    where
        F: FnOnce(&Transaction<'_>) -> rusqlite::Result<usize>,
    {
        self.apply_at(record, now_ms(), effect)
    }

    /// [`SqliteSink::apply`] with the wall clock given (ms since the epoch).
    pub fn apply_at<F>(
        &mut self,
        record: &ConsumerRecord,
        now_ms: i64,
        effect: F,
    ) -> Result<Outcome, SinkError>
    where
        F: FnOnce(&Transaction<'_>) -> rusqlite::Result<usize>,
    {
        let key = DedupKey::of(record)?;
        self.replays.check(record, self.window.length(), now_ms);
        self.expire_when_due(now_ms)?;
        // Dropping the transaction without commit rolls it back.
        let tx = self.db.transaction()?;
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO tidelog_dedup (producer, idempotency_key, applied_at_ms) \
             VALUES (?1, ?2, ?3)",
            params![key.producer, key.idempotency_key, now_ms],
        )?;
        if inserted == 0 {
            return Ok(Outcome::Duplicate);
        }
        let changed = effect(&tx)?;
        if changed == 0 {
            return Err(SinkError::NoOpEffect {
                key: key.to_string(),
            });
        }
        tx.commit()?;
        Ok(Outcome::Applied)
    }

    /// Whether `key` is remembered.
    pub fn contains(&self, key: &DedupKey) -> Result<bool, SinkError> {
        let n: i64 = self.db.query_row(
            "SELECT count(*) FROM tidelog_dedup WHERE producer = ?1 AND idempotency_key = ?2",
            params![key.producer, key.idempotency_key],
            |row| row.get(0),
        )?;
        Ok(n > 0)
    }

    /// Forgets keys applied longer than the window before `now_ms`; returns how many.
    pub fn expire_keys(&mut self, now_ms: i64) -> Result<usize, SinkError> {
        let window_ms = i64::try_from(self.window.length().as_millis()).unwrap_or(i64::MAX);
        self.last_expiry_ms = now_ms;
        Ok(self.db.execute(
            "DELETE FROM tidelog_dedup WHERE applied_at_ms < ?1",
            params![now_ms.saturating_sub(window_ms)],
        )?)
    }

    /// Expires at most every half window, so the table stays near one window of keys.
    fn expire_when_due(&mut self, now_ms: i64) -> Result<(), SinkError> {
        let half = self.window.length() / 2;
        let half_ms =
            i64::try_from(half.max(Duration::from_secs(1)).as_millis()).unwrap_or(i64::MAX);
        if now_ms.saturating_sub(self.last_expiry_ms) >= half_ms {
            self.expire_keys(now_ms)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::sink::tests::record;

    fn sink() -> SqliteSink {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(
            "CREATE TABLE balances(id INTEGER PRIMARY KEY, cents INTEGER);
             INSERT INTO balances VALUES (1, 0);",
        )
        .unwrap();
        let window = DedupWindow {
            session_timeout: Duration::from_secs(45),
            rebalance_time: Duration::from_secs(15),
        };
        SqliteSink::open(db, window).unwrap()
    }

    fn credit(
        account: i64,
        cents: i64,
    ) -> impl FnOnce(&Transaction<'_>) -> rusqlite::Result<usize> {
        move |tx| {
            tx.execute(
                "UPDATE balances SET cents = cents + ?1 WHERE id = ?2",
                params![cents, account],
            )
        }
    }

    fn balance(sink: &SqliteSink, account: i64) -> i64 {
        sink.db()
            .query_row("SELECT cents FROM balances WHERE id = ?1", [account], |r| {
                r.get(0)
            })
            .unwrap()
    }

    const NOW: i64 = 1_000_000;

    #[test]
    fn normal_apply_then_the_same_delivery_is_a_duplicate() {
        let mut sink = sink();
        let r = record(
            7,
            &[("idempotency-key", "txn-9"), ("producer-id", "p7")],
            4000,
        );
        assert_eq!(
            sink.apply_at(&r, NOW, credit(1, 250)).unwrap(),
            Outcome::Applied
        );
        assert_eq!(
            sink.apply_at(&r, NOW, credit(1, 250)).unwrap(),
            Outcome::Duplicate
        );
        assert_eq!(balance(&sink, 1), 250);
    }

    #[test]
    fn redelivery_at_a_different_offset_is_a_duplicate() {
        // Unclean election: the log was truncated, the idempotent producer re-sent, and
        // the same logical payment now sits at offset 3 instead of 7.
        let mut sink = sink();
        let first = record(7, &[("idempotency-key", "txn-9")], 4000);
        let resent = record(3, &[("idempotency-key", "txn-9")], 4000);
        assert_eq!(
            sink.apply_at(&first, NOW, credit(1, 250)).unwrap(),
            Outcome::Applied
        );
        assert_eq!(
            sink.apply_at(&resent, NOW, credit(1, 250)).unwrap(),
            Outcome::Duplicate
        );
        assert_eq!(balance(&sink, 1), 250);
    }

    #[test]
    fn an_effect_matching_no_row_rolls_back_and_leaves_no_key() {
        let mut sink = sink();
        let orphan = record(
            8,
            &[("idempotency-key", "txn-10"), ("producer-id", "p7")],
            4000,
        );
        let err = sink.apply_at(&orphan, NOW, credit(999, 250)).unwrap_err();
        assert!(
            matches!(err, SinkError::NoOpEffect { ref key } if key == "p7:txn-10"),
            "{err}"
        );
        assert!(!sink.contains(&DedupKey::of(&orphan).unwrap()).unwrap());
        // The redelivery, once the account exists, is applied rather than refused.
        sink.db()
            .execute("INSERT INTO balances VALUES (999, 0)", [])
            .unwrap();
        assert_eq!(
            sink.apply_at(&orphan, NOW, credit(999, 250)).unwrap(),
            Outcome::Applied
        );
        assert_eq!(balance(&sink, 999), 250);
    }

    #[test]
    fn a_failing_effect_rolls_back_its_key_too() {
        let mut sink = sink();
        let r = record(
            1,
            &[("idempotency-key", "txn-11"), ("producer-id", "p7")],
            4000,
        );
        let failed = sink.apply_at(&r, NOW, |tx| tx.execute("UPDATE nowhere SET x = 1", []));
        assert!(matches!(failed, Err(SinkError::Sqlite(_))));
        assert!(!sink.contains(&DedupKey::of(&r).unwrap()).unwrap());
    }

    #[test]
    fn keys_expire_after_the_window_and_not_before() {
        let mut sink = sink();
        let r = record(
            1,
            &[("idempotency-key", "txn-12"), ("producer-id", "p7")],
            4000,
        );
        sink.apply_at(&r, NOW, credit(1, 1)).unwrap();
        assert_eq!(sink.expire_keys(NOW + 59_000).unwrap(), 0);
        assert_eq!(sink.expire_keys(NOW + 61_000).unwrap(), 1);
        assert!(!sink.contains(&DedupKey::of(&r).unwrap()).unwrap());
    }
}
