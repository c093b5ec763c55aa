//! The `--quorum` voter list: `1@host:port,2@host:port,3@host:port`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::meta_properties::base64url;

/// Most voters a quorum may have: 1, 3 or 5 are allowed (see [`PeersError::BadCount`]).
/// Every write waits for a majority, so more voters only add latency; Kafka clusters
/// run 3 or 5.
pub const MAX_VOTERS: usize = 5;

/// The controller voters, by node id. Every voter must be started with the same list:
/// it is the quorum's initial membership, and two different lists could elect two
/// leaders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumPeers {
    voters: BTreeMap<i32, String>,
}

/// Why a `--quorum` string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeersError {
    #[error("the quorum names no voter")]
    Empty,
    #[error("quorum entry {entry:?} is not of the form id@host:port")]
    Malformed { entry: String },
    #[error("quorum entry {entry:?}: node id must be a positive integer")]
    BadNodeId { entry: String },
    #[error("quorum entry {entry:?}: port must be 1..=65535")]
    BadPort { entry: String },
    #[error("node id {0} appears twice in the quorum")]
    DuplicateId(i32),
    #[error("address {0} appears twice in the quorum")]
    DuplicateAddress(String),
    /// A quorum is 1, 3 or 5 voters: an even count survives no more failures than
    /// the odd count below it while needing one more voter for every majority, and
    /// more than five slows every metadata write for no operational gain.
    #[error("the quorum has {0} voters; it must have 1, 3 or 5 (an even count tolerates no more failures than one voter fewer)")]
    BadCount(usize),
}

impl QuorumPeers {
    /// Parses `id@host:port` entries separated by commas (spaces around them allowed).
    /// Hosts may be names, IPv4 addresses or bracketed IPv6 addresses (`[::1]:9093`).
    pub fn parse(text: &str) -> Result<QuorumPeers, PeersError> {
        let mut voters = BTreeMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (id, addr) = parse_entry(entry)?;
            if voters.values().any(|a| a == &addr) {
                return Err(PeersError::DuplicateAddress(addr));
            }
            if voters.insert(id, addr).is_some() {
                return Err(PeersError::DuplicateId(id));
            }
        }
        if voters.is_empty() {
            return Err(PeersError::Empty);
        }
        if voters.len() > MAX_VOTERS || voters.len() % 2 == 0 {
            return Err(PeersError::BadCount(voters.len()));
        }
        Ok(QuorumPeers { voters })
    }

    /// A one-voter quorum: the default single node.
    pub fn single(node_id: i32, addr: impl Into<String>) -> QuorumPeers {
        QuorumPeers {
            voters: BTreeMap::from([(node_id, addr.into())]),
        }
    }

    /// Voter ids and addresses, ordered by id.
    pub fn voters(&self) -> impl Iterator<Item = (i32, &str)> {
        self.voters.iter().map(|(id, addr)| (*id, addr.as_str()))
    }

    pub fn address(&self, node_id: i32) -> Option<&str> {
        self.voters.get(&node_id).map(String::as_str)
    }

    pub fn contains(&self, node_id: i32) -> bool {
        self.voters.contains_key(&node_id)
    }

    pub fn len(&self) -> usize {
        self.voters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.voters.is_empty()
    }

    /// Votes needed to elect a leader or commit a record.
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// A cluster id every voter derives alike from the voter list, so a quorum needs no
    /// separate formatting step: 22 characters of URL-safe base64 (Kafka's shape) of a
    /// 128-bit digest of the canonical list.
    pub fn derived_cluster_id(&self) -> String {
        let canonical = self.to_string();
        // Two CRC-32C passes with different seeds and two halves: not cryptographic, only
        // stable and well spread, which is all a cluster id needs.
        let bytes = canonical.as_bytes();
        let mut words = [0u32; 4];
        for (i, word) in words.iter_mut().enumerate() {
            let seed = (i as u32).wrapping_mul(0x9e37_79b9);
            *word = crc32c::crc32c_append(seed, bytes);
            *word = crc32c::crc32c_append(*word, &(i as u32).to_be_bytes());
        }
        let mut digest = [0u8; 16];
        for (chunk, word) in digest.chunks_mut(4).zip(words) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        base64url(&digest)
    }
}

