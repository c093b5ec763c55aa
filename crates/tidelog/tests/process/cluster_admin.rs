//! The cluster admin commands against real processes: `tidelog cluster info`,
//! `tidelog partition reassign / list-reassignments / elect` and `tidelog cluster
//! add-broker`, on a cluster of one and on three `--quorum` nodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use support::cli_run::tidelog;
use support::cluster::Cluster;
use support::{http_get, Node};

/// Short sessions so the cluster settles quickly.
const SETTINGS: &[&str] = &[
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "offsets.topic.num.partitions=3",
    "replica.lag.time.max.ms=3000",
];

fn ok(bootstrap: &str, args: &[&str]) -> String {
    let out = tidelog(bootstrap, args, b"");
    assert!(out.ok, "tidelog {args:?} failed: {}", out.stderr);
    out.stdout
}

fn fails(bootstrap: &str, args: &[&str]) -> String {
    let out = tidelog(bootstrap, args, b"");
    assert!(!out.ok, "tidelog {args:?} succeeded: {}", out.stdout);
    out.stderr
}

/// Polls `probe` until it returns `Some`, failing after `timeout`.
fn eventually<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ids(s: &str) -> Vec<i32> {
    s.split(',').filter_map(|x| x.parse().ok()).collect()
}

/// Partition `p` of `tidelog topic describe`: (leader, replicas, isr, latest offset).
fn describe_partition(bootstrap: &str, topic: &str, p: i32) -> (i32, Vec<i32>, Vec<i32>, String) {
    let text = ok(bootstrap, &["topic", "describe", topic]);
    let line = text
        .lines()
        .find(|l| l.split('\t').next() == Some(&p.to_string()))
        .unwrap_or_else(|| panic!("no partition {p} in {text}"));
    let cols: Vec<&str> = line.split('\t').collect();
    (
        cols[1].parse().unwrap_or(-1),
        ids(cols[2]),
        ids(cols[3]),
        cols.get(5).unwrap_or(&"?").to_string(),
    )
}

