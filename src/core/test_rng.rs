//! The pseudo-random sequence unit tests draw their data from: one step of a 64-bit linear
//! congruential generator (Knuth's MMIX constants). Fixed, so that a test's data is the same on
//! every run and a failure replays; its low bits are weak, so tests use the high ones or mix.

/// Advances `state` one step and returns the new state.
pub fn step(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state
}
