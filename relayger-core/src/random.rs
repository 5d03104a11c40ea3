//! The one place relayger-core draws randomness: the operating system's
//! random source (ring's `SystemRandom`). Lease owners and sealing (key pairs,
//! HPKE's ephemeral keys) call [`fill`]; every other rule is a pure function
//! of its arguments. The clock is read in one place too,
//! [`Timestamp::now`](crate::wire::Timestamp::now), and no rule here calls
//! it: rules that depend on the time take `now` as an argument.

use ring::rand::{SecureRandom, SystemRandom};

/// The operating system's random source failed; nothing was drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RandomUnavailable;

/// Fills `bytes` from the operating system's random source.
pub(crate) fn fill(bytes: &mut [u8]) -> Result<(), RandomUnavailable> {
    SystemRandom::new()
        .fill(bytes)
        .map_err(|_| RandomUnavailable)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_draws_differ() {
        let (mut a, mut b) = ([0_u8; 16], [0_u8; 16]);
        super::fill(&mut a).expect("random");
        super::fill(&mut b).expect("random");
        assert_ne!(a, b);
    }
}
