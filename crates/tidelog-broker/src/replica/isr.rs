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
        if !st.is_leader() || st.pending_isr.is_some() || now < st.isr_retry_at_ms {
            continue;
        }
        let Ok(offsets) = p.offsets() else { continue };
        if let Some(new_isr) = st.wanted_isr_change(offsets.high_watermark, now, lag_max_ms) {
            let removes = st.isr.iter().any(|r| !new_isr.contains(r));
            if removes && !allow_shrink {
                continue;
            }
            // A follower fenced since its last fetch (killed, session expired) still
            // looks caught up for up to the lag bound; the controller would refuse it
            // (INELIGIBLE_REPLICA), so it is not asked for.
            let new_isr: Vec<i32> = new_isr
                .into_iter()
                .filter(|r| st.isr.contains(r) || *r == st.node_id || image.is_broker_live(*r))
                .collect();
            if !removes && new_isr.iter().all(|r| st.isr.contains(r)) {
                continue;
            }
            // Marked pending here, not in the task: a wake-up arriving before the task
            // ran would otherwise send the same change twice (the second one refused as
            // stale, after clearing the first one's pending mark).
            let pending = PendingIsr {
                new_isr: new_isr.clone(),
                from_partition_epoch: st.partition_epoch,
            };
            if !p.begin_isr_change(&st, pending.clone()) {
                continue;
            }
            let ctx = Arc::clone(ctx);
            let retry_ms = i64::try_from(check_period(lag_max_ms).as_millis()).unwrap_or(1_000);
            tokio::spawn(async move { alter_isr(&ctx, &p, &st, pending, retry_ms).await });
        }
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
    match send_alter_partition(ctx, p, st, new_isr).await {
        Ok(partition_epoch) if partition_epoch > st.partition_epoch => {
            // Counted (isr_shrinks / isr_expands) when the image shows it, with the
            // controller's own changes. The pending change stays until then.
            tracing::debug!(topic = %p.topic, partition = p.index, shrink, "ISR change accepted");
        }
        Ok(_) => {
            // Accepted as a no-op: no image will carry a new partition epoch to clear
            // the mark, and a mark left in place would block every later change.
            p.clear_pending_isr(&pending, 0);
        }
        Err(why) => {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %why, "ISR change refused");
            // Not again at once (a controller election takes a while): the check after
            // `retry_ms` asks again, whatever wakes it sooner.
            p.clear_pending_isr(&pending, now_ms().saturating_add(retry_ms));
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
) -> Result<i32, String> {
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
        Ok(Err(e)) => Err(format!("{e} (code {})", e.error_code())),
        Err(_) => Err(format!("no answer from the controller within {timeout:?}")),
    }
}

/// Writes the offset checkpoints of every partition whose HW moved.
fn checkpoint_all(ctx: &Ctx) {
    for p in ctx.replicas.all() {
        if let Err(e) = p.checkpoint_high_watermark() {
            if !matches!(e, super::PartitionError::Closed) {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "high watermark checkpoint failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stalled;

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
