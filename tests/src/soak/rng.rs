//! A small seeded generator (SplitMix64). The chaos schedule and every
//! handler delay follow from `--seed`, so a failing run can be repeated
//! with the same choices; no dependency is needed for that.

#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// A value derived from `seed` and `text` alone: the handler process has no
/// state between jobs, yet its delay for one attempt is reproducible.
pub(crate) fn mix(seed: u64, text: &str) -> u64 {
    // FNV-1a over the text, then one SplitMix64 round to spread the bits.
    let mut hash = 0xCBF2_9CE4_8422_2325_u64 ^ seed;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
    SplitMix64::new(hash).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let first: Vec<u64> = (0..4).map(|_| a.below(300)).collect();
        let second: Vec<u64> = (0..4).map(|_| b.below(300)).collect();
        assert_eq!(first, second);
        assert!(first.iter().all(|v| *v < 300));
        assert_eq!(mix(1, "job:1"), mix(1, "job:1"));
        assert_ne!(mix(1, "job:1"), mix(2, "job:1"));
    }
}