#[test]
fn a_single_node_is_its_own_quorum_and_has_nowhere_to_move() {
    let node = Node::start(&[]);
    let b = node.kafka.to_string();
    ok(&b, &["topic", "create", "solo", "--partitions", "2"]);

    let info = ok(&b, &["cluster", "info"]);
    assert!(info.contains("Controller quorum: leader 1,"), "{info}");
    assert!(info.contains("  1\tleader\t"), "{info}");
    assert!(info.contains(&format!("  1\t{b}\t-\t")), "{info}");
    assert!(info.contains("under-replicated: 0; offline: 0"), "{info}");

    // The only replica already leads: nothing to elect.
    let elected = ok(&b, &["partition", "elect", "--topic", "solo"]);
    assert_eq!(
        elected,
        "solo-0: no election needed\nsolo-1: no election needed\n"
    );
    assert_eq!(
        ok(&b, &["partition", "elect"]),
        "no partition needed an election\n"
    );

    // Moving to a broker that does not exist is refused with a reason; the current
    // assignment is accepted (nothing to do); nothing is ever in progress.
    let refused = fails(
        &b,
        &[
            "partition",
            "reassign",
            "--topic",
            "solo",
            "--partition",
            "0",
            "--replicas",
            "1,2",
        ],
    );
    assert!(refused.contains("INVALID_REPLICA_ASSIGNMENT"), "{refused}");
    assert!(refused.contains("broker 2 is not registered"), "{refused}");
    let unknown = fails(
        &b,
        &[
            "partition",
            "reassign",
            "--topic",
            "solo",
            "--partition",
            "7",
            "--replicas",
            "1",
        ],
    );
    assert!(unknown.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{unknown}");
    ok(
        &b,
        &[
            "partition",
            "reassign",
            "--topic",
            "solo",
            "--partition",
            "0",
            "--replicas",
            "1",
        ],
    );
    assert_eq!(
        ok(&b, &["partition", "list-reassignments"]),
        "no reassignments in progress\n"
    );
    let cancel = fails(
        &b,
        &[
            "partition",
            "reassign",
            "--topic",
            "solo",
            "--partition",
            "0",
            "--cancel",
        ],
    );
    assert!(cancel.contains("NO_REASSIGNMENT_IN_PROGRESS"), "{cancel}");

    let plan = ok(&b, &["cluster", "add-broker", "--broker-id", "1"]);
    assert!(plan.starts_with("Nothing to move"), "{plan}");
    let missing = fails(&b, &["cluster", "add-broker", "--broker-id", "5"]);
    assert!(
        missing.contains("broker 5 is not a live broker"),
        "{missing}"
    );
}

#[test]
fn three_nodes_show_the_quorum_and_move_a_partition_to_the_third_broker() {
    let cluster = Cluster::start(3, SETTINGS, Duration::from_secs(90));
    let b = cluster
        .nodes
        .iter()
        .map(|n| n.kafka.to_string())
        .collect::<Vec<_>>()
        .join(",");

    // Three voters, one of them the leader with every voter's log end known, and three
    // unfenced brokers.
    let info = eventually(
        "cluster info with a leader",
        Duration::from_secs(30),
        || {
            let out = tidelog(&b, &["cluster", "info"], b"");
            let text = out.stdout;
            let voters: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("\tleader\t") || l.contains("\tfollower\t"))
                .collect();
            (out.ok && voters.len() == 3 && text.contains("Controller quorum: leader "))
                .then_some(text)
        },
    );
    assert_eq!(info.matches("\tleader\t").count(), 1, "{info}");
    for id in 1..=3 {
        let node = cluster.node(id);
        let line = info
            .lines()
            .find(|l| l.starts_with(&format!("  {id}\t{}\t", node.kafka)))
            .unwrap_or_else(|| panic!("broker {id} missing: {info}"));
        assert!(
            line.ends_with("\tunfenced") || line.ends_with("\tlive"),
            "{line}"
        );
    }

    // An RF 2 topic with data; its partition goes onto the broker that lacks it.
    ok(
        &b,
        &[
            "topic",
            "create",
            "moving",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
        ],
    );
    let lines: String = (0..200).map(|i| format!("record-{i}\n")).collect();
    let produced = tidelog(
        &b,
        &["produce", "moving", "--acks", "all"],
        lines.as_bytes(),
    );
    assert!(produced.ok, "produce failed: {}", produced.stderr);
    let (_, before, _, _) = describe_partition(&b, "moving", 0);
    assert_eq!(before.len(), 2, "{before:?}");
    let third = (1..=3).find(|id| !before.contains(id)).unwrap();
    // The new broker first: once in sync it can be elected, which proves it holds the data.
    let target = vec![third, before[0]];
    let target_arg = format!("{},{}", target[0], target[1]);
    let started = ok(
        &b,
        &[
            "partition",
            "reassign",
            "--topic",
            "moving",
            "--partition",
            "0",
            "--replicas",
            &target_arg,
        ],
    );
    assert!(started.contains("accepted"), "{started}");

    // The move shows up (or is already done) and finishes: the new replica caught up.
    eventually("the reassignment finishes", Duration::from_secs(60), || {
        let listed = ok(&b, &["partition", "list-reassignments"]);
        if listed.contains("moving-0\t") {
            let line = listed
                .lines()
                .find(|l| l.starts_with("moving-0\t"))
                .unwrap();
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(ids(cols[2]), vec![third], "adding: {listed}");
            assert_eq!(ids(cols[3]), vec![before[1]], "removing: {listed}");
            return None;
        }
        (listed == "no reassignments in progress\n").then_some(())
    });
    let (leader, replicas, isr, latest) = eventually(
        "metadata shows the new replicas in sync",
        Duration::from_secs(30),
        || {
            let d = describe_partition(&b, "moving", 0);
            let isr: BTreeSet<i32> = d.2.iter().copied().collect();
            (d.1 == target && isr == target.iter().copied().collect()).then_some(d)
        },
    );
    assert!(target.contains(&leader), "leader {leader}");
    assert_eq!((replicas, isr.len()), (target.clone(), 2));
    assert_eq!(latest, "200");

    // A preferred election hands leadership to the moved-in replica (unless the
    // controller already did), and it serves every record.
    let elected = ok(
        &b,
        &[
            "partition",
            "elect",
            "--topic",
            "moving",
            "--partition",
            "0",
        ],
    );
    assert!(
        elected == "moving-0: leader elected\n" || elected == "moving-0: no election needed\n",
        "{elected}"
    );
    let (leader, _, _, latest) =
        eventually("the new replica leads", Duration::from_secs(20), || {
            let d = describe_partition(&b, "moving", 0);
            (d.0 == third).then_some(d)
        });
    assert_eq!((leader, latest.as_str()), (third, "200"));
    let consumed = ok(
        &b,
        &[
            "consume",
            "moving",
            "--from-beginning",
            "--count",
            "200",
            "--timeout-ms",
            "20000",
        ],
    );
    let expected: String = (0..200).map(|i| format!("record-{i}\n")).collect();
    assert_eq!(consumed, expected);

    // A plan onto a broker that is not running is refused.
    let missing = fails(&b, &["cluster", "add-broker", "--broker-id", "9"]);
    assert!(
        missing.contains("broker 9 is not a live broker"),
        "{missing}"
    );
}

