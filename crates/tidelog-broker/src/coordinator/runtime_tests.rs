//! The runtime on an in-memory log with a key-value shard: answers wait for the high
//! watermark, readers see only committed state, a failed append changes nothing, a
//! leadership change answers everyone and drops the state, a load replays the log.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::timeline::Timeline;
use super::{
    CoordinatorError, CoordinatorRuntime, MemoryLog, Now, Outcome, RuntimeConfig, Shard, Write,
};
use tidelog_env::clock::{Clock, ManualClock, SystemClock};

/// `key=value` records; a value of `None` removes the key.
#[derive(Default)]
struct Kv {
    values: Timeline<String, String>,
    ticks: usize,
    unloaded: bool,
    markers: Vec<(i64, bool)>,
}

type KvRecord = (String, Option<String>);

impl Shard for Kv {
    type Record = KvRecord;
    type Effect = String;

    fn encode(record: &KvRecord) -> Result<(Vec<u8>, Option<Vec<u8>>), CoordinatorError> {
        Ok((
            record.0.clone().into_bytes(),
            record.1.clone().map(String::into_bytes),
        ))
    }

    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<KvRecord, String> {
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|e| e.to_string());
        Ok((text(key)?, value.map(text).transpose()?))
    }

    fn replay(&mut self, offset: i64, _producer: Option<i64>, (key, value): KvRecord) {
        match value {
            Some(v) => self.values.insert(offset, key, v),
            None => self.values.remove(offset, &key),
        }
    }

    fn replay_marker(&mut self, _offset: i64, producer_id: i64, commit: bool) {
        self.markers.push((producer_id, commit));
    }

    fn commit(&mut self, offset: i64) {
        self.values.commit(offset);
    }

    fn tick(&mut self, _now: Now) -> Outcome<Self, ()> {
        self.ticks += 1;
        Outcome::answer(())
    }

    fn unload(&mut self) {
        self.unloaded = true;
    }
}

fn set(key: &str, value: &str) -> impl FnOnce(&mut Kv, Now) -> Outcome<Kv, String> {
    let record = (key.to_string(), Some(value.to_string()));
    move |kv: &mut Kv, _| {
        let previous = kv.values.get(&record.0).cloned().unwrap_or_default();
        Outcome::records(vec![record], previous).with_effects(vec!["set".into()])
    }
}

fn runtime(log: &Arc<MemoryLog>) -> (Arc<CoordinatorRuntime<Kv>>, mpsc::Receiver<(i32, String)>) {
    runtime_on(log, Arc::new(SystemClock))
}

fn runtime_on(
    log: &Arc<MemoryLog>,
    clock: Arc<dyn Clock>,
) -> (Arc<CoordinatorRuntime<Kv>>, mpsc::Receiver<(i32, String)>) {
    let (effects_tx, effects_rx) = mpsc::channel(16);
    let config = RuntimeConfig {
        topic: "__kv",
        tick: Duration::from_millis(20),
        write_timeout: Duration::from_millis(300),
        queue: 16,
    };
    let runtime = CoordinatorRuntime::new(
        config,
        Arc::new(Arc::clone(log)),
        clock,
        |_, _| Kv::default(),
        effects_tx,
    );
    let runtime = Arc::new(runtime);
    runtime.lead_only(&HashMap::from([(0, log_epoch())]));
    (runtime, effects_rx)
}

fn log_epoch() -> i32 {
    3
}

