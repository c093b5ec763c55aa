//! Locks that stay usable after a thread panicked while holding them.
//!
//! A panic in one request's handling must not take every later request on the same
//! lock down with it. The broker's shared state is changed under its locks in steps that
//! leave it consistent (a few assignments, an insert, a push), so the data behind a
//! poisoned lock is still whole, and these helpers take it as it is.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) trait LockTolerant<T> {
    /// `lock()`, through a poisoned lock.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> LockTolerant<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub(crate) trait RwLockTolerant<T> {
    /// `read()`, through a poisoned lock.
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    /// `write()`, through a poisoned lock.
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RwLockTolerant<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_still_hands_out_its_data() {
        let counter = Mutex::new(1);
        let table = RwLock::new(vec![1]);
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _guard = counter.lock();
                    let _write = table.write();
                    panic!("a request handler panicked");
                })
                .join();
        });
        assert!(counter.is_poisoned() && table.is_poisoned());
        *counter.locked() += 1;
        table.write_locked().push(2);
        assert_eq!(*counter.locked(), 2);
        assert_eq!(*table.read_locked(), vec![1, 2]);
    }
}
