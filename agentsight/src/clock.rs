//! Clocks: kernel records carry CLOCK_MONOTONIC ns; people and transcripts use
//! UTC wall time. Anchors pair the two, taken at start, periodically, and at
//! stop, and conversion is always explicit.

use nix::time::{ClockId, clock_gettime};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub label: &'static str,
    pub mono_ns: u64,
    pub wall_ns: u64,
}

fn ns(clock: ClockId) -> u64 {
    match clock_gettime(clock) {
        Ok(ts) => ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64,
        Err(_) => 0,
    }
}

pub fn mono_now_ns() -> u64 {
    ns(ClockId::CLOCK_MONOTONIC)
}

impl Anchor {
    /// Reads both clocks back to back; the monotonic value is taken as the
    /// midpoint of two reads around the wall read to halve the skew.
    pub fn now(label: &'static str) -> Self {
        let m1 = ns(ClockId::CLOCK_MONOTONIC);
        let wall_ns = ns(ClockId::CLOCK_REALTIME);
        let m2 = ns(ClockId::CLOCK_MONOTONIC);
        Self {
            label,
            mono_ns: m1 + (m2 - m1) / 2,
            wall_ns,
        }
    }

    /// Wall time (ns since the Unix epoch) of a monotonic timestamp.
    pub fn wall_of(&self, mono_ns: u64) -> u64 {
        (self.wall_ns as i128 + mono_ns as i128 - self.mono_ns as i128).max(0) as u64
    }
}

/// RFC 3339 UTC with nanoseconds, e.g. `2026-11-30T01:02:03.123456789Z`
/// (always nine fractional digits).
pub fn rfc3339_ns(wall_ns: u64) -> String {
    // Every u64 of nanoseconds (up to the year 2554) is inside jiff's range,
    // so the fallback is never taken.
    let at = jiff::Timestamp::from_nanosecond(i128::from(wall_ns)).unwrap_or(jiff::Timestamp::MAX);
    format!("{at:.9}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_with_nanoseconds() {
        assert_eq!(rfc3339_ns(0), "1970-01-01T00:00:00.000000000Z");
        // 2026-11-30T01:02:03.000000042Z
        assert_eq!(
            rfc3339_ns(1_796_000_523_000_000_042),
            "2026-11-30T01:02:03.000000042Z"
        );
        assert_eq!(
            rfc3339_ns(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
    }

    #[test]
    fn formats_rfc3339_edges() {
        // Leap day, all nine fractional digits kept (no rounding), the largest u64.
        assert_eq!(
            rfc3339_ns(1_709_164_800_000_000_000),
            "2024-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339_ns(1_709_251_199_999_999_999),
            "2024-02-29T23:59:59.999999999Z"
        );
        assert_eq!(rfc3339_ns(1), "1970-01-01T00:00:00.000000001Z");
        assert_eq!(rfc3339_ns(u64::MAX), "2554-07-21T23:34:33.709551615Z");
    }

    #[test]
    fn converts_monotonic_to_wall() {
        let a = Anchor {
            label: "start",
            mono_ns: 1_000,
            wall_ns: 10_000,
        };
        assert_eq!(a.wall_of(1_500), 10_500);
        assert_eq!(a.wall_of(500), 9_500);
    }
}

/// The capture's monotonic↔wall anchors, (mono_ns, wall_ns) by mono_ns
/// (loaded by `store::read`).
#[derive(Debug, Clone, Default)]
pub struct Anchors(pub Vec<(u64, i64)>);

impl Anchors {
    /// Wall time (ns since the epoch) of a monotonic time, from the newest
    /// anchor at or before it (the first anchor for earlier times).
    pub fn wall_ns(&self, mono_ns: u64) -> i64 {
        let i = self.0.partition_point(|(m, _)| *m <= mono_ns);
        let Some(&(m, w)) = self.0.get(i.saturating_sub(1)) else {
            return mono_ns as i64;
        };
        w + (mono_ns as i64 - m as i64)
    }

    pub fn wall_ms(&self, mono_ns: u64) -> i64 {
        self.wall_ns(mono_ns).div_euclid(1_000_000)
    }

    /// Monotonic time of a wall time in ms.
    pub fn mono_of_ms(&self, wall_ms: i64) -> u64 {
        let wall_ns = wall_ms.saturating_mul(1_000_000);
        let i = self.0.partition_point(|(_, w)| *w <= wall_ns);
        let Some(&(m, w)) = self.0.get(i.saturating_sub(1)) else {
            return 0;
        };
        // Saturating: a wall time read from input (a log, a capture) may be
        // anything.
        (m as i64).saturating_add(wall_ns.saturating_sub(w)).max(0) as u64
    }
}
