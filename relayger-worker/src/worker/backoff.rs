//! Waiting between attempts: exponential backoff and jittered intervals, so
//! many workers that lost the same server do not come back in lockstep.

use std::time::Duration;

/// Exponential backoff from `first` up to `max`, each delay jittered.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// The delay before the next attempt; later calls grow it.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        jitter(delay, 0.2)
    }

    /// After a success: start again from the first delay.
    pub(crate) fn reset(&mut self) {
        self.next = self.first;
    }
}

/// `base` moved randomly by up to `fraction` of itself either way.
pub(crate) fn jitter(base: Duration, fraction: f64) -> Duration {
    let unit = random_unit();
    let factor = 1.0 + fraction * (2.0 * unit - 1.0);
    base.mul_f64(factor.max(0.0))
}

/// A random number in [0, 1). The operating system's random source (through
/// `Uuid::new_v4`) is more than good enough for spreading timers; the low 48
/// bits of a v4 UUID are all random (its version and variant bits are
/// higher up).
fn random_unit() -> f64 {
    const BITS: u32 = 48;
    let random = uuid::Uuid::new_v4().as_u128() & ((1_u128 << BITS) - 1);
    random as f64 / (1_u128 << BITS) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_the_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let bases = [100, 200, 400, 800, 1000, 1000];
        for base in bases {
            let delay = backoff.next_delay().as_millis() as u64;
            assert!(
                (base * 8 / 10..=base * 12 / 10).contains(&delay),
                "{delay} vs {base}"
            );
        }
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(120));
    }

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..1000 {
            let delay = jitter(Duration::from_secs(30), 0.1);
            assert!((Duration::from_secs(27)..=Duration::from_secs(33)).contains(&delay));
        }
        let unit = random_unit();
        assert!((0.0..1.0).contains(&unit));
    }
}
