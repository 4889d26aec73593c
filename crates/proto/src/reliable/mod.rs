//! Reliability and channels over unreliable packets (filled in by the reliability work).
