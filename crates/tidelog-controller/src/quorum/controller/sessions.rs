//! Broker sessions on the controller leader: heartbeats (which unfence), fencing of
//! brokers whose session expired or whose process is gone, and the elections written
//! in the same batch.
//!
//! A broker is fenced when either holds (and it is still unfenced, same epoch):
//! - no heartbeat for the session timeout (this leader's term counts as one; the
//!   fallback for a host that vanished silently);
//! - it is a suspect (a connection that carried its heartbeats closed, or this node took
//!   office without hearing from it), [`PROBE_GRACE`] passed with no heartbeat, and
//!   dialling each of its listeners was refused: nothing listens there, the process is
//!   gone. A kill -9 closes the process's sockets at once; a paused process's listener
//!   still completes connections (the kernel answers), and a partitioned host answers
//!   nothing, so neither is refused and both keep their session until it times out.

use std::collections::BTreeMap;
use std::io;
use std::sync::Weak;
use std::time::{Duration, Instant};

use tidelog_env::net::Transport;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::leader::check_epoch;
use super::{lock, run_every, BrokerTraffic, HeartbeatReply, QuorumController, Sessions};
use crate::image::MetadataImage;
use crate::ops;
use crate::quorum::error::{QuorumError, RequestError};
use crate::quorum::forward::ForwardReply;
use crate::quorum::{MetadataQuorum, QuorumRole};
use crate::record::MetadataRecord;

/// How long a suspect has to heartbeat (or to finish exiting, so its listener is closed
/// too) before it is probed.
pub(super) const PROBE_GRACE: Duration = Duration::from_millis(200);
/// How long after taking office a new leader waits for heartbeats before probing the
/// brokers it has not heard from. They heartbeat every `broker.heartbeat.interval.ms`,
/// so most are probed whatever this is, and a probe of a live one costs one TCP
/// connect; the partitions of a controller leader killed with its broker wait for it.
pub(super) const NEW_LEADER_GRACE: Duration = Duration::from_millis(50);
/// Bound of one connection attempt of a probe: an answer on a LAN takes a round trip.
const PROBE_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How often the leader looks for suspects due for a probe.
const PROBE_PERIOD: Duration = Duration::from_millis(50);

/// What dialling a broker's listeners found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
    /// Every listener refused: no process listens there.
    Refused,
    /// A listener accepted: the process is there (maybe paused).
    Answered,
    /// No answer in time, or another error (e.g. unreachable): decide nothing.
    Unknown,
}

/// The suspicion time that makes a broker due for a probe [`NEW_LEADER_GRACE`] after a
/// leader took office at `now`.
fn suspected_since_taking_office(now: Instant) -> Instant {
    match PROBE_GRACE.checked_sub(NEW_LEADER_GRACE) {
        Some(earlier) => now.checked_sub(earlier).unwrap_or(now),
        None => now + (NEW_LEADER_GRACE - PROBE_GRACE),
    }
}

impl Sessions {
    /// Resets the sessions when this node starts leading `term` (every broker gets a
    /// fresh session, and those in `others` become suspects); keeps them otherwise.
    pub(super) fn enter_term(
        &mut self,
        term: u64,
        now: Instant,
        others: impl Iterator<Item = i32>,
    ) {
        if self.term == Some(term) {
            return;
        }
        *self = Sessions {
            term: Some(term),
            leader_since: Some(now),
            last_seen: BTreeMap::new(),
            // Epoch-checked where used, so one recorded this term stays valid.
            shutting_down: std::mem::take(&mut self.shutting_down),
            traffic: BTreeMap::new(),
            suspects: others
                .map(|id| (id, suspected_since_taking_office(now)))
                .collect(),
            last_expiry_check: None,
        };
    }

    /// Called before each look for expired sessions, with the real time `real_now`. When
    /// this leader itself did not run for more than half a session since the last look
    /// (paused, starved of CPU), the brokers' heartbeats of that time may still sit
    /// unread in its sockets: the time it was away does not count against any session,
    /// as the ISR check forgives a leader's own stall. Returns how long it was away, if
    /// it was.
    pub(super) fn forgive_own_stall(
        &mut self,
        real_now: Instant,
        timeout: Duration,
    ) -> Option<Duration> {
        let last = self.last_expiry_check.replace(real_now)?;
        let away = real_now.saturating_duration_since(last);
        if away <= timeout / 2 {
            return None;
        }
        if let Some(since) = &mut self.leader_since {
            *since += away;
        }
        for seen in self.last_seen.values_mut() {
            *seen += away;
        }
        Some(away)
    }

    /// A heartbeat (or registration) of `broker_id` arrived: its session is renewed and
    /// it is no longer suspected.
    pub(super) fn heard(&mut self, broker_id: i32, now: Instant) {
        self.last_seen.insert(broker_id, now);
        self.suspects.remove(&broker_id);
    }

    /// A connection that carried heartbeats of `broker_id` closed (leading only).
    pub(super) fn connection_closed(&mut self, broker_id: i32, now: Instant) {
        if self.term.is_some() {
            self.suspects.entry(broker_id).or_insert(now);
        }
    }

