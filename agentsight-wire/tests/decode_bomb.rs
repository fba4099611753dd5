//! A gzip bomb (100 MiB of zeros, ~100 KiB compressed) decoded with a 1 MiB
//! limit: the output is cut at 1 MiB and the decoder never holds more than a
//! few MiB. Its own test binary: the allocation counter is process-wide.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentsight_wire::decode::{Limits, decode};

/// Counts live heap bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn gzip_bomb_is_cut_at_the_limit() {
    const MIB: usize = 1024 * 1024;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; MIB];
    for _ in 0..100 {
        e.write_all(&zeros).expect("gzip");
    }
    drop(zeros);
    let gz = e.finish().expect("gzip");
    assert!(gz.len() < 200 * 1024, "{}", gz.len());
    let resp = [
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n",
            gz.len()
        )
        .as_bytes(),
        &gz,
    ]
    .concat();
    let req = b"POST /v1/messages HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}";
    let raw = common::exchange(req, Some(&resp));
    drop(resp);
    drop(gz);
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let d = decode(&raw, &Limits { body: MIB });
    let peak = PEAK.load(Ordering::SeqCst) - before;
    assert_eq!(d.response_body.len(), MIB);
    assert!(d.response_body.iter().all(|&b| b == 0));
    assert_eq!(d.exchange.response_bytes, MIB as u64);
    assert_eq!(
        d.exchange.notes,
        [
            "response gzip output cut at 1048576 bytes",
            "response body not JSON: expected value at line 1 column 1"
        ]
    );
    // The cut output, a Vec's doubling slack and the copies of the framed
    // body: far below the 100 MiB the bomb holds.
    assert!(peak < 4 * MIB, "peak {peak}");
}
