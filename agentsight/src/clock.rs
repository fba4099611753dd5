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

/// RFC 3339 UTC with nanoseconds, e.g. `2026-11-30T01:02:03.123456789Z`.
pub fn rfc3339_ns(wall_ns: u64) -> String {
    let secs = (wall_ns / 1_000_000_000) as i64;
    let nanos = wall_ns % 1_000_000_000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
/// Written out (Howard Hinnant's algorithm) to avoid a date crate for the
/// two conversions the project needs; `sessions` uses these too.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) → days since 1970-01-01; the inverse of [`civil_from_days`].
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    fn civil_dates_round_trip() {
        for days in [-719_468, -1, 0, 11_016, 20_787, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
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
        (m as i64 + (wall_ns - w)).max(0) as u64
    }
}
