//! ListTransactions: the transactional ids this node coordinates, filtered by state,
//! producer id, (v1) minimum running time and (v2, KIP-1152) a regular expression the
//! whole transactional id must match (null or empty: no filter). Unknown state names are
//! echoed back in `unknown_state_filters`, as Kafka does; a pattern that does not
//! compile (or compiles too large) answers INVALID_REGULAR_EXPRESSION. Patterns use Rust
//! regex syntax, which agrees with Java's for the usual cases (classes, anchors,
//! alternation, repetition); look-around and backreferences are refused.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
use kafka_protocol::messages::list_transactions_response::{
    ListTransactionsResponse, TransactionState,
};
use kafka_protocol::messages::{ProducerId, TransactionalId};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use regex_automata::meta::Regex;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::{now_ms, Ctx};
use crate::net::Reply;
use crate::txn::TxnState as State;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// The most memory a compiled pattern may take.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The transactional-id filter: `Ok(None)` when there is none.
fn id_pattern(pattern: Option<&str>) -> Result<Option<Regex>, i16> {
    let Some(pattern) = pattern.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    Regex::builder()
        .configure(
            Regex::config()
                .nfa_size_limit(Some(PATTERN_SIZE_LIMIT))
                .onepass_size_limit(Some(PATTERN_SIZE_LIMIT))
                .hybrid_cache_capacity(PATTERN_SIZE_LIMIT),
        )
        .build(&format!("^(?:{pattern})$"))
        .map(Some)
        .map_err(|_| ResponseError::InvalidRegularExpression.code())
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ListTransactionsRequest = req.decode()?;
    let pattern = match id_pattern(request.transactional_id_pattern.as_deref()) {
        Ok(pattern) => pattern,
        Err(code) => {
            return req.respond(&ListTransactionsResponse::default().with_error_code(code))
        }
    };
    let mut states = Vec::new();
    let mut unknown = Vec::new();
    for name in &request.state_filters {
        match State::from_name(name.as_str()) {
            Some(s) => states.push(s),
            None => unknown.push(name.clone()),
        }
    }
    let pids: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
    let now = now_ms();
    // Only the transactional ids the principal may DESCRIBE.
    let access = req.access(ctx);
    let listed = ctx
        .txns
        .list()
        .await
        .into_iter()
        .filter(|(id, _)| access.allows(AclOperation::Describe, ResourceType::TransactionalId, id))
        .filter(|(_, m)| states.is_empty() || states.contains(&m.state))
        .filter(|(_, m)| pids.is_empty() || pids.contains(&m.producer_id))
        .filter(|(id, _)| pattern.as_ref().is_none_or(|p| p.is_match(id.as_str())))
        .filter(|(_, m)| {
            request.duration_filter < 0
                || (m.start_ms >= 0 && now.saturating_sub(m.start_ms) >= request.duration_filter)
        })
        .map(|(id, m)| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(StrBytes::from_static_str(m.state.name()))
        })
        .collect();
    req.respond(
        &ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown)
            .with_transaction_states(listed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_matches_whole_ids() {
        assert!(id_pattern(None).is_ok_and(|p| p.is_none()));
        assert!(id_pattern(Some("")).is_ok_and(|p| p.is_none()));
        let Ok(Some(p)) = id_pattern(Some("app-[0-9]+|billing")) else {
            panic!("the pattern compiles");
        };
        assert!(p.is_match("app-12") && p.is_match("billing"));
        assert!(!p.is_match("my-app-12") && !p.is_match("billing-2"));
        let invalid = Err(ResponseError::InvalidRegularExpression.code());
        assert_eq!(id_pattern(Some("app-(")).map(|p| p.is_some()), invalid);
        assert_eq!(
            id_pattern(Some("a{1000}{1000}")).map(|p| p.is_some()),
            invalid
        );
    }
}
