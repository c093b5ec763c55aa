//! How hard to try a record before it is dead-lettered, and where it goes.

use std::time::Duration;

use super::DeadLetterError;

/// The most attempts a policy may ask for: every attempt and its backoff happen inside
/// one `poll` loop iteration, which `max.poll.interval.ms` bounds.
pub const MAX_ATTEMPTS: u32 = 100;
/// The longest single backoff a policy may ask for (the default `max.poll.interval.ms`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Exponential backoff between attempts: `initial × multiplier^(k-1)` after the k-th
/// failure, never more than `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The wait after the first failure.
    pub initial: Duration,
    /// The growth per further failure (at least 1).
    pub multiplier: f64,
    /// The cap on any one wait (at most [`MAX_BACKOFF`]).
    pub max: Duration,
}

impl Default for Backoff {
    /// 100 ms, doubling, at most 5 s.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            multiplier: 2.0,
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The wait after the `failures`-th failed attempt (1-based; 0 waits nothing).
    pub fn delay(&self, failures: u32) -> Duration {
        if failures == 0 || self.initial.is_zero() {
            return Duration::ZERO;
        }
        let exponent = i32::try_from(failures - 1).unwrap_or(i32::MAX);
        let secs = self.initial.as_secs_f64() * self.multiplier.powi(exponent);
        // An overflowing product is infinite, which the cap takes care of; min on the
        // Duration (not the float) keeps `max` exact.
        Duration::try_from_secs_f64(secs)
            .unwrap_or(self.max)
            .min(self.max)
    }

    fn validate(&self) -> Result<(), DeadLetterError> {
        let invalid = |why: String| Err(DeadLetterError::InvalidPolicy(why));
        if !self.multiplier.is_finite() || self.multiplier < 1.0 {
            return invalid(format!(
                "backoff multiplier must be a finite number >= 1, not {}",
                self.multiplier
            ));
        }
        if self.max > MAX_BACKOFF {
            return invalid(format!(
                "backoff max {:?} is above the cap of {MAX_BACKOFF:?}",
                self.max
            ));
        }
        if self.initial > self.max {
            return invalid(format!(
                "backoff initial {:?} is above its max {:?}",
                self.initial, self.max
            ));
        }
        Ok(())
    }
}

/// Where records that keep failing go, and how often they are tried first.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterPolicy {
    /// The dead-letter topic.
    pub topic: String,
    /// Attempts of the handler before the record is dead-lettered (1 ..=
    /// [`MAX_ATTEMPTS`]; 1 means no retry).
    pub max_attempts: u32,
    /// The waits between attempts.
    pub backoff: Backoff,
    /// Copy the record's key, value and own headers. Default `true`: a consumer-side
    /// dead letter is meant to be replayed. `false` writes the origin headers alone, as
    /// the broker's share-group copies do by default.
    pub copy_record: bool,
    /// Let the broker create the dead-letter topic on first use (when its
    /// `auto.create.topics.enable` allows it).
    pub allow_auto_create: bool,
}

impl DeadLetterPolicy {
    /// The defaults, writing to `topic`: 3 attempts, [`Backoff::default`], the record
    /// copied, the topic auto-created when the broker allows.
    pub fn to_topic(topic: impl Into<String>) -> DeadLetterPolicy {
        DeadLetterPolicy {
            topic: topic.into(),
            max_attempts: 3,
            backoff: Backoff::default(),
            copy_record: true,
            allow_auto_create: true,
        }
    }

    /// The longest a record spends waiting between its attempts: the sum of the
    /// backoffs before attempts 2..=`max_attempts`. With the handler's own time it has
    /// to fit well inside `max.poll.interval.ms`.
    pub fn worst_case_backoff(&self) -> Duration {
        (1..self.max_attempts).map(|k| self.backoff.delay(k)).sum()
    }

    /// Checks the bounds above.
    pub fn validate(&self) -> Result<(), DeadLetterError> {
        if self.topic.is_empty() {
            return Err(DeadLetterError::InvalidPolicy(
                "the dead-letter topic name is empty".into(),
            ));
        }
        // The broker's rule for share-group dead-letter topics too: `__` is internal.
        if self.topic.starts_with("__") {
            return Err(DeadLetterError::InvalidPolicy(format!(
                "dead-letter topic {} cannot start with __",
                self.topic
            )));
        }
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(DeadLetterError::InvalidPolicy(format!(
                "max attempts must be 1..={MAX_ATTEMPTS}, not {}",
                self.max_attempts
            )));
        }
        self.backoff.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn backoff_grows_then_stays_at_its_cap() {
        let b = Backoff {
            initial: ms(100),
            multiplier: 2.0,
            max: ms(1000),
        };
        let delays: Vec<Duration> = (0..8).map(|k| b.delay(k)).collect();
        assert_eq!(
            delays,
            vec![
                ms(0),
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1000),
                ms(1000),
                ms(1000)
            ]
        );
        // Far past any float range the cap still holds.
        assert_eq!(b.delay(u32::MAX), ms(1000));
        let huge = Backoff {
            initial: MAX_BACKOFF,
            multiplier: f64::MAX,
            max: MAX_BACKOFF,
        };
        assert_eq!(huge.delay(3), MAX_BACKOFF);
    }

    #[test]
    fn constant_and_zero_backoffs() {
        let constant = Backoff {
            initial: ms(50),
            multiplier: 1.0,
            max: ms(50),
        };
        assert!((1..20).all(|k| constant.delay(k) == ms(50)));
        let none = Backoff {
            initial: Duration::ZERO,
            multiplier: 3.0,
            max: ms(10),
        };
        assert_eq!(none.delay(5), Duration::ZERO);
    }

    #[test]
    fn worst_case_is_the_sum_of_the_waits_between_attempts() {
        let mut p = DeadLetterPolicy::to_topic("dlq.orders");
        assert_eq!(p.worst_case_backoff(), ms(100 + 200));
        p.max_attempts = 1;
        assert_eq!(p.worst_case_backoff(), Duration::ZERO);
        p.max_attempts = MAX_ATTEMPTS;
        assert!(p.worst_case_backoff() <= p.backoff.max * (MAX_ATTEMPTS - 1));
    }

    #[test]
    fn policies_out_of_bounds_are_refused() {
        assert!(DeadLetterPolicy::to_topic("dlq.orders").validate().is_ok());
        let refused = |edit: fn(&mut DeadLetterPolicy)| {
            let mut p = DeadLetterPolicy::to_topic("dlq.orders");
            edit(&mut p);
            matches!(p.validate(), Err(DeadLetterError::InvalidPolicy(_)))
        };
        assert!(refused(|p| p.topic.clear()));
        assert!(refused(|p| p.topic = "__dlq".into()));
        assert!(refused(|p| p.max_attempts = 0));
        assert!(refused(|p| p.max_attempts = MAX_ATTEMPTS + 1));
        assert!(refused(|p| p.backoff.multiplier = 0.5));
        assert!(refused(|p| p.backoff.multiplier = f64::NAN));
        assert!(refused(|p| p.backoff.multiplier = f64::INFINITY));
        assert!(refused(|p| p.backoff.max = MAX_BACKOFF + ms(1)));
        assert!(refused(|p| p.backoff.initial = p.backoff.max + ms(1)));
    }
}
