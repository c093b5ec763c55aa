//! Running one storage operation over many logs on a bounded number of threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::StorageError;

/// Applies `f` to every item on up to `threads` scoped threads (at least one) and
/// returns the results in the order of `items`. A panic inside `f` (a bug) becomes an
/// error for that item instead of taking the caller down.
pub(crate) fn map_bounded<I, T, F>(
    items: Vec<I>,
    threads: usize,
    f: F,
) -> Vec<Result<T, StorageError>>
where
    I: Send,
    T: Send,
    F: Fn(I) -> Result<T, StorageError> + Sync,
{
    let count = items.len();
    let inputs: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let outputs: Vec<Mutex<Option<Result<T, StorageError>>>> =
        std::iter::repeat_with(|| Mutex::new(None))
            .take(count)
            .collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.clamp(1, count.max(1)))
            .map(|_| {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let (Some(input), Some(output)) = (inputs.get(i), outputs.get(i)) else {
                        break;
                    };
                    let item = input.lock().ok().and_then(|mut g| g.take());
                    if let Some(item) = item {
                        let result = f(item);
                        if let Ok(mut slot) = output.lock() {
                            *slot = Some(result);
                        }
                    }
                })
            })
            .collect();
        // Joined here, so a panicked worker is not re-raised by the scope; its item
        // keeps an empty slot and the other workers carry on with the rest.
        for worker in workers {
            let _ = worker.join();
        }
    });
    outputs
        .into_iter()
        .map(|slot| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| {
                Err(StorageError::Io(std::io::Error::other(
                    "storage operation panicked",
                )))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::map_bounded;

    #[test]
    fn results_keep_their_order_and_a_panic_stays_with_its_item() {
        let out = map_bounded((0..50).collect(), 4, |i: u32| {
            assert_ne!(i, 7, "deliberate");
            Ok(i * 2)
        });
        assert_eq!(out.len(), 50);
        for (i, r) in out.iter().enumerate() {
            match r {
                Ok(v) => assert_eq!(*v, i as u32 * 2),
                Err(_) => assert_eq!(i, 7),
            }
        }
        assert!(out[7].is_err());
        assert!(map_bounded(Vec::<u32>::new(), 4, Ok).is_empty());
    }
}
