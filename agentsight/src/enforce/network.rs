//! The network rules of `record --enforce`: the policy's `[network]`
//! destinations compiled for the kernel (`agentsight_common::net_policy`),
//! enforced by cgroup socket-address programs on the root cgroup that refuse
//! a tracked process's connect or datagram send (`EPERM`) before it leaves
//! the machine, and the refusals they report turned into [`Denial`]s.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agentsight_common::net_policy::{NET_UNDECLARED, NetDenial, NetPolicy};

use super::{Denial, DenialKind};
use crate::capture::loader::{NetAttached, Probes};

/// The mechanism a network denial names.
pub const MECHANISM: &str = "cgroup-bpf";

/// What the kernel programs enforce, and the names to report refusals by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPlan {
    pub policy: NetPolicy,
    /// The text of each entry of `policy.rules`, by index.
    pub entries: Vec<String>,
    /// The rule id of a refusal by a `deny` entry (`network-denied`).
    pub denied_rule: String,
    /// The rule id of a destination no entry allows (`network-undeclared`).
    pub undeclared_rule: String,
}

/// The network programs while enforcing.
pub struct NetEnforcement {
    attached: NetAttached,
    plan: NetPlan,
    pub connects: u64,
    pub sends: u64,
}

impl NetEnforcement {
    /// Fills the kernel's rules and attaches the programs.
    pub fn attach(probes: &mut Probes, plan: &NetPlan) -> Result<Self, String> {
        let attached = probes.attach_net(&plan.policy)?;
        Ok(Self {
            attached,
            plan: plan.clone(),
            connects: 0,
            sends: 0,
        })
    }

    /// Descriptors of the attached links (for the sentinel to hold).
    pub fn link_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.attached.links.iter().map(|l| l.as_fd()).collect()
    }

    /// Allows one more destination from now on (`record --wire`'s relay:
    /// the recorder's own loopback listener, declared as `audit` declares
    /// it).
    pub fn allow(
        &mut self,
        probes: &mut Probes,
        addr: std::net::SocketAddr,
        text: &str,
    ) -> Result<(), String> {
        let n = self.plan.policy.count as usize;
        if n >= agentsight_common::net_policy::NET_RULES_MAX {
            return Err(format!(
                "no room for {text}: the kernel holds {} destinations",
                agentsight_common::net_policy::NET_RULES_MAX
            ));
        }
        self.plan.policy.rules[n] = entry(
            Some((addr.ip(), full_prefix(addr.ip()))),
            Some(addr.port()),
            false,
        );
        self.plan.policy.count += 1;
        self.plan.entries.push(text.to_owned());
        probes.set_net_policy(&self.plan.policy)
    }

    /// Takes every refusal the programs reported since the last call.
    pub fn drain(&mut self, out: &mut Vec<Denial>) {
        let mut taken = Vec::new();
        while let Some(item) = self.attached.denials.next() {
            taken.extend(read_denial(&item));
        }
        for d in taken {
            if d.send != 0 {
                self.sends += 1;
            } else {
                self.connects += 1;
            }
            out.push(self.denial(&d));
        }
    }

    /// Refusals the kernel's ring had no room for.
    pub fn lost(&self) -> u64 {
        match self.attached.loss.get(&0, 0) {
            Ok(v) => v.iter().sum(),
            Err(e) => {
                tracing::warn!("reading the network denials' loss: {e}");
                0
            }
        }
    }

    fn denial(&self, d: &NetDenial) -> Denial {
        let ip = address(d.addr, d.ipv4 != 0);
        let rule = if d.rule == NET_UNDECLARED {
            self.plan.undeclared_rule.clone()
        } else {
            self.plan.denied_rule.clone()
        };
        let matched = usize::try_from(d.rule)
            .ok()
            .and_then(|i| self.plan.entries.get(i).cloned());
        Denial {
            kind: if d.send != 0 {
                DenialKind::Send
            } else {
                DenialKind::Connect
            },
            path: String::new(),
            dev: 0,
            ino: 0,
            pid: d.tgid,
            mono_ns: d.mono_ns,
            rule,
            mechanism: MECHANISM,
            dest: Some(Destination {
                addr: ip.to_string(),
                port: d.port,
                matched,
            }),
            repeat: 1,
        }
    }
}

/// A refused connection's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub addr: String,
    pub port: u16,
    /// The `deny` entry that refused it (none: undeclared).
    pub matched: Option<String>,
}

fn read_denial(bytes: &[u8]) -> Option<NetDenial> {
    if bytes.len() < std::mem::size_of::<NetDenial>() {
        return None;
    }
    // Safety: the length is checked; NetDenial is plain data of any bit
    // pattern, read unaligned from the ring.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<NetDenial>()) })
}

/// The address a kernel record holds (`normalized` words).
fn address(words: [u32; 4], ipv4: bool) -> IpAddr {
    let mut b = [0u8; 16];
    for (i, w) in words.iter().enumerate() {
        b[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
    }
    if ipv4 {
        IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))
    } else {
        IpAddr::V6(Ipv6Addr::from(b))
    }
}

fn full_prefix(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// One compiled entry: the network (address, prefix length in its own
/// family) and port, either optional; an IPv4 network in its IPv4-mapped
/// form.
pub fn entry(
    net: Option<(IpAddr, u8)>,
    port: Option<u16>,
    deny: bool,
) -> agentsight_common::net_policy::NetRule {
    let (family, bytes, prefix) = match net {
        None => (0, [0u8; 16], 0u32),
        Some((IpAddr::V4(a), len)) => (4, a.to_ipv6_mapped().octets(), 96 + u32::from(len.min(32))),
        Some((IpAddr::V6(a), len)) => (6, a.octets(), u32::from(len.min(128))),
    };
    let mut addr = [0u32; 4];
    let mut mask = [0u32; 4];
    for i in 0..4 {
        let bits = prefix.saturating_sub(32 * i as u32).min(32);
        let m: u32 = if bits == 0 {
            0
        } else {
            u32::MAX << (32 - bits)
        };
        mask[i] = u32::from_ne_bytes(m.to_be_bytes());
        let w = u32::from_ne_bytes([
            bytes[i * 4],
            bytes[i * 4 + 1],
            bytes[i * 4 + 2],
            bytes[i * 4 + 3],
        ]);
        addr[i] = w & mask[i];
    }
    // An IPv4 entry matches on the family flag, not the mapped prefix.
    if family == 4 {
        mask[0] = 0;
        mask[1] = 0;
        mask[2] = 0;
        addr[0] = 0;
        addr[1] = 0;
        addr[2] = 0;
    }
    agentsight_common::net_policy::NetRule {
        addr,
        mask,
        port: port.unwrap_or(0),
        family,
        has_port: u8::from(port.is_some()),
        deny: u32::from(deny),
    }
}
