//! The background work of a broker in a cluster: registering with the controller
//! quorum and heartbeating (`heartbeat_loop`), following the quorum's metadata image
//! (`follow_image`), and moving leaderships away before a clean exit
//! (`controlled_shutdown`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tidelog_controller::quorum::{ControllerHandle, RequestError};
use tidelog_controller::scram_bootstrap;
use tidelog_controller::{Endpoint, MetadataImage, Uuid};
use tokio::sync::watch;

use crate::context::Ctx;
use crate::readiness::Readiness;
use crate::settings::{self, Setting};

/// Kafka's STALE_BROKER_EPOCH and BROKER_ID_NOT_REGISTERED: register again.
const STALE_BROKER_EPOCH: i16 = 77;
const BROKER_ID_NOT_REGISTERED: i16 = 102;
/// How long one image long poll of a broker-only node waits for a change.
const FETCH_WAIT: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Controlled shutdown stops asking once the quorum has failed every request for this
/// long: a new controller leader is normally elected within about 2.5 s, so a longer
/// silence means no majority is left (e.g. the whole cluster is being stopped), and
/// then there is no one to hand leaderships to anyway.
const QUORUM_GONE_AFTER: Duration = Duration::from_secs(5);

/// Sleeps `d` unless shutdown starts first; false when it did.
async fn pause(d: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if *shutdown.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = shutdown.changed() => false,
    }
}

fn ms(ctx: &Ctx, setting: Setting<i64>, floor: u64) -> Duration {
    ctx.config
        .duration(setting)
        .max(Duration::from_millis(floor))
}

/// Submits the SCRAM credentials written into the data directory before its first
/// start (`tidelog user create --data-dir`, see `scram_bootstrap`), then removes the
/// file; true once there are none left to submit. A refused credential is logged with
/// Kafka's reason and not retried; a quorum that does not answer is tried again at the
/// next heartbeat, and the node is not ready until then.
async fn bootstrap_users(ctx: &Ctx, link: &ControllerHandle) -> bool {
    let data_dir = &ctx.config.data_dir;
    let pending = match scram_bootstrap::pending(data_dir) {
        Ok(pending) if pending.is_empty() => return true,
        Ok(pending) => pending,
        Err(e) => {
            tracing::error!(error = %e, "bootstrap SCRAM credentials unreadable; none applied");
            return true;
        }
    };
    let wanted: Vec<(String, i8, Vec<u8>)> = pending
        .iter()
        .map(|c| (c.name.clone(), c.mechanism, c.stored_key.clone()))
        .collect();
    match link.alter_scram_credentials(Vec::new(), pending).await {
        Ok(results) => {
            for (user, code, message) in results.iter().filter(|(_, code, _)| *code != 0) {
                tracing::error!(user = %user, code, message = ?message, "a bootstrap SCRAM credential was refused");
            }
            let applied: Vec<&(String, i8, Vec<u8>)> = wanted
                .iter()
                .filter(|(n, _, _)| results.iter().any(|(u, code, _)| u == n && *code == 0))
                .collect();
            ctx.metadata
                .wait_for(Duration::from_secs(5), |image| {
                    applied.iter().all(|(name, mechanism, key)| {
                        image
                            .scram_credential(name, *mechanism)
                            .is_some_and(|c| &c.stored_key == key)
                    })
                })
                .await;
            tracing::info!(users = applied.len(), "bootstrap SCRAM credentials applied");
            if let Err(e) = scram_bootstrap::applied(data_dir) {
                tracing::warn!(error = %e, "could not remove the applied bootstrap credentials");
            }
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "bootstrap SCRAM credentials not applied yet; retrying");
            false
        }
    }
}