impl fmt::Display for QuorumPeers {
    /// The canonical form: entries ordered by id, no spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (id, addr)) in self.voters.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{id}@{addr}")?;
        }
        Ok(())
    }
}

impl FromStr for QuorumPeers {
    type Err = PeersError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        QuorumPeers::parse(s)
    }
}

fn parse_entry(entry: &str) -> Result<(i32, String), PeersError> {
    let malformed = || PeersError::Malformed {
        entry: entry.to_owned(),
    };
    let (id, addr) = entry.split_once('@').ok_or_else(malformed)?;
    let id: i32 = id.trim().parse().map_err(|_| PeersError::BadNodeId {
        entry: entry.to_owned(),
    })?;
    if id <= 0 {
        return Err(PeersError::BadNodeId {
            entry: entry.to_owned(),
        });
    }
    let (host, port) = addr.rsplit_once(':').ok_or_else(malformed)?;
    let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    if host.is_empty() || (host.contains(':') && !bracketed) || host.contains('@') {
        return Err(malformed());
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok((id, addr.to_owned())),
        _ => Err(PeersError::BadPort {
            entry: entry.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_three_voters_in_any_order() {
        let peers = QuorumPeers::parse(" 3@c:39093, 1@127.0.0.1:19093,2@[::1]:29093 ").unwrap();
        let list: Vec<_> = peers.voters().collect();
        assert_eq!(
            list,
            vec![(1, "127.0.0.1:19093"), (2, "[::1]:29093"), (3, "c:39093")]
        );
        assert_eq!(peers.majority(), 2);
        assert_eq!(
            peers.to_string(),
            "1@127.0.0.1:19093,2@[::1]:29093,3@c:39093"
        );
        assert_eq!(peers.address(2), Some("[::1]:29093"));
    }

    #[test]
    fn refuses_bad_entries() {
        let cases = [
            ("", PeersError::Empty),
            (" , ", PeersError::Empty),
            (
                "1:host:1",
                PeersError::Malformed {
                    entry: "1:host:1".into(),
                },
            ),
            (
                "x@h:1",
                PeersError::BadNodeId {
                    entry: "x@h:1".into(),
                },
            ),
            (
                "0@h:1",
                PeersError::BadNodeId {
                    entry: "0@h:1".into(),
                },
            ),
            (
                "1@h:0",
                PeersError::BadPort {
                    entry: "1@h:0".into(),
                },
            ),
            (
                "1@h:70000",
                PeersError::BadPort {
                    entry: "1@h:70000".into(),
                },
            ),
            (
                "1@h",
                PeersError::Malformed {
                    entry: "1@h".into(),
                },
            ),
            (
                "1@::1:5",
                PeersError::Malformed {
                    entry: "1@::1:5".into(),
                },
            ),
            ("1@h:1,1@g:2", PeersError::DuplicateId(1)),
            ("1@h:1,2@h:1", PeersError::DuplicateAddress("h:1".into())),
        ];
        for (text, want) in cases {
            assert_eq!(QuorumPeers::parse(text), Err(want), "{text:?}");
        }
        for n in [2, 4, 6, 7, 10] {
            let voters: Vec<String> = (1..=n).map(|i| format!("{i}@h:{i}")).collect();
            assert_eq!(
                QuorumPeers::parse(&voters.join(",")),
                Err(PeersError::BadCount(n)),
                "{n} voters"
            );
        }
        for n in [1, 3, 5] {
            let voters: Vec<String> = (1..=n).map(|i| format!("{i}@h:{i}")).collect();
            assert!(QuorumPeers::parse(&voters.join(",")).is_ok(), "{n} voters");
        }
    }

    #[test]
    fn derived_cluster_id_is_stable_and_order_free() {
        let a = QuorumPeers::parse("1@a:1,2@b:2,3@c:3").unwrap();
        let b = QuorumPeers::parse("3@c:3,2@b:2,1@a:1").unwrap();
        let c = QuorumPeers::parse("1@a:1,2@b:2,3@c:4").unwrap();
        assert_eq!(a.derived_cluster_id(), b.derived_cluster_id());
        assert_ne!(a.derived_cluster_id(), c.derived_cluster_id());
        assert_eq!(a.derived_cluster_id().len(), 22);
        assert!(a
            .derived_cluster_id()
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }
}
