//! `record --enforce`'s network rules as the kernel programs judge them: the
//! policy's `[network]` table compiled by user space into a [`NetPolicy`]
//! (one value of the `NET_POLICY` array), and the [`NetPolicy::verdict`] both
//! the cgroup `connect4/6`/`sendmsg4/6` programs and user space's tests run,
//! so the kernel's answer and the audit's judgement are checked against one
//! function.
//!
//! Addresses are four 32-bit words in the order the kernel hands them over
//! (`bpf_sock_addr.user_ip4`/`user_ip6[]`: network byte order, read as
//! native words); an IPv4 address is held in its IPv4-mapped IPv6 form
//! (`::ffff:a.b.c.d`), so one entry format serves both families.

/// The most destinations (`allow` plus `deny` entries with an address or a
/// port) the kernel programs hold; a policy with more cannot be enforced.
pub const NET_RULES_MAX: usize = 64;

/// Bits of [`NetPolicy::flags`].
pub mod net_flag {
    /// `allow_dns`: connections and sends to port 53 are allowed.
    pub const ALLOW_DNS: u32 = 1;
    /// `allow_loopback`: loopback (and unspecified) destinations are allowed.
    pub const ALLOW_LOOPBACK: u32 = 2;
}

/// One `allow` or `deny` entry: `(destination & mask) == addr`, on the
/// family (`0`: any, `4`, `6`) and port (`has_port`) given.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetRule {
    pub addr: [u32; 4],
    pub mask: [u32; 4],
    pub port: u16,
    pub family: u8,
    pub has_port: u8,
    pub deny: u32,
}

/// The whole `[network]` rule set of an enforced run.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetPolicy {
    /// Entries used in `rules`, `deny` ones first.
    pub count: u32,
    pub flags: u32,
    pub rules: [NetRule; NET_RULES_MAX],
}

impl Default for NetPolicy {
    fn default() -> Self {
        Self {
            count: 0,
            flags: 0,
            rules: [NetRule::default(); NET_RULES_MAX],
        }
    }
}

/// [`NetDenial::rule`] of a destination no `allow` entry matched.
pub const NET_UNDECLARED: i32 = -1;

/// What the kernel program decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetVerdict {
    Allow,
    /// Refused by the `deny` entry at this index of [`NetPolicy::rules`].
    Denied(u32),
    /// Refused: matched no `allow` entry (`network-undeclared`).
    Undeclared,
}

/// The third word of an IPv4-mapped IPv6 address (`::ffff:0:0/96`), as a
/// native read of its network-order bytes.
pub const MAPPED_WORD: u32 = u32::from_ne_bytes([0, 0, 0xff, 0xff]);

/// The destination's words, with `::ffff:a.b.c.d` for IPv4 (from
/// `user_ip4`) and IPv4-mapped IPv6 addresses alike; true when it is IPv4.
#[inline(always)]
pub fn normalized(words: [u32; 4], ipv4: bool) -> ([u32; 4], bool) {
    if ipv4 {
        return ([0, 0, MAPPED_WORD, words[0]], true);
    }
    let mapped = words[0] == 0 && words[1] == 0 && words[2] == MAPPED_WORD;
    (words, mapped)
}

impl NetPolicy {
    /// The verdict on a destination: `words` from [`normalized`], `port`
    /// in host order. The order is the audit's: a `deny` entry, then port 53
    /// (`allow_dns`), loopback (`allow_loopback`), an `allow` entry; else
    /// undeclared.
    #[inline(always)]
    pub fn verdict(&self, words: [u32; 4], ipv4: bool, port: u16) -> NetVerdict {
        let count = self.count as usize;
        let mut i = 0;
        let mut allowed = false;
        while i < NET_RULES_MAX {
            if i >= count {
                break;
            }
            let r = &self.rules[i];
            if r.matches(words, ipv4, port) {
                if r.deny != 0 {
                    return NetVerdict::Denied(i as u32);
                }
                allowed = true;
            }
            i += 1;
        }
        if self.flags & net_flag::ALLOW_DNS != 0 && port == 53 {
            return NetVerdict::Allow;
        }
        if self.flags & net_flag::ALLOW_LOOPBACK != 0 && is_loopback(words, ipv4) {
            return NetVerdict::Allow;
        }
        if allowed {
            NetVerdict::Allow
        } else {
            NetVerdict::Undeclared
        }
    }
}

impl NetRule {
    #[inline(always)]
    fn matches(&self, words: [u32; 4], ipv4: bool, port: u16) -> bool {
        let family_ok = match self.family {
            4 => ipv4,
            6 => !ipv4,
            _ => true,
        };
        family_ok
            && (self.has_port == 0 || self.port == port)
            && words[0] & self.mask[0] == self.addr[0]
            && words[1] & self.mask[1] == self.addr[1]
            && words[2] & self.mask[2] == self.addr[2]
            && words[3] & self.mask[3] == self.addr[3]
    }
}

/// `127.0.0.0/8`, `0.0.0.0`, `::1` and `::` (the audit's loopback).
#[inline(always)]
fn is_loopback(words: [u32; 4], ipv4: bool) -> bool {
    if ipv4 {
        let first = words[3].to_ne_bytes()[0];
        return first == 127 || words[3] == 0;
    }
    words[0] == 0
        && words[1] == 0
        && words[2] == 0
        && (words[3] == 0 || words[3] == u32::from_ne_bytes([0, 0, 0, 1]))
}

/// One refused connect or send, from the kernel program to user space.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetDenial {
    /// CLOCK_MONOTONIC ns of the decision.
    pub mono_ns: u64,
    pub tgid: u32,
    /// The index of the `deny` entry, or [`NET_UNDECLARED`].
    pub rule: i32,
    /// The destination as [`normalized`] gives it.
    pub addr: [u32; 4],
    pub port: u16,
    /// 1 for IPv4 (including an IPv4-mapped destination), 0 for IPv6.
    pub ipv4: u8,
    /// 1 for a `sendmsg` (a datagram with a destination), 0 for a connect.
    pub send: u8,
    pub _pad: u32,
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for NetPolicy {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for NetDenial {}