/// Registers this broker (retrying with backoff until the quorum answers), then
/// heartbeats every `broker.heartbeat.interval.ms`, registering again when told its
/// epoch is stale. Sets `ready` once registered with the image caught up to the
/// leader's metadata offset.
pub(crate) async fn heartbeat_loop(
    ctx: Ctx,
    link: Arc<ControllerHandle>,
    listeners: Vec<Endpoint>,
    rack: Option<String>,
    ready: Readiness,
    mut shutdown: watch::Receiver<bool>,
) {
    let node_id = ctx.node_id();
    let incarnation = Uuid::new_v4();
    let interval = ms(&ctx, settings::BROKER_HEARTBEAT_INTERVAL_MS, 10);
    // A heartbeat stuck on a controller leader that silently lost the network would
    // outlive the session the new leader granted; cut it short so the next one goes
    // to whichever leader the quorum knows by then.
    let session_timeout = ms(&ctx, settings::BROKER_SESSION_TIMEOUT_MS, 30);
    let beat_timeout = (session_timeout / 3).max(interval);
    loop {
        let mut backoff = Duration::from_millis(100);
        let mut last_warning: Option<Instant> = None;
        let epoch = loop {
            let registered = tokio::select! {
                r = link.register_broker(node_id, incarnation, listeners.clone(), rack.clone()) => r,
                _ = shutdown.changed() => return,
            };
            match registered {
                Ok(epoch) => break epoch,
                Err(e) => {
                    if last_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        tracing::warn!(error = %e, "registering with the controller quorum failed; retrying");
                        last_warning = Some(Instant::now());
                    }
                    if !pause(backoff, &mut shutdown).await {
                        return;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        };
        ctx.metadata.set_broker_epoch(epoch);
        tracing::info!(
            node_id,
            broker_epoch = epoch,
            "registered with the controller quorum"
        );
        let mut last_answered = Instant::now();
        loop {
            let beat = tokio::select! {
                r = tokio::time::timeout(
                    beat_timeout,
                    link.broker_heartbeat_with_traffic(node_id, epoch, ctx.metrics.topics.node_traffic()),
                ) => r,
                _ = shutdown.changed() => return,
            };
            let Ok(beat) = beat else {
                tracing::debug!(timeout = ?beat_timeout, "broker heartbeat got no answer in time");
                continue;
            };
            match beat {
                Ok(reply) => {
                    last_answered = Instant::now();
                    ctx.metrics
                        .topics
                        .set_cluster_traffic(reply.traffic.clone());
                    if !ready.is_ready() && bootstrap_users(&ctx, &link).await {
                        let target = reply.metadata_offset;
                        let caught_up = ctx
                            .metadata
                            .wait_for(interval, |i| i.last_offset() >= target)
                            .await;
                        if caught_up {
                            ready.set(true);
                            tracing::info!(node_id, "metadata caught up; tidelog is ready");
                        }
                    }
                }
                Err(e) if is_stale(&e) => {
                    tracing::warn!(error = %e, "the controller no longer knows this registration; registering again");
                    break;
                }
                Err(e) => tracing::debug!(error = %e, "broker heartbeat failed"),
            }
            if matches!(*link, ControllerHandle::Remote(_)) {
                let leader = tokio::select! {
                    r = tokio::time::timeout(beat_timeout, link.describe_quorum()) => {
                        r.ok().and_then(Result::ok).and_then(|s| s.leader)
                    }
                    _ = shutdown.changed() => return,
                };
                ctx.metadata.set_remote_leader(leader);
            }
            // Ready means served by a working cluster: not while no controller leader is
            // known (the quorum lost its majority) or none has answered this broker for
            // a session timeout (it is being fenced). A heartbeat answered again, with the
            // metadata caught up, makes it ready again.
            let no_leader = ctx.metadata.controller_id(node_id) < 0;
            let unanswered = last_answered.elapsed() >= session_timeout;
            if (no_leader || unanswered) && ready.set(false) {
                tracing::warn!(
                    node_id,
                    no_leader,
                    "lost the controller quorum; not ready until its leader answers again"
                );
            }
            if !pause(interval, &mut shutdown).await {
                return;
            }
        }
    }
}

fn is_stale(e: &RequestError) -> bool {
    matches!(
        e.error_code(),
        STALE_BROKER_EPOCH | BROKER_ID_NOT_REGISTERED
    )
}

/// Follows the quorum's image: a voter watches its own, a broker-only node long-polls
/// a voter. Each new image is applied to the local partitions (off the async workers:
/// it opens and deletes logs), then published to the handlers.
pub(crate) async fn follow_image(
    ctx: Ctx,
    link: Arc<ControllerHandle>,
    mut shutdown: watch::Receiver<bool>,
) {
    match &*link {
        ControllerHandle::Voter(controller) => {
            use tidelog_controller::quorum::MetadataQuorum;
            let mut images = controller.quorum().watch_image();
            loop {
                let image = Arc::clone(&images.borrow_and_update());
                if image.last_offset() != ctx.metadata.image().last_offset() {
                    apply(&ctx, image).await;
                }
                tokio::select! {
                    changed = images.changed() => if changed.is_err() { return },
                    _ = shutdown.changed() => return,
                }
            }
        }
        ControllerHandle::Remote(_) => {
            let mut backoff = Duration::from_millis(100);
            loop {
                let after = ctx.metadata.image().last_offset();
                let fetched = tokio::select! {
                    r = link.fetch_image(after, FETCH_WAIT) => r,
                    _ = shutdown.changed() => return,
                };
                match fetched {
                    Ok(Some(image)) => {
                        backoff = Duration::from_millis(100);
                        if image.last_offset() > after {
                            apply(&ctx, image).await;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "fetching the metadata image failed");
                        if !pause(backoff, &mut shutdown).await {
                            return;
                        }
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
    }
}

async fn apply(ctx: &Ctx, image: Arc<MetadataImage>) {
    let before = ctx.metadata.image();
    count_isr_changes(ctx, &before, &image);
    // Dynamic broker configs first: the partitions below are configured from them
    // (new topic-config defaults reach every topic without an override).
    let effective = ctx.refresh_settings(&before, &image);
    let worker = Arc::clone(ctx);
    let applied = Arc::clone(&image);
    match tokio::task::spawn_blocking(move || worker.replicas.apply_image(&applied, &effective))
        .await
    {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "applying metadata to local partitions failed"),
        Err(e) => tracing::error!(error = %e, "applying metadata to local partitions panicked"),
    }
    ctx.metadata.publish(image);
}

/// Counts the ISR changes of the partitions this node leads in `after`, whoever made
/// them: this node's own ISR checks (a follower fell behind or caught up) and the
/// controller's (a fenced or shutting-down broker taken out), so each change is
/// counted once, by the partition's leader.
fn count_isr_changes(ctx: &Ctx, before: &MetadataImage, after: &MetadataImage) {
    let (shrinks, expands) = isr_changes(ctx.node_id(), before, after);
    for _ in 0..shrinks {
        ctx.metrics.replication.isr_shrunk();
    }
    for _ in 0..expands {
        ctx.metrics.replication.isr_expanded();
    }
}

/// (shrinks, expands) between two images of the partitions `node_id` leads in `after`.
fn isr_changes(node_id: i32, before: &MetadataImage, after: &MetadataImage) -> (u64, u64) {
    let (mut shrinks, mut expands) = (0, 0);
    for topic in after.topics() {
        let Some(old) = before
            .topic(&topic.name)
            .filter(|t| t.topic_id == topic.topic_id)
        else {
            continue;
        };
        for (index, p) in &topic.partitions {
            let Some(q) = old.partitions.get(index).filter(|_| p.leader == node_id) else {
                continue;
            };
            if q.isr.iter().any(|r| !p.isr.contains(r)) {
                shrinks += 1;
            }
            if p.isr.iter().any(|r| !q.isr.contains(r)) {
                expands += 1;
            }
        }
    }
    (shrinks, expands)
}

/// Before a clean exit (`controlled.shutdown.enable`): asks the controller to move
/// every leadership of this broker to another live in-sync replica and take it out of
/// the ISRs, until none is left, the answer stops improving (what remains has no other
/// live in-sync replica and goes offline with this node), or
/// `controlled.shutdown.max.wait.ms` passes; then waits (within the same bound) for
/// the image to show the moves. A quorum that does not answer only delays the exit by
/// that bound.
pub(crate) async fn controlled_shutdown(ctx: &Ctx) {
    if !ctx.config.get(settings::CONTROLLED_SHUTDOWN_ENABLE) {
        return;
    }
    let link = ctx.metadata.controller();
    let epoch = ctx.metadata.broker_epoch();
    if epoch < 0 {
        return; // never registered: nothing can be led here
    }
    let node_id = ctx.node_id();
    if ctx
        .metadata
        .image()
        .live_broker_ids()
        .iter()
        .all(|id| *id == node_id)
    {
        return; // no other broker to hand leaderships to (e.g. a single node)
    }
    let deadline = Instant::now() + ms(ctx, settings::CONTROLLED_SHUTDOWN_MAX_WAIT_MS, 0);
    let mut last: Option<u32> = None;
    let mut failing_since: Option<Instant> = None;
    let held = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::warn!(
                node_id,
                "controlled shutdown: out of time; leaving with leaderships not moved"
            );
            break last;
        }
        match tokio::time::timeout(left, link.controlled_shutdown(node_id, epoch)).await {
            Ok(Ok(held)) if held == 0 || last == Some(held) => break Some(held),
            Ok(Ok(held)) => {
                last = Some(held);
                failing_since = None;
            }
            Ok(Err(e)) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= QUORUM_GONE_AFTER {
                    tracing::warn!(node_id, error = %e, "controlled shutdown: the controller quorum does not answer; leaving without moving leaderships");
                    break last;
                }
                tracing::debug!(node_id, error = %e, "controlled shutdown request failed; retrying");
            }
            Err(_) => continue,
        }
        let pause =
            Duration::from_millis(200).min(deadline.saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
    };
    let Some(held) = held else {
        return;
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let shown = ctx
        .metadata
        .wait_for(left, |image| leaderships(image, node_id) <= held as usize)
        .await;
    if held > 0 {
        tracing::warn!(node_id, partitions = held, "controlled shutdown: these partitions have no other live in-sync replica and go offline");
        // Fenced now, not a session timeout after it is gone: until then it would be
        // listed as a live broker.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        match tokio::time::timeout(left, link.broker_exiting(node_id, epoch)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::debug!(node_id, error = %e, "fencing this broker at exit failed")
            }
            Err(_) => tracing::debug!(node_id, "fencing this broker at exit timed out"),
        }
    }
    tracing::info!(node_id, moved = shown, "controlled shutdown done");
}

/// How many partitions `node_id` leads in `image`.
fn leaderships(image: &MetadataImage, node_id: i32) -> usize {
    image
        .topics()
        .flat_map(|t| t.partitions.values())
        .filter(|p| p.leader == node_id)
        .count()
}
