//! agentsight's kernel programs: process lifecycle, file and socket syscalls
//! and TCP outcomes of tracked trees.
//!
//! Every program first checks whether the current tgid is in `TRACKED` and
//! returns at once when it is not, so untracked processes pay one lookup.
//! Children join `TRACKED` at fork, before they first run.
//!
//! The programs live with their hook family: `process` (sched_process_fork,
//! sched_process_exec, sched_process_exit), `sys_exit` (the raw sys_exit
//! dispatcher), `net` (sock:inet_sock_set_state) and `tls` (uprobes on TLS
//! libraries, attached per file by user space) and `enforce_net` (cgroup
//! socket-address programs of `record --enforce`, attached while enforcing). Each is `#[no_mangle]`,
//! so it lands in the object under its own name and section wherever its
//! module is.
#![no_std]
#![no_main]

mod emit;
mod enforce_net;
mod io;
mod maps;
mod net;
mod path;
mod process;
mod read;
mod sys_exit;
mod tls;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
