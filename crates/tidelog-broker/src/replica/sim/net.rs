//! The simulated network: every message between nodes, the controller and the client
//! goes through one queue that delays, drops, duplicates and (through random delays)
//! reorders them, and through cuts that silence one direction of a link.

use std::collections::BTreeSet;

use tidelog_controller::ops::AlterPartition;

use super::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Addr {
    Node(i32),
    Controller,
    Client,
}

/// What a leader answers a follower's fetch (the fields of a Fetch response partition
/// the follower acts on).
#[derive(Debug, Clone)]
pub(super) enum FetchAnswer {
    Error(i16),
    Diverging {
        epoch: i32,
        end: i64,
    },
    OutOfRange {
        log_start: i64,
        high_watermark: i64,
    },
    Records {
        bytes: Vec<u8>,
        high_watermark: i64,
        log_start: i64,
    },
}

#[derive(Debug, Clone)]
pub(super) enum Msg {
    Register {
        incarnation: u128,
    },
    Registered {
        broker_epoch: i64,
    },
    Heartbeat {
        broker_epoch: i64,
    },
    /// `stale`: the broker epoch is not the registered one; register again.
    HeartbeatReply {
        stale: bool,
    },
    /// Asks for the metadata image after version `have` (any, when `None`).
    MetadataFetch {
        have: Option<usize>,
    },
    /// The image at `version` (the controller's committed log, read by index: the
    /// Raft replication of that log is not what this simulation is about).
    Metadata {
        version: usize,
    },
    AlterIsr {
        id: u64,
        request: AlterPartition,
    },
    AlterIsrReply {
        id: u64,
        result: Result<i32, i16>,
    },
    Fetch {
        id: u64,
        leader_epoch: i32,
        offset: i64,
        last_epoch: i32,
        log_start: i64,
    },
    FetchReply {
        id: u64,
        answer: FetchAnswer,
    },
    Produce {
        id: u64,
        values: Vec<String>,
    },
    /// The base offset, or the Kafka error code.
    ProduceReply {
        id: u64,
        result: Result<i64, i16>,
    },
}

pub(super) struct Envelope {
    pub(super) at: i64,
    seq: u64,
    pub(super) from: Addr,
    pub(super) to: Addr,
    pub(super) msg: Msg,
}

/// How unreliable the network is, in per-mille per message.
#[derive(Debug, Clone, Copy)]
pub(super) struct Weather {
    pub(super) drop: u64,
    pub(super) duplicate: u64,
    pub(super) max_delay_ms: i64,
}

impl Weather {
    pub(super) const CALM: Weather = Weather {
        drop: 0,
        duplicate: 0,
        max_delay_ms: 2,
    };
}

pub(super) struct Net {
    queue: Vec<Envelope>,
    seq: u64,
    /// (from, to) pairs whose messages vanish.
    cuts: BTreeSet<(Addr, Addr)>,
    pub(super) weather: Weather,
}

impl Net {
    pub(super) fn new(weather: Weather) -> Self {
        Net {
            queue: Vec::new(),
            seq: 0,
            cuts: BTreeSet::new(),
            weather,
        }
    }

    pub(super) fn send(&mut self, rng: &mut Rng, now: i64, from: Addr, to: Addr, msg: Msg) {
        if self.cuts.contains(&(from, to)) || rng.chance(self.weather.drop) {
            return;
        }
        let copies = if rng.chance(self.weather.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now + rng.range(1, self.weather.max_delay_ms.max(1));
            self.push(at, from, to, msg.clone());
        }
    }

    /// Puts a message back for later (its receiver is paused: the bytes wait in its
    /// socket buffer).
    pub(super) fn hold(&mut self, envelope: Envelope, until: i64) {
        self.push(until, envelope.from, envelope.to, envelope.msg);
    }

    fn push(&mut self, at: i64, from: Addr, to: Addr, msg: Msg) {
        self.seq += 1;
        self.queue.push(Envelope {
            at,
            seq: self.seq,
            from,
            to,
            msg,
        });
    }

    /// The next message due at or before `now`, earliest (then first sent) first.
    pub(super) fn next_due(&mut self, now: i64) -> Option<Envelope> {
        let index = self
            .queue
            .iter()
            .enumerate()
            .filter(|(_, e)| e.at <= now)
            .min_by_key(|(_, e)| (e.at, e.seq))
            .map(|(i, _)| i)?;
        Some(self.queue.swap_remove(index))
    }

    pub(super) fn cut(&mut self, from: Addr, to: Addr) {
        self.cuts.insert((from, to));
    }

    /// Cuts `node` off from every other address, both ways.
    pub(super) fn isolate(&mut self, node: Addr, others: &[Addr]) {
        for &other in others {
            if other != node {
                self.cut(node, other);
                self.cut(other, node);
            }
        }
    }

    pub(super) fn heal(&mut self) {
        self.cuts.clear();
    }

    pub(super) fn has_cuts(&self) -> bool {
        !self.cuts.is_empty()
    }
}
