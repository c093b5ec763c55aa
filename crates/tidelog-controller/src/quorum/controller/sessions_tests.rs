//! The session bookkeeping on its own, on made-up instants, and the probe on an
//! in-memory network.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tidelog_env::net::{MemoryNetwork, Transport};

use super::{probe, Probe, Sessions, NEW_LEADER_GRACE, PROBE_GRACE};

const TIMEOUT: Duration = Duration::from_secs(9);

fn leading(now: Instant, others: &[i32]) -> Sessions {
    let mut sessions = Sessions::default();
    sessions.enter_term(3, now, others.iter().copied());
    sessions
}

#[test]
fn a_closed_heartbeat_connection_is_probed_after_the_grace() {
    let t0 = Instant::now();
    let mut sessions = leading(t0, &[]);
    sessions.heard(2, t0);
    sessions.connection_closed(2, t0);
    assert!(
        sessions.take_due(t0 + PROBE_GRACE / 2).is_empty(),
        "still in its grace"
    );
    assert_eq!(sessions.take_due(t0 + PROBE_GRACE), vec![2]);
    assert!(
        sessions.take_due(t0 + PROBE_GRACE * 2).is_empty(),
        "probed once per close"
    );
}

#[test]
fn a_heartbeat_within_the_grace_clears_the_suspicion() {
    let t0 = Instant::now();
    let mut sessions = leading(t0, &[]);
    sessions.connection_closed(2, t0);
    // A live broker comes back on a new connection.
    sessions.heard(2, t0 + PROBE_GRACE / 2);
    assert!(sessions.take_due(t0 + PROBE_GRACE * 4).is_empty());
}

#[test]
fn closes_seen_while_not_leading_are_ignored() {
    let t0 = Instant::now();
    let mut sessions = Sessions::default();
    sessions.connection_closed(2, t0);
    assert!(sessions.take_due(t0 + PROBE_GRACE * 4).is_empty());
}

#[test]
fn a_new_leader_suspects_the_brokers_it_has_not_heard_from() {
    let t0 = Instant::now();
    let mut sessions = leading(t0, &[1, 2]);
    sessions.heard(1, t0 + NEW_LEADER_GRACE / 2);
    assert!(sessions.take_due(t0 + NEW_LEADER_GRACE / 2).is_empty());
    assert_eq!(sessions.take_due(t0 + NEW_LEADER_GRACE), vec![2]);
    // The same term again changes nothing.
    sessions.enter_term(3, t0 + NEW_LEADER_GRACE, [1, 2].into_iter());
    assert!(sessions.take_due(t0 + NEW_LEADER_GRACE * 4).is_empty());
}

#[test]
fn the_session_timeout_is_unchanged() {
    let t0 = Instant::now();
    let mut sessions = leading(t0, &[]);
    // Never heard of: a full session from the start of the term.
    assert!(!sessions.expired(2, t0 + TIMEOUT, TIMEOUT));
    assert!(sessions.expired(2, t0 + TIMEOUT + Duration::from_millis(1), TIMEOUT));
    sessions.heard(2, t0 + TIMEOUT);
    // A suspicion alone does not shorten the session.
    sessions.connection_closed(2, t0 + TIMEOUT);
    assert!(!sessions.expired(2, t0 + TIMEOUT * 2, TIMEOUT));
    assert!(sessions.expired(2, t0 + TIMEOUT * 2 + Duration::from_millis(1), TIMEOUT));
}

#[tokio::test]
async fn a_probe_tells_refused_from_answered() {
    let network = MemoryNetwork::new();
    let here: IpAddr = "10.0.0.1".parse().unwrap();
    let there: IpAddr = "10.0.0.2".parse().unwrap();
    let transport: Arc<dyn Transport> = Arc::new(network.host(here));
    let _listener = network.host(there).listen("10.0.0.2:9092").await.unwrap();
    let live = ["10.0.0.2:9092".to_owned()];
    let gone = ["10.0.0.2:9093".to_owned()];
    assert_eq!(probe(transport.as_ref(), &live).await, Probe::Answered);
    assert_eq!(probe(transport.as_ref(), &gone).await, Probe::Refused);
    assert_eq!(probe(transport.as_ref(), &[]).await, Probe::Unknown);
    // A partitioned host answers nothing: no verdict, the session timeout decides.
    network.cut(here, there);
    assert_eq!(probe(transport.as_ref(), &gone).await, Probe::Unknown);
}

#[test]
fn the_leaders_own_stall_does_not_count_against_the_sessions() {
    let t0 = Instant::now();
    let mut sessions = leading(t0, &[]);
    sessions.heard(2, t0);
    // Checked on schedule: nothing changes.
    assert_eq!(sessions.forgive_own_stall(t0, TIMEOUT), None);
    assert_eq!(sessions.forgive_own_stall(t0 + TIMEOUT / 4, TIMEOUT), None);
    // The leader was paused for longer than a session: its check finds broker 2's last
    // heartbeat a session and more ago, though the broker heartbeated all along (those
    // heartbeats are still unread in the socket).
    let resumed = t0 + TIMEOUT / 4 + TIMEOUT * 2;
    assert!(sessions.expired(2, resumed, TIMEOUT));
    assert_eq!(
        sessions.forgive_own_stall(resumed, TIMEOUT),
        Some(TIMEOUT * 2)
    );
    assert!(!sessions.expired(2, resumed, TIMEOUT));
    // A broker that is really gone is still fenced, a session after the leader resumed.
    assert!(sessions.expired(2, resumed + TIMEOUT, TIMEOUT));
    // Never heard of this term: its session starts from the term, moved the same way.
    assert!(!sessions.expired(5, resumed, TIMEOUT));
}