/// Bad input over the wire gets error codes (and the connection stays usable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_admin_requests_get_error_codes() {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{
        AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
        DescribeQuorumRequest, DescribeQuorumResponse, ElectLeadersRequest, ElectLeadersResponse,
        TopicName,
    };
    use kafka_protocol::protocol::StrBytes;

    let node = Node::start(&[]);
    let b = node.kafka.to_string();
    ok(&b, &["topic", "create", "bad", "--partitions", "1"]);
    let name = |s: &str| TopicName(StrBytes::from_string(s.to_owned()));
    let mut conn = support::Conn::connect(node.kafka).await;

    // DescribeQuorum of anything but __cluster_metadata-0: UNKNOWN_TOPIC_OR_PARTITION.
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(name("bad"))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let resp: DescribeQuorumResponse = conn.call(ApiKey::DescribeQuorum, 2, &req).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 3);
    // The metadata log itself, at every version: this node leads.
    for version in 0..=2 {
        let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(name("__cluster_metadata"))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let resp: DescribeQuorumResponse = conn.call(ApiKey::DescribeQuorum, version, &req).await;
        let p = &resp.topics[0].partitions[0];
        assert_eq!((resp.error_code, p.error_code, p.leader_id.0), (0, 0, 1));
        assert_eq!(p.current_voters.len(), 1);
        assert_eq!(p.current_voters[0].log_end_offset, p.high_watermark);
    }

    // An election type that does not exist: INVALID_REQUEST.
    let req = ElectLeadersRequest::default()
        .with_election_type(7)
        .with_topic_partitions(None);
    let resp: ElectLeadersResponse = conn.call(ApiKey::ElectLeaders, 2, &req).await;
    assert_eq!(resp.error_code, 42);
    // Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION each; v0 works too.
    let req =
        ElectLeadersRequest::default()
            .with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic(name("bad"))
                .with_partitions(vec![-1, 0, 9])]));
    let resp: ElectLeadersResponse = conn.call(ApiKey::ElectLeaders, 0, &req).await;
    let codes: Vec<(i32, i16)> = resp.replica_election_results[0]
        .partition_result
        .iter()
        .map(|p| (p.partition_id, p.error_code))
        .collect();
    assert_eq!(codes, vec![(-1, 3), (0, 84), (9, 3)]);

    // v1 forbids a replication factor change: INVALID_REPLICATION_FACTOR.
    let reassign = |topic: &str, partitions: &[(i32, Vec<i32>)]| {
        ReassignableTopic::default()
            .with_name(name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|(p, r)| {
                        ReassignablePartition::default()
                            .with_partition_index(*p)
                            .with_replicas(Some(r.iter().copied().map(BrokerId).collect()))
                    })
                    .collect(),
            )
    };
    let req = AlterPartitionReassignmentsRequest::default()
        .with_allow_replication_factor_change(false)
        .with_topics(vec![reassign("bad", &[(0, vec![1, 2])])]);
    let resp: AlterPartitionReassignmentsResponse = conn
        .call(ApiKey::AlterPartitionReassignments, 1, &req)
        .await;
    assert_eq!(resp.responses[0].partitions[0].error_code, 38);
    assert!(!resp.allow_replication_factor_change);
    // A partition listed twice: INVALID_REQUEST, answered once; an unknown topic:
    // UNKNOWN_TOPIC_OR_PARTITION.
    let req = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        reassign("bad", &[(0, vec![1]), (0, vec![1])]),
        reassign("missing", &[(0, vec![1])]),
    ]);
    let resp: AlterPartitionReassignmentsResponse = conn
        .call(ApiKey::AlterPartitionReassignments, 0, &req)
        .await;
    let codes: Vec<(String, Vec<i16>)> = resp
        .responses
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partitions.iter().map(|p| p.error_code).collect(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        vec![("bad".into(), vec![42]), ("missing".into(), vec![3])]
    );
}

