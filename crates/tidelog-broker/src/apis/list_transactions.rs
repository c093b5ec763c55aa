//! ListTransactions: the transactional ids this node coordinates, filtered by state,
//! producer id and (v1) minimum running time. Unknown state names are echoed back in
//! `unknown_state_filters`, as Kafka does.

use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
use kafka_protocol::messages::list_transactions_response::{
    ListTransactionsResponse, TransactionState,
};
use kafka_protocol::messages::{ProducerId, TransactionalId};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::{now_ms, Ctx};
use crate::net::Reply;
use crate::txn::TxnState as State;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ListTransactionsRequest = req.decode()?;
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
    let listed = ctx
        .txns
        .list()
        .await
        .into_iter()
        .filter(|(_, m)| states.is_empty() || states.contains(&m.state))
        .filter(|(_, m)| pids.is_empty() || pids.contains(&m.producer_id))
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
