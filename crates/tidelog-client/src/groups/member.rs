//! Membership of a classic consumer group for a command-line consumer of one topic: it
//! joins, is assigned partitions (range, computed by the leader), commits as a member,
//! notices a rebalance from its heartbeat, and leaves. The protocol steps are the
//! [`crate::Consumer`]'s (`consumer/coordinator.rs`); this drives them in the caller's
//! loop without a background task.

use std::time::{Duration, Instant};

use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::GroupId;
use kafka_protocol::ResponseError;

use super::raw::RawConnection;
use super::text;
use crate::client::Client;
use crate::consumer::coordinator::{self, JoinParams};
use crate::consumer::AssignmentStrategy;
use crate::error::{ClientError, Result};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(30);
/// A third of the session timeout, as Kafka's consumer heartbeats.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);

/// This process's place in a group, for one generation.
pub struct Membership {
    conn: RawConnection,
    group: String,
    topic: String,
    member_id: String,
    generation: i32,
    /// Partitions of the topic assigned to this member.
    pub partitions: Vec<i32>,
    last_heartbeat: Instant,
}

impl Client {
    /// Joins `group` subscribed to `topic` and waits for this generation's assignment.
    pub async fn join_group(&mut self, group: &str, topic: &str) -> Result<Membership> {
        let conn = self.coordinator(group).await?;
        let mut m = Membership {
            conn,
            group: group.to_string(),
            topic: topic.to_string(),
            member_id: String::new(),
            generation: -1,
            partitions: Vec::new(),
            last_heartbeat: Instant::now(),
        };
        self.rejoin(&mut m).await?;
        Ok(m)
    }

    /// Joins again (after a rebalance was announced) and takes the new assignment.
    pub async fn rejoin(&mut self, m: &mut Membership) -> Result<()> {
        let topics = [m.topic.clone()];
        let params = JoinParams {
            group: &m.group,
            instance_id: None,
            topics: &topics,
            strategies: &[AssignmentStrategy::Range],
            session_timeout: SESSION_TIMEOUT,
            rebalance_timeout: REBALANCE_TIMEOUT,
            cooperative: None,
            rack: None,
        };
        let joined = coordinator::join_and_sync(
            &mut coordinator::Metadata::Client(self),
            &mut m.conn,
            &params,
            &mut m.member_id,
        )
        .await?;
        m.generation = joined.generation;
        m.partitions = joined
            .assignment
            .into_iter()
            .filter(|(t, _)| *t == m.topic)
            .map(|(_, p)| p)
            .collect();
        m.last_heartbeat = Instant::now();
        Ok(())
    }
}

impl Membership {
    /// Heartbeats when one is due; `Ok(true)` when the group is rebalancing and this
    /// member must commit and rejoin.
    pub async fn heartbeat_if_due(&mut self) -> Result<bool> {
        if self.last_heartbeat.elapsed() < HEARTBEAT_INTERVAL {
            return Ok(false);
        }
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(self.generation)
            .with_member_id(text(&self.member_id));
        let response = self.conn.call(&request, 3).await?;
        self.last_heartbeat = Instant::now();
        let code = response.error_code;
        if code == ResponseError::RebalanceInProgress.code()
            || code == ResponseError::IllegalGeneration.code()
            || code == ResponseError::UnknownMemberId.code()
        {
            return Ok(true);
        }
        ClientError::check(code, None, || format!("heartbeat to group {}", self.group))?;
        Ok(false)
    }

    /// Commits `(partition, next offset)` of the topic as this member and generation.
    pub async fn commit(&mut self, offsets: &[(i32, i64)]) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let offsets: Vec<_> = offsets
            .iter()
            .map(|&(p, o)| ((self.topic.clone(), p), o))
            .collect();
        coordinator::commit(
            &mut self.conn,
            &self.group,
            &self.member_id,
            self.generation,
            &offsets,
        )
        .await
    }

    /// Leaves the group, so the others are rebalanced at once rather than after the
    /// session timeout.
    pub async fn leave(mut self) -> Result<()> {
        coordinator::leave(&mut self.conn, &self.group, &self.member_id).await
    }
}