    /// Suspects whose grace is over, taken out: each is probed once.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<i32> {
        let due: Vec<i32> = self
            .suspects
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) >= PROBE_GRACE)
            .map(|(id, _)| *id)
            .collect();
        for id in &due {
            self.suspects.remove(id);
        }
        due
    }

    /// Whether `broker_id`'s session (this term's) has run out at `now`.
    pub(super) fn expired(&self, broker_id: i32, now: Instant, timeout: Duration) -> bool {
        let since = self.leader_since.unwrap_or(now);
        let last = self.last_seen.get(&broker_id).copied().unwrap_or(since);
        now.saturating_duration_since(last) > timeout
    }
}

impl QuorumController {
    pub(super) async fn heartbeat_here(
        &self,
        broker_id: i32,
        epoch: i64,
        traffic: Option<BrokerTraffic>,
    ) -> Result<ForwardReply, RequestError> {
        let status = self.quorum.status();
        // A leader without a majority behind it (`leader` is then unknown) keeps no
        // sessions: a broker it answered would think the cluster works.
        if status.role != QuorumRole::Leader || status.leader != Some(self.quorum.node_id()) {
            return Err(QuorumError::NotController {
                leader: status.leader.filter(|l| *l != self.quorum.node_id()),
            }
            .into());
        }
        let mut image = self.quorum.image();
        if check_epoch(&image, broker_id, epoch).is_err() {
            // A new leader's image may trail what it committed; look again once caught up.
            self.quorum.sync_leader().await?;
            image = self.quorum.image();
            check_epoch(&image, broker_id, epoch)?;
        }
        {
            let mut sessions = lock(&self.sessions);
            sessions.heard(broker_id, self.clock.now());
            if let Some(traffic) = traffic {
                sessions.traffic.insert(broker_id, traffic);
            }
            // Bounded by the registered brokers: a broker gone from the image goes.
            sessions.traffic.retain(|id, _| image.broker(*id).is_some());
        }
        let fenced = image.broker(broker_id).is_some_and(|b| b.fenced);
        // A broker that finished its controlled shutdown stays fenced until it
        // registers again.
        let shut_down = lock(&self.sessions).shutting_down.get(&broker_id) == Some(&epoch);
        if fenced && !shut_down {
            let _writer = self.writer.lock().await;
            self.quorum.sync_leader().await?;
            let image = self.quorum.image();
            check_epoch(&image, broker_id, epoch)?;
            if image.broker(broker_id).is_some_and(|b| b.fenced) {
                let mut records = vec![MetadataRecord::UnfenceBroker { broker_id, epoch }];
                records.extend(self.repairs_after(&image, &records));
                self.quorum.propose(records).await?;
                tracing::info!(broker_id, epoch, "broker unfenced by its heartbeat");
            }
        }
        let image = self.quorum.image();
        Ok(ForwardReply::Heartbeat(HeartbeatReply {
            fenced: image.broker(broker_id).is_some_and(|b| b.fenced),
            metadata_offset: image.last_offset(),
            traffic: lock(&self.sessions).traffic.clone(),
        }))
    }

    /// Brings the sessions to this node's role: reset (no longer leading) or started
    /// afresh for a new term. Whether this node leads.
    fn observe_term(&self) -> bool {
        let status = self.quorum.status();
        let now = self.clock.now();
        let mut sessions = lock(&self.sessions);
        if status.role != QuorumRole::Leader {
            *sessions = Sessions::default();
            return false;
        }
        if sessions.term != Some(status.term) {
            let me = self.quorum.node_id();
            let image = self.quorum.image();
            let others = image
                .brokers()
                .filter(|b| !b.fenced && b.broker_id != me)
                .map(|b| b.broker_id);
            sessions.enter_term(status.term, now, others);
        }
        true
    }

    /// A connection that carried heartbeats of `brokers` closed: suspect them.
    pub(super) fn connection_closed(&self, brokers: &[i32]) {
        if !self.options.probe_departed_brokers {
            return;
        }
        let image = self.quorum.image();
        let now = self.clock.now();
        let mut sessions = lock(&self.sessions);
        for &id in brokers {
            if image.broker(id).is_some_and(|b| !b.fenced) {
                tracing::debug!(broker_id = id, "a broker's heartbeat connection closed");
                sessions.connection_closed(id, now);
            }
        }
    }

    /// Fences every unfenced broker whose session expired (leader only).
    async fn fence_expired(&self) -> Result<(), RequestError> {
        if !self.observe_term() {
            return Ok(());
        }
        let now = self.clock.now();
        let expired: Vec<(i32, i64)> = {
            let mut sessions = lock(&self.sessions);
            // Real time: the controller's clock is moved by hand in tests.
            let real_now = Instant::now();
            if let Some(away) = sessions.forgive_own_stall(real_now, self.options.session_timeout) {
                tracing::info!(
                    away_ms = away.as_millis() as u64,
                    "this controller did not run for over half a broker session; \
                     the brokers get a full session to heartbeat before any is fenced"
                );
            }
            self.quorum
                .image()
                .brokers()
                .filter(|b| !b.fenced)
                .filter(|b| sessions.expired(b.broker_id, now, self.options.session_timeout))
                .map(|b| (b.broker_id, b.epoch))
                .collect()
        };
        self.fence(expired, "fencing a broker that stopped heartbeating")
            .await
    }

