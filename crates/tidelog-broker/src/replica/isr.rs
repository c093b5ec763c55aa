//! The leader's background duties: ISR shrink (followers not caught up within
//! `replica.lag.time.max.ms`) and expand (followers that reached the high watermark and
//! are caught up by the same rule),
//! both asked of the controller with AlterPartition, one change in flight per
//! partition; and the periodic high-watermark checkpoint
//! (`replica.high.watermark.checkpoint.interval.ms`).

use std::sync::Arc;
use std::time::Duration;

use tidelog_controller::ops::AlterPartition;
use tokio::sync::watch;

use super::partition::Partition;
use super::state::{PendingIsr, ReplicaState};
use crate::context::{now_ms, Ctx};
use crate::settings;

/// Runs until `shutdown` turns true.
pub(crate) async fn run(ctx: Ctx, mut shutdown: watch::Receiver<bool>) {
    let lag_max_ms = ctx.config.get(settings::REPLICA_LAG_TIME_MAX_MS).max(1);
    let tick = check_period(lag_max_ms);
    let checkpoint_every = ctx
        .config
        .duration(settings::REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS)
        .max(Duration::from_millis(100));
    let mut last_checkpoint = tokio::time::Instant::now();
    let mut last_check_ms = now_ms();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = ctx.replicas.isr_wake.notified() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let now = now_ms();
        let allow_shrink = !stalled(last_check_ms, now, lag_max_ms);
        if !allow_shrink {
            tracing::info!(
                gap_ms = now - last_check_ms,
                "this node did not run for longer than replica.lag.time.max.ms; \
                 followers get one check period to fetch before any leaves an ISR"
            );
        }
        last_check_ms = now;
        check_isrs(&ctx, now, lag_max_ms, allow_shrink);
        if last_checkpoint.elapsed() >= checkpoint_every {
            last_checkpoint = tokio::time::Instant::now();
            let ctx = Arc::clone(&ctx);
            let _ = tokio::task::spawn_blocking(move || checkpoint_all(&ctx)).await;
        }
    }
}

/// Kafka checks at half the lag bound, so a laggard leaves within 1.5x of it.
fn check_period(lag_max_ms: i64) -> Duration {
    Duration::from_millis(
        u64::try_from(lag_max_ms / 2)
            .unwrap_or(1000)
            .clamp(50, 5_000),
    )
}

/// Whether the check last ran more than the lag bound before `now_ms`: the node itself
/// was stopped or starved (SIGSTOP, a frozen VM, a saturated machine), so its followers'
/// fetches could not be served either and their caught-up times say nothing about them.
fn stalled(last_check_ms: i64, now_ms: i64, lag_max_ms: i64) -> bool {
    now_ms.saturating_sub(last_check_ms) > lag_max_ms
}

/// Asks for every ISR change due now (expansions only, unless `allow_shrink`).
fn check_isrs(ctx: &Ctx, now: i64, lag_max_ms: i64, allow_shrink: bool) {
    let image = ctx.metadata.image();
    for p in ctx.replicas.all() {
        let st = p.replica_state();
        let Ok(offsets) = p.offsets() else { continue };
        let Some(pending) = isr_change_to_ask(&st, offsets.high_watermark, now, lag_max_ms, |r| {
            image.is_broker_live(r)
        }) else {
            continue;
        };
        let removes = st.isr.iter().any(|r| !pending.new_isr.contains(r));
        if removes && !allow_shrink {
            continue;
        }
        // Marked pending here, not in the task: a wake-up arriving before the task ran
        // would otherwise send the same change twice (the second one refused as stale,
        // after clearing the first one's pending mark).
        if !p.begin_isr_change(&st, pending.clone()) {
            continue;
        }
        let ctx = Arc::clone(ctx);
        let retry_ms = i64::try_from(check_period(lag_max_ms).as_millis()).unwrap_or(1_000);
        tokio::spawn(async move { alter_isr(&ctx, &p, &st, pending, retry_ms).await });
    }
}

