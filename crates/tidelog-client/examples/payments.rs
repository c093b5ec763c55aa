//! Consumes payments and credits balances effectively-once, in SQLite or (with
//! `--postgres CONFIG`) in PostgreSQL.
//!
//! Each record's value is `ACCOUNT:CENTS`; its headers carry `producer-id` and
//! `idempotency-key`, minted by the producer once per payment. Delivery is
//! at-least-once (offsets are committed after the batch is applied), and the sink makes
//! every redelivery a no-op, so a crash between applying and committing applies nothing
//! twice.
//!
//! ```text
//! tidelog serve &
//! tidelog topic create payments --partitions 3
//! echo 1:250 | kcat -P -b 127.0.0.1:9092 -t payments -H producer-id=shop -H idempotency-key=pay-1
//! cargo run --release -p tidelog-client --example payments -- 127.0.0.1:9092 balances.db
//! # or, into PostgreSQL (a libpq-style string or a postgresql:// URL):
//! cargo run --release -p tidelog-client --example payments -- \
//!     --postgres 'host=127.0.0.1 user=postgres dbname=postgres' 127.0.0.1:9092
//! ```
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use tidelog_client::sink::postgres::PostgresSink;
use tidelog_client::sink::sqlite::SqliteSink;
use tidelog_client::sink::{DedupWindow, Outcome, SinkError};
use tidelog_client::{Client, Consumer, ConsumerConfig, ConsumerRecord, OffsetReset};

/// What to run.
pub struct Options {
    pub bootstrap: String,
    /// The SQLite file, when `postgres` is not set.
    pub database: String,
    /// A PostgreSQL connection string: the balances go there instead of SQLite.
    pub postgres: Option<String>,
    pub topic: String,
    pub group: String,
    /// Stop after this long without a record.
    pub idle_exit: Duration,
    /// Test hook: after applying this many records, stop at once without committing,
    /// as a crash between the database commit and the offset commit would.
    pub crash_after: Option<usize>,
}

/// What one run did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub applied: usize,
    pub duplicates: usize,
    pub refused: usize,
}

/// The balances and the sink in front of them.
enum Ledger {
    Sqlite(SqliteSink),
    Postgres(PostgresSink),
}

impl Ledger {
    /// Opens the balances (ten accounts, created at 0 when missing) and the sink.
    async fn open(
        options: &Options,
        window: DedupWindow,
    ) -> Result<Ledger, Box<dyn std::error::Error>> {
        if let Some(config) = &options.postgres {
            let sink = PostgresSink::connect(config, window).await?;
            sink.client()
                .batch_execute(
                    "CREATE TABLE IF NOT EXISTS balances (id BIGINT PRIMARY KEY, cents BIGINT NOT NULL);
                     INSERT INTO balances SELECT g, 0 FROM generate_series(1, 10) AS g
                       ON CONFLICT (id) DO NOTHING;",
                )
                .await?;
            return Ok(Ledger::Postgres(sink));
        }
        let db = rusqlite::Connection::open(&options.database)?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS balances (id INTEGER PRIMARY KEY, cents INTEGER NOT NULL);
             INSERT OR IGNORE INTO balances SELECT value, 0 FROM
               (WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n WHERE value < 10)
                SELECT value FROM n);",
        )?;
        Ok(Ledger::Sqlite(SqliteSink::open(db, window)?))
    }

    fn set_window(&mut self, window: DedupWindow) {
        match self {
            Ledger::Sqlite(sink) => sink.set_window(window),
            Ledger::Postgres(sink) => sink.set_window(window),
        }
    }

    /// Credits `cents` to `account` once per payment.
    async fn credit(
        &mut self,
        record: &ConsumerRecord,
        account: i64,
        cents: i64,
    ) -> Result<Outcome, SinkError> {
        match self {
            Ledger::Sqlite(sink) => sink.apply(record, |tx| {
                tx.execute(
                    "UPDATE balances SET cents = cents + ?1 WHERE id = ?2",
                    (cents, account),
                )
            }),
            Ledger::Postgres(sink) => {
                sink.apply(record, |tx| {
                    Box::pin(async move {
                        tx.execute(
                            "UPDATE balances SET cents = cents + $1 WHERE id = $2",
                            &[&cents, &account],
                        )
                        .await
                    })
                })
                .await
            }
        }
    }
}

pub async fn run(options: &Options) -> Result<Totals, Box<dyn std::error::Error>> {
    let mut config = ConsumerConfig::for_group(&options.group);
    config.auto_offset_reset = OffsetReset::Earliest;
    config.enable_auto_commit = false;
    // A static member: a restart takes its old place without waiting for a rebalance.
    config.group_instance_id = Some(format!("{}-1", options.group));
    config.session_timeout = Duration::from_secs(10);
    config.heartbeat_interval = Duration::from_secs(1);
    let mut consumer = Consumer::new(Client::connect_to(&options.bootstrap).await?, config)?;
    consumer.subscribe(&[options.topic.as_str()])?;
    let mut ledger = Ledger::open(options, DedupWindow::of_consumer(&consumer)).await?;

    let mut totals = Totals::default();
    let mut last_record = Instant::now();
    while last_record.elapsed() < options.idle_exit {
        let records = consumer.poll(Duration::from_millis(200)).await?;
        if records.is_empty() {
            continue;
        }
        last_record = Instant::now();
        ledger.set_window(DedupWindow::of_consumer(&consumer));
        for record in &records {
            let Some((account, cents)) = parse(record.value.as_deref()) else {
                totals.refused += 1;
                continue;
            };
            match ledger.credit(record, account, cents).await {
                Ok(Outcome::Applied) => totals.applied += 1,
                Ok(Outcome::Duplicate) => totals.duplicates += 1,
                // No such account, or no dedup key: not applied, and not retried here.
                Err(e @ (SinkError::NoOpEffect { .. } | SinkError::NoIdempotencyKey { .. })) => {
                    eprintln!("skipped: {e}");
                    totals.refused += 1;
                }
                Err(e) => return Err(e.into()),
            }
            if options.crash_after == Some(totals.applied) {
                // Applied in the database, offsets not committed: drop everything.
                drop(consumer);
                return Ok(totals);
            }
        }
        consumer.commit_sync().await?;
    }
    consumer.close().await?;
    Ok(totals)
}

fn parse(value: Option<&[u8]>) -> Option<(i64, i64)> {
    let text = std::str::from_utf8(value?).ok()?;
    let (account, cents) = text.trim().split_once(':')?;
    Some((account.parse().ok()?, cents.parse().ok()?))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut postgres = None;
    let mut positional = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--postgres" {
            postgres = Some(args.next().ok_or("--postgres needs a connection string")?);
        } else {
            positional.push(arg);
        }
    }
    let mut positional = positional.into_iter();
    let options = Options {
        bootstrap: positional.next().unwrap_or_else(|| "127.0.0.1:9092".into()),
        database: positional.next().unwrap_or_else(|| "balances.db".into()),
        postgres,
        topic: "payments".into(),
        group: "payments-sink".into(),
        idle_exit: Duration::from_secs(10),
        crash_after: None,
    };
    let totals = run(&options).await?;
    println!(
        "applied {} duplicates {} refused {}",
        totals.applied, totals.duplicates, totals.refused
    );
    Ok(())
}