    /// Probes the suspects whose grace is over and fences those whose listeners all
    /// refused and that did not heartbeat meanwhile (leader only).
    async fn fence_departed(&self) -> Result<(), RequestError> {
        if !self.observe_term() {
            return Ok(());
        }
        let due = lock(&self.sessions).take_due(self.clock.now());
        if due.is_empty() {
            return Ok(());
        }
        let image = self.quorum.image();
        let mut probes = JoinSet::new();
        for id in due {
            let Some(broker) = image.broker(id).filter(|b| !b.fenced) else {
                continue;
            };
            let endpoints: Vec<String> = broker
                .listeners
                .iter()
                .map(|e| format_address(&e.host, e.port))
                .collect();
            let transport = self.quorum.transport();
            let (epoch, probed_at) = (broker.epoch, self.clock.now());
            probes.spawn(async move {
                let found = probe(transport.as_ref(), &endpoints).await;
                (id, epoch, probed_at, found)
            });
        }
        let mut gone = Vec::new();
        while let Some(joined) = probes.join_next().await {
            let Ok((id, epoch, probed_at, found)) = joined else {
                continue;
            };
            // A heartbeat since the probe began outweighs what the probe saw.
            let heard = lock(&self.sessions)
                .last_seen
                .get(&id)
                .is_some_and(|t| *t >= probed_at);
            tracing::debug!(broker_id = id, ?found, heard, "probed a suspected broker");
            if found == Probe::Refused && !heard {
                gone.push((id, epoch));
            }
        }
        self.fence(
            gone,
            "fencing a broker whose process is gone (its listeners refuse connections)",
        )
        .await
    }

    /// Writes `FenceBroker` (and the elections it needs) for each `(broker, epoch)`
    /// still unfenced at that epoch.
    async fn fence(&self, brokers: Vec<(i32, i64)>, why: &str) -> Result<(), RequestError> {
        if brokers.is_empty() {
            return Ok(());
        }
        let _writer = self.writer.lock().await;
        self.quorum.sync_leader().await?;
        let image = self.quorum.image();
        let records: Vec<MetadataRecord> = brokers
            .into_iter()
            .filter(|(id, epoch)| {
                image
                    .broker(*id)
                    .is_some_and(|b| !b.fenced && b.epoch == *epoch)
            })
            .map(|(broker_id, epoch)| {
                tracing::warn!(broker_id, epoch, timeout = ?self.options.session_timeout, "{why}");
                MetadataRecord::FenceBroker { broker_id, epoch }
            })
            .collect();
        if !records.is_empty() {
            let mut records = records;
            records.extend(self.repairs_after(&image, &records));
            self.quorum.propose(records).await?;
        }
        Ok(())
    }

    /// The elections needed once `records` (a fencing, unfencing or registration)
    /// are applied to `image`, to be written in the same batch.
    pub(super) fn repairs_after(
        &self,
        image: &MetadataImage,
        records: &[MetadataRecord],
    ) -> Vec<MetadataRecord> {
        let next = ops::image_with(image, records);
        ops::plan_leader_repairs(&next, self.unclean_default())
    }
}

pub(super) async fn fence_loop(
    controller: Weak<QuorumController>,
    stop: watch::Receiver<bool>,
    session_timeout: Duration,
) {
    let period = (session_timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(1));
    run_every(controller, stop, period, |controller| async move {
        if let Err(e) = controller.fence_expired().await {
            tracing::debug!(error = %e, "broker fencing check failed");
        }
        if let Err(e) = controller.repair_partitions().await {
            tracing::debug!(error = %e, "partition leadership check failed");
        }
    })
    .await;
}

pub(super) async fn probe_loop(controller: Weak<QuorumController>, stop: watch::Receiver<bool>) {
    run_every(controller, stop, PROBE_PERIOD, |controller| async move {
        if let Err(e) = controller.fence_departed().await {
            tracing::debug!(error = %e, "departed broker check failed");
        }
    })
    .await;
}

/// Dials each of `endpoints` once (bounded by [`PROBE_CONNECT_TIMEOUT`]), as bare TCP:
/// a connection made is dropped at once, with no TLS or SASL on a secured cluster.
pub(super) async fn probe(transport: &dyn Transport, endpoints: &[String]) -> Probe {
    if endpoints.is_empty() {
        return Probe::Unknown;
    }
    for addr in endpoints {
        match tokio::time::timeout(PROBE_CONNECT_TIMEOUT, transport.reach(addr)).await {
            Ok(Ok(())) => return Probe::Answered,
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Ok(Err(_)) | Err(_) => return Probe::Unknown,
        }
    }
    Probe::Refused
}

fn format_address(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