/// The ISR change a leader should ask the controller for now, if any: none while one is
/// in flight or backing off. A follower fenced since its last fetch (killed, session
/// expired) still looks caught up for up to the lag bound; the controller would refuse
/// it (INELIGIBLE_REPLICA), so it is left out (`is_live` says who is registered and
/// unfenced in the leader's image).
pub(crate) fn isr_change_to_ask(
    st: &ReplicaState,
    high_watermark: i64,
    now: i64,
    lag_max_ms: i64,
    is_live: impl Fn(i32) -> bool,
) -> Option<PendingIsr> {
    if !st.is_leader() || st.pending_isr.is_some() || now < st.isr_retry_at_ms {
        return None;
    }
    let wanted = st.wanted_isr_change(high_watermark, now, lag_max_ms)?;
    let removes = st.isr.iter().any(|r| !wanted.contains(r));
    let new_isr: Vec<i32> = wanted
        .into_iter()
        .filter(|r| st.isr.contains(r) || *r == st.node_id || is_live(*r))
        .collect();
    if !removes && new_isr.iter().all(|r| st.isr.contains(r)) {
        return None;
    }
    Some(PendingIsr {
        new_isr,
        from_partition_epoch: st.partition_epoch,
    })
}

/// What a failed AlterPartition means for the change in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlterFailure {
    /// The controller refused it and wrote nothing: forget it, ask again later.
    NotApplied,
    /// Refused because the controller's partition state is newer than this leader's:
    /// an image is on its way, and it settles the change either way.
    AwaitImage,
    /// No answer, or one that does not say (a timeout, the controller moving): it may
    /// have been written. Kept, so that the high watermark still waits for the members
    /// it adds (the controller may already count them in sync, and elect one), and sent
    /// again until an answer or an image settles it.
    Unknown,
}

/// Classifies a failed AlterPartition by its error code (`None`: no answer at all).
/// Kafka's leader likewise resets its pending ISR only on refusals that say nothing
/// was applied, and retries the others.
pub(crate) fn alter_failure(code: Option<i16>) -> AlterFailure {
    use kafka_protocol::error::ResponseError as E;
    let Some(code) = code else {
        return AlterFailure::Unknown;
    };
    let is = |e: E| e.code() == code;
    if is(E::FencedLeaderEpoch) || is(E::InvalidUpdateVersion) {
        AlterFailure::AwaitImage
    } else if is(E::UnknownTopicOrPartition)
        || is(E::UnknownTopicId)
        || is(E::InvalidRequest)
        || is(E::IneligibleReplica)
        || is(E::StaleBrokerEpoch)
        || is(E::BrokerIdNotRegistered)
        || is(E::OperationNotAttempted)
    {
        AlterFailure::NotApplied
    } else {
        AlterFailure::Unknown
    }
}

async fn alter_isr(
    ctx: &Ctx,
    p: &Arc<Partition>,
    st: &ReplicaState,
    pending: PendingIsr,
    retry_ms: i64,
) {
    let new_isr = pending.new_isr.clone();
    let shrink = st.isr.iter().any(|r| !new_isr.contains(r));
    tracing::info!(
        topic = %p.topic, partition = p.index, isr = ?st.isr, new_isr = ?new_isr,
        leader_epoch = st.leader_epoch, "asking the controller to change the ISR"
    );
    loop {
        let (why, code) = match send_alter_partition(ctx, p, st, new_isr.clone()).await {
            Ok(partition_epoch) if partition_epoch > st.partition_epoch => {
                // Counted (isr_shrinks / isr_expands) when the image shows it, with the
                // controller's own changes. The pending change stays until then.
                tracing::debug!(topic = %p.topic, partition = p.index, shrink, "ISR change accepted");
                return;
            }
            Ok(_) => {
                // Accepted as a no-op: no image will carry a new partition epoch to
                // clear the mark, and a mark left in place would block every later change.
                p.clear_pending_isr(&pending, 0);
                return;
            }
            Err(failed) => failed,
        };
        match alter_failure(code) {
            AlterFailure::NotApplied => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %why, "ISR change refused");
                // Not again at once: the check after `retry_ms` asks again, whatever
                // wakes it sooner.
                p.clear_pending_isr(&pending, now_ms().saturating_add(retry_ms));
                return;
            }
            AlterFailure::AwaitImage => {
                tracing::info!(topic = %p.topic, partition = p.index, error = %why, "ISR change refused as stale; the next image settles it");
                return;
            }
            AlterFailure::Unknown => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %why, "ISR change unanswered; asking again");
                let wait = u64::try_from(retry_ms).unwrap_or(1_000);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                // An image (or a new role) settled it meanwhile: nothing left to ask.
                if p.replica_state().pending_isr.as_ref() != Some(&pending) {
                    return;
                }
            }
        }
    }
}