async fn wait_loaded(runtime: &CoordinatorRuntime<Kv>) {
    for _ in 0..500 {
        if runtime.is_loaded(0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("the partition never loaded");
}

fn committed(
    runtime: &Arc<CoordinatorRuntime<Kv>>,
    key: &str,
) -> impl std::future::Future<Output = Option<String>> {
    let runtime = Arc::clone(runtime);
    let key = key.to_string();
    async move {
        runtime
            .read(0, move |kv| kv.values.get_committed(&key).cloned())
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn an_answer_waits_for_the_high_watermark_and_readers_for_the_commit() {
    let log = MemoryLog::new(log_epoch(), false);
    let (runtime, mut effects) = runtime(&log);
    wait_loaded(&runtime).await;
    let writer = {
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move { runtime.write(0, set("a", "1")).await })
    };
    for _ in 0..100 {
        if log.log_end() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(log.log_end(), 1, "appended at once");
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(
        !writer.is_finished(),
        "not answered before it is replicated"
    );
    assert_eq!(
        committed(&runtime, "a").await,
        None,
        "not visible before it commits"
    );
    // The next write already builds on it.
    let latest = runtime
        .read(0, |kv| kv.values.get(&"a".to_string()).cloned())
        .await
        .unwrap();
    assert_eq!(latest.as_deref(), Some("1"));
    assert!(
        effects.try_recv().is_err(),
        "effects wait for the commit too"
    );
    log.replicate();
    assert_eq!(writer.await.unwrap(), Ok(String::new()));
    assert_eq!(committed(&runtime, "a").await.as_deref(), Some("1"));
    assert_eq!(effects.recv().await, Some((0, "set".to_string())));
}

#[tokio::test]
async fn a_step_that_writes_nothing_answers_after_what_came_before() {
    let log = MemoryLog::new(log_epoch(), false);
    let (runtime, _effects) = runtime(&log);
    wait_loaded(&runtime).await;
    let first = {
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move { runtime.write(0, set("a", "1")).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = {
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move {
            runtime
                .write(0, |kv: &mut Kv, _| {
                    Outcome::answer(kv.values.get(&"a".to_string()).cloned())
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!second.is_finished(), "it saw an uncommitted value");
    log.replicate();
    assert_eq!(second.await.unwrap(), Ok(Some("1".into())));
    assert!(first.await.unwrap().is_ok());
}

#[tokio::test]
async fn a_failed_append_changes_nothing_and_says_why() {
    let log = MemoryLog::new(log_epoch(), true);
    let (runtime, mut effects) = runtime(&log);
    wait_loaded(&runtime).await;
    runtime.write(0, set("a", "1")).await.unwrap();
    log.fail_appends(true);
    let failed = runtime.write(0, set("a", "2")).await;
    assert!(
        matches!(failed, Err(CoordinatorError::NotAvailable(_))),
        "{failed:?}"
    );
    let latest = runtime
        .read(0, |kv| kv.values.get(&"a".to_string()).cloned())
        .await
        .unwrap();
    assert_eq!(latest.as_deref(), Some("1"));
    assert_eq!(effects.recv().await, Some((0, "set".to_string())));
    assert!(effects.try_recv().is_err(), "no effect of the failed write");
    log.fail_appends(false);
    assert_eq!(runtime.write(0, set("a", "3")).await, Ok("1".into()));
}

#[tokio::test]
async fn a_write_not_replicated_in_time_is_answered_with_a_timeout() {
    let log = MemoryLog::new(log_epoch(), false);
    let (runtime, _effects) = runtime(&log);
    wait_loaded(&runtime).await;
    let outcome = runtime.write(0, set("a", "1")).await;
    assert!(
        matches!(outcome, Err(CoordinatorError::Timeout(_))),
        "{outcome:?}"
    );
    // The record stays: it commits when the high watermark gets there.
    log.replicate();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(committed(&runtime, "a").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn losing_leadership_answers_everyone_and_drops_the_state() {
    let log = MemoryLog::new(log_epoch(), false);
    let (runtime, _effects) = runtime(&log);
    wait_loaded(&runtime).await;
    let writer = {
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move { runtime.write(0, set("a", "1")).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    log.lose_leadership();
    assert_eq!(writer.await.unwrap(), Err(CoordinatorError::NotCoordinator));
    for _ in 0..100 {
        if !runtime.is_loaded(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        runtime.write(0, set("b", "1")).await.err(),
        Some(CoordinatorError::LoadInProgress),
        "the handle stays until the image moves it elsewhere"
    );
    // Once the image moves it elsewhere the handle goes too (the coordinator's own
    // image check answers NOT_COORDINATOR before the runtime is asked).
    runtime.lead_only(&HashMap::new());
    assert!(!runtime.is_loaded(0));
}

#[tokio::test]
async fn a_load_replays_the_log_only_once_it_is_committed() {
    let log = MemoryLog::new(log_epoch(), true);
    {
        let (runtime, _effects) = runtime(&log);
        wait_loaded(&runtime).await;
        runtime.write(0, set("a", "1")).await.unwrap();
        runtime.write(0, set("b", "2")).await.unwrap();
        runtime
            .write(0, |_: &mut Kv, _| {
                Outcome::<Kv, ()>::records(vec![("a".into(), None)], ())
            })
            .await
            .unwrap();
        runtime
            .write(0, |_: &mut Kv, _| Outcome::<Kv, ()> {
                write: Write::Marker {
                    producer_id: 7,
                    producer_epoch: 0,
                    commit: true,
                    coordinator_epoch: 3,
                },
                response: (),
                effects: Vec::new(),
                then: None,
            })
            .await
            .unwrap();
        runtime.stop().await;
    }
    let (runtime, _effects) = runtime(&log);
    wait_loaded(&runtime).await;
    let (a, b, markers) = runtime
        .read(0, |kv| {
            (
                kv.values.get_committed(&"a".to_string()).cloned(),
                kv.values.get_committed(&"b".to_string()).cloned(),
                kv.markers.clone(),
            )
        })
        .await
        .unwrap();
    assert_eq!((a, b.as_deref()), (None, Some("2")));
    assert_eq!(markers, vec![(7, true)]);
    assert_eq!(log.high_watermark(), 4);
}

#[tokio::test]
async fn the_clock_drives_the_shard_and_unload_tells_it() {
    let log = MemoryLog::new(log_epoch(), true);
    let (runtime, _effects) = runtime(&log);
    wait_loaded(&runtime).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ticks = runtime.read(0, |kv| kv.ticks).await.unwrap();
    assert!(ticks >= 2, "{ticks} ticks");
    runtime.stop().await;
}

#[tokio::test]
async fn steps_run_at_the_runtimes_clock() {
    let log = MemoryLog::new(log_epoch(), true);
    let clock = Arc::new(ManualClock::new(1_000));
    let (runtime, _effects) = runtime_on(&log, Arc::clone(&clock) as Arc<dyn Clock>);
    wait_loaded(&runtime).await;
    let seen = || {
        let runtime = Arc::clone(&runtime);
        async move {
            runtime
                .write(0, |_: &mut Kv, now: Now| Outcome::<Kv, i64>::answer(now.ms))
                .await
                .unwrap()
        }
    };
    assert_eq!(seen().await, 1_000);
    clock.advance(Duration::from_secs(5));
    assert_eq!(seen().await, 6_000);
    runtime.stop().await;
}
