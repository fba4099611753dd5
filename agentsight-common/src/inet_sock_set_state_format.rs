//! Where the `sock:inet_sock_set_state` program reads its record's fields:
//! the offsets of `/sys/kernel/tracing/events/sock/inet_sock_set_state/format`
//! (a classic tracepoint reads that record, not the `TP_PROTO` arguments).
//! A unit test of `agentsight` compares them with the format file of the
//! machine it runs on.

/// `const void * skaddr` (the `struct sock *`).
pub const SKADDR: usize = 8;
/// `int oldstate`.
pub const OLDSTATE: usize = 16;
/// `int newstate`.
pub const NEWSTATE: usize = 20;
/// `__u16 sport` (host order).
pub const SPORT: usize = 24;
/// `__u16 dport` (host order).
pub const DPORT: usize = 26;
/// `__u16 family`.
pub const FAMILY: usize = 28;
/// `__u8 saddr[4]` (IPv4).
pub const SADDR: usize = 32;
/// `__u8 daddr[4]` (IPv4).
pub const DADDR: usize = 36;
/// `__u8 saddr_v6[16]`.
pub const SADDR_V6: usize = 40;
/// `__u8 daddr_v6[16]`.
pub const DADDR_V6: usize = 56;

/// Every field read, by its name in the format file.
pub const FIELDS: [(&str, usize); 10] = [
    ("skaddr", SKADDR),
    ("oldstate", OLDSTATE),
    ("newstate", NEWSTATE),
    ("sport", SPORT),
    ("dport", DPORT),
    ("family", FAMILY),
    ("saddr", SADDR),
    ("daddr", DADDR),
    ("saddr_v6", SADDR_V6),
    ("daddr_v6", DADDR_V6),
];