/// The AlterPartition call to the controller quorum, bounded by
/// `controller.quorum.request.timeout.ms` (x3, for a forward and an election). A
/// cluster of one has no controller to ask (and no followers, so never gets here).
async fn send_alter_partition(
    ctx: &Ctx,
    p: &Partition,
    st: &ReplicaState,
    new_isr: Vec<i32>,
) -> Result<i32, (String, Option<i16>)> {
    let controller = ctx.metadata.controller();
    let req = AlterPartition {
        broker_id: ctx.node_id(),
        broker_epoch: ctx.metadata.broker_epoch(),
        topic_id: p.topic_id,
        partition: p.index,
        leader_epoch: st.leader_epoch,
        partition_epoch: st.partition_epoch,
        new_isr,
    };
    let timeout = ctx
        .config
        .duration(settings::CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS)
        .saturating_mul(3);
    match tokio::time::timeout(timeout, controller.alter_partition(req)).await {
        Ok(Ok(image)) => {
            tracing::info!(
                topic = %p.topic, partition = p.index, isr = ?image.isr,
                partition_epoch = image.partition_epoch, "controller changed the ISR"
            );
            Ok(image.partition_epoch)
        }
        Ok(Err(e)) => Err((
            format!("{e} (code {})", e.error_code()),
            Some(e.error_code()),
        )),
        Err(_) => Err((
            format!("no answer from the controller within {timeout:?}"),
            None,
        )),
    }
}

/// Writes the offset checkpoints of every partition whose HW moved.
fn checkpoint_all(ctx: &Ctx) {
    ctx.replicas.checkpoint_high_watermarks(&ctx.replicas.all());
}

#[cfg(test)]
mod tests {
    use super::{alter_failure, stalled, AlterFailure};
    use kafka_protocol::error::ResponseError as E;

    #[test]
    fn only_refusals_that_wrote_nothing_drop_a_pending_isr_change() {
        assert_eq!(alter_failure(None), AlterFailure::Unknown, "no answer");
        for unknown in [E::RequestTimedOut, E::NotController, E::UnknownServerError] {
            assert_eq!(alter_failure(Some(unknown.code())), AlterFailure::Unknown);
        }
        for stale in [E::FencedLeaderEpoch, E::InvalidUpdateVersion] {
            assert_eq!(alter_failure(Some(stale.code())), AlterFailure::AwaitImage);
        }
        for refused in [E::IneligibleReplica, E::InvalidRequest, E::StaleBrokerEpoch] {
            assert_eq!(
                alter_failure(Some(refused.code())),
                AlterFailure::NotApplied
            );
        }
    }

    #[test]
    fn a_check_gap_beyond_the_lag_bound_means_this_node_stalled() {
        assert!(!stalled(10_000, 11_000, 2_000), "one check period");
        assert!(!stalled(10_000, 12_000, 2_000));
        assert!(stalled(10_000, 12_001, 2_000), "stopped past the lag bound");
        assert!(
            !stalled(10_000, 9_000, 2_000),
            "the wall clock stepped back"
        );
    }
}
