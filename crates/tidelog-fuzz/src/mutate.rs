//! A seeded byte mutator for the stable driver: the classic small edits (bit flips,
//! boundary integers, inserted, deleted and repeated runs, splices of another input).
//! Same seed, same corpus: the same sequence of inputs, so a finding replays.

/// xorshift64*: fast, and deterministic for a seed.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (0 is moved off the fixed point).
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Values at the edges that length and count fields trip over, big-endian as Kafka
/// writes them.
const INTERESTING_32: &[i32] = &[
    0,
    1,
    -1,
    2,
    16,
    61,
    127,
    128,
    255,
    256,
    4096,
    65535,
    1 << 20,
    i32::MAX,
    i32::MIN,
    i32::MAX - 1,
];

/// Applies one to four edits to `input`, keeping it at most `max_len` bytes.
pub fn mutate(input: &mut Vec<u8>, rng: &mut Rng, others: &[Vec<u8>], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        edit(input, rng, others);
    }
    input.truncate(max_len);
}

fn edit(input: &mut Vec<u8>, rng: &mut Rng, others: &[Vec<u8>]) {
    let len = input.len();
    match rng.below(9) {
        0 if len > 0 => {
            let at = rng.below(len);
            input[at] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let at = rng.below(len);
            input[at] = rng.next_u64() as u8;
        }
        2 if len >= 4 => {
            let at = rng.below(len - 3);
            let value = INTERESTING_32[rng.below(INTERESTING_32.len())];
            input[at..at + 4].copy_from_slice(&value.to_be_bytes());
        }
        3 if len >= 2 => {
            let at = rng.below(len - 1);
            let value = INTERESTING_32[rng.below(INTERESTING_32.len())] as i16;
            input[at..at + 2].copy_from_slice(&value.to_be_bytes());
        }
        4 => {
            let at = rng.below(len + 1);
            let run: Vec<u8> = (0..1 + rng.below(16))
                .map(|_| rng.next_u64() as u8)
                .collect();
            input.splice(at..at, run);
        }
        5 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(32));
            input.drain(at..at + n);
        }
        6 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(64));
            let run = input[at..at + n].to_vec();
            let to = rng.below(len + 1);
            input.splice(to..to, run);
        }
        7 if !others.is_empty() => {
            let other = &others[rng.below(others.len())];
            let from = rng.below(other.len() + 1);
            let at = rng.below(len + 1);
            input.truncate(at);
            input.extend_from_slice(&other[from..]);
        }
        8 if len > 0 => {
            let at = rng.below(len);
            let delta = 1 + rng.below(8) as u8;
            input[at] = if rng.below(2) == 0 {
                input[at].wrapping_add(delta)
            } else {
                input[at].wrapping_sub(delta)
            };
        }
        _ => input.push(rng.next_u64() as u8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_inputs() {
        let run = |seed| {
            let mut rng = Rng::new(seed);
            let mut input = b"a Kafka request".to_vec();
            for _ in 0..100 {
                mutate(&mut input, &mut rng, &[b"other".to_vec()], 64);
            }
            input
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn inputs_stay_within_the_bound() {
        let mut rng = Rng::new(1);
        let mut input = vec![0u8; 60];
        for _ in 0..1000 {
            mutate(&mut input, &mut rng, &[vec![1u8; 200]], 64);
            assert!(input.len() <= 64);
        }
    }
}
