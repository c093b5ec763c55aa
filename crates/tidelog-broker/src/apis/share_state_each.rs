//! The shape every share-state request between nodes shares (Read/Write/Initialize/
//! DeleteShareGroupState, ReadShareGroupStateSummary): topics by id, each with its
//! partitions, answered partition by partition and grouped back by topic.

use uuid::Uuid;

/// A partition's refusal: its error code and message.
pub(crate) type Refusal = (i16, Option<String>);

/// Every (topic id, partition) of a request, in order (`of`: a topic's id and
/// partitions).
pub(crate) fn partitions_of<'t, T, P>(
    topics: &'t [T],
    of: impl Fn(&'t T) -> (Uuid, &'t [P]),
) -> Vec<(Uuid, &'t P)> {
    topics
        .iter()
        .flat_map(|t| {
            let (id, partitions) = of(t);
            partitions.iter().map(move |p| (id, p))
        })
        .collect()
}

/// Answers per partition grouped back into their topics (consecutive runs, as asked).
pub(crate) fn by_topic<A>(answers: Vec<(Uuid, A)>) -> Vec<(Uuid, Vec<A>)> {
    let mut out: Vec<(Uuid, Vec<A>)> = Vec::new();
    for (id, answer) in answers {
        match out.last_mut() {
            Some((last, group)) if *last == id => group.push(answer),
            _ => out.push((id, vec![answer])),
        }
    }
    out
}