/// An offline partition (its only ISR member dead) comes back with `partition elect
/// --unclean` on the surviving out-of-ISR replica; once the old leader returns and
/// catches up, a preferred election gives it leadership back.
#[test]
fn unclean_then_preferred_election_from_the_cli() {
    let mut cluster = Cluster::start(3, SETTINGS, Duration::from_secs(90));
    let all = |c: &Cluster| {
        c.nodes
            .iter()
            .map(|n| n.kafka.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let b = all(&cluster);
    ok(
        &b,
        &[
            "topic",
            "create",
            "u",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
        ],
    );
    let lines: String = (0..10).map(|i| format!("v{i}\n")).collect();
    let produced = tidelog(&b, &["produce", "u", "--acks", "all"], lines.as_bytes());
    assert!(produced.ok, "produce failed: {}", produced.stderr);
    let (_, replicas, _, _) = describe_partition(&b, "u", 0);
    let (preferred, other) = (replicas[0], replicas[1]);
    let bystander = (1..=3).find(|id| !replicas.contains(id)).unwrap();
    let via = |ids: &[i32], c: &Cluster| {
        ids.iter()
            .map(|id| c.node(*id).kafka.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };

    // The follower dies and leaves the ISR; then the leader dies: offline.
    cluster.kill9(other);
    let live = via(&[preferred, bystander], &cluster);
    eventually(
        "the dead follower leaves the ISR",
        Duration::from_secs(30),
        || {
            let (_, _, isr, _) = describe_partition(&live, "u", 0);
            (isr == vec![preferred]).then_some(())
        },
    );
    cluster.kill9(preferred);
    cluster.restart(other, Duration::from_secs(60));
    let live = via(&[other, bystander], &cluster);
    eventually("the partition is offline", Duration::from_secs(30), || {
        let text = ok(&live, &["cluster", "info"]);
        text.contains("offline: u-0 (").then_some(())
    });
    // A preferred election cannot help; an unclean one promotes the returned follower.
    let preferred_try = tidelog(
        &live,
        &["partition", "elect", "--topic", "u", "--partition", "0"],
        b"",
    );
    assert!(!preferred_try.ok, "{}", preferred_try.stdout);
    let elected = ok(
        &live,
        &[
            "partition",
            "elect",
            "--unclean",
            "--topic",
            "u",
            "--partition",
            "0",
        ],
    );
    assert_eq!(elected, "u-0: leader elected\n");
    let (leader, _, _, latest) = eventually("the follower leads", Duration::from_secs(20), || {
        let d = describe_partition(&live, "u", 0);
        (d.0 == other).then_some(d)
    });
    assert_eq!((leader, latest.as_str()), (other, "10"));

    // The old leader returns, catches up, and takes leadership back on request.
    cluster.restart(preferred, Duration::from_secs(60));
    let b = all(&cluster);
    eventually(
        "the old leader is back in the ISR",
        Duration::from_secs(30),
        || {
            let (_, _, isr, _) = describe_partition(&b, "u", 0);
            (isr.len() == 2).then_some(())
        },
    );
    let elected = ok(&b, &["partition", "elect", "--topic", "u"]);
    assert!(
        elected == "u-0: leader elected\n" || elected == "u-0: no election needed\n",
        "{elected}"
    );
    let (leader, _, _, latest) = eventually(
        "the preferred replica leads",
        Duration::from_secs(20),
        || {
            let d = describe_partition(&b, "u", 0);
            (d.0 == preferred).then_some(d)
        },
    );
    assert_eq!((leader, latest.as_str()), (preferred, "10"));
}

/// `tidelog cluster add-broker --execute` onto a broker that joins after the topic was
/// placed: every broker ends with an even share of the replicas, no partition holds a
/// broker twice, and every record is still there.
#[test]
fn add_broker_moves_an_even_share_onto_a_new_broker_and_keeps_every_record() {
    let roles = [(1, None), (2, None), (3, None), (4, Some("broker"))];
    let mut cluster = Cluster::start_with_roles(&roles, SETTINGS, Duration::from_secs(90));
    assert!(
        cluster.stop(4, Duration::from_secs(30)),
        "broker 4 did not stop cleanly"
    );
    let b = (1..=3)
        .map(|id| cluster.node(id).kafka.to_string())
        .collect::<Vec<_>>()
        .join(",");
    // Stopped cleanly, broker 4 is fenced at once: no new replica is placed on it.
    eventually("broker 4 fenced", Duration::from_secs(30), || {
        let info = ok(&b, &["cluster", "info"]);
        let line = format!("  4\t{}\t-\tfenced", cluster.node(4).kafka);
        info.lines().any(|l| l == line).then_some(())
    });

    // Six RF 2 partitions on brokers 1-3, with records in every partition.
    ok(
        &b,
        &[
            "topic",
            "create",
            "spread",
            "--partitions",
            "6",
            "--replication-factor",
            "2",
        ],
    );
    let mut expected = Vec::new();
    for p in 0..6 {
        let lines: String = (0..50).map(|i| format!("p{p}-record-{i}\n")).collect();
        expected.extend(lines.lines().map(str::to_string));
        let partition = p.to_string();
        let produced = tidelog(
            &b,
            &[
                "produce",
                "spread",
                "--partition",
                &partition,
                "--acks",
                "all",
            ],
            lines.as_bytes(),
        );
        assert!(produced.ok, "produce failed: {}", produced.stderr);
    }
    for p in 0..6 {
        let (_, replicas, _, latest) = describe_partition(&b, "spread", p);
        assert!(
            !replicas.contains(&4),
            "partition {p} on the stopped broker: {replicas:?}"
        );
        assert_eq!(latest, "50", "partition {p}");
    }

    cluster.restart(4, Duration::from_secs(60));
    let all = format!("{b},{}", cluster.node(4).kafka);
    let plan = eventually("add-broker sees broker 4", Duration::from_secs(30), || {
        let out = tidelog(
            &all,
            &["cluster", "add-broker", "--broker-id", "4", "--execute"],
            b"",
        );
        out.ok.then_some(out.stdout)
    });
    assert!(plan.contains("reassignment started"), "{plan}");

    eventually("the reassignments finish", Duration::from_secs(90), || {
        let listed = ok(&all, &["partition", "list-reassignments"]);
        (listed == "no reassignments in progress\n").then_some(())
    });
    let mut held = [0usize; 5];
    for p in 0..6 {
        let (_, replicas, isr, latest) = eventually(
            "the partition back in sync",
            Duration::from_secs(30),
            || {
                let d = describe_partition(&all, "spread", p);
                (d.2.len() == d.1.len()).then_some(d)
            },
        );
        let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
        assert_eq!(
            (replicas.len(), distinct.len()),
            (2, 2),
            "partition {p}: {replicas:?}"
        );
        assert_eq!(isr.len(), 2, "partition {p}");
        assert_eq!(latest, "50", "partition {p}");
        for r in replicas {
            held[usize::try_from(r).unwrap()] += 1;
        }
    }
    // 12 replicas over 4 brokers.
    assert_eq!(&held[1..], &[3, 3, 3, 3], "replicas per broker 1-4");

    let consumed = ok(
        &all,
        &[
            "consume",
            "spread",
            "--from-beginning",
            "--count",
            "300",
            "--timeout-ms",
            "20000",
        ],
    );
    let mut got: Vec<String> = consumed.lines().map(str::to_string).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);

    // Every new leader was in sync when elected: no node counts an unclean election
    // (broker 4 may see its ISR entry and its leadership in one metadata update).
    for id in 1..=4 {
        let (_, _, metrics) = http_get(cluster.node(id).admin, "/metrics");
        let unclean = metrics
            .lines()
            .find(|l| l.starts_with("tidelog_leader_elections_total{kind=\"unclean\"}"))
            .unwrap_or_else(|| panic!("node {id} has no unclean election counter"));
        assert!(unclean.ends_with(" 0"), "node {id}: {unclean}");
    }
}
