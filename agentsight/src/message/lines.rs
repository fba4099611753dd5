//! The provider's stdout as lines, read on a thread of its own so every wait
//! has a deadline: a provider that stops talking is a timeout, never a hang.
//!
//! A line longer than the bound is consumed and reported by its length
//! (`Line::TooLong`), never held whole in memory.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::Instant;

/// One line of output, without its `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(Vec<u8>),
    /// A line over the bound, consumed; its length in bytes.
    TooLong(usize),
}

/// Why no line came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadEnd {
    /// The provider closed its output (or it could not be read: the text).
    Eof(Option<String>),
    /// The deadline passed first.
    Timeout,
}

/// Lines of a child's stdout, read by a background thread.
pub struct LineReader {
    rx: Receiver<Result<Line, String>>,
    done: bool,
}

/// Lines waiting to be taken; the reader thread blocks (and so does the
/// provider, on a full pipe) beyond this, which bounds memory.
const QUEUED_LINES: usize = 8;

impl LineReader {
    pub fn spawn(output: impl Read + Send + 'static, max_line: usize) -> Self {
        let (tx, rx) = sync_channel(QUEUED_LINES);
        std::thread::spawn(move || read_lines(BufReader::new(output), max_line, &tx));
        LineReader { rx, done: false }
    }

    /// The next line, waiting at most until `deadline`.
    pub fn next(&mut self, deadline: Instant) -> Result<Line, ReadEnd> {
        if self.done {
            return Err(ReadEnd::Eof(None));
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(wait) {
            Ok(Ok(line)) => Ok(line),
            Ok(Err(e)) => {
                self.done = true;
                Err(ReadEnd::Eof(Some(e)))
            }
            Err(RecvTimeoutError::Timeout) => Err(ReadEnd::Timeout),
            Err(RecvTimeoutError::Disconnected) => {
                self.done = true;
                Err(ReadEnd::Eof(None))
            }
        }
    }
}

fn read_lines(mut input: impl BufRead, max_line: usize, tx: &SyncSender<Result<Line, String>>) {
    let mut line: Vec<u8> = Vec::new();
    let mut skipped: Option<usize> = None;
    loop {
        let (used, ended) = match input.fill_buf() {
            Ok([]) => {
                // End of output: a partial last line still counts.
                if let Some(n) = skipped {
                    let _ = tx.send(Ok(Line::TooLong(n)));
                } else if !line.is_empty() {
                    let _ = tx.send(Ok(Line::Text(std::mem::take(&mut line))));
                }
                return;
            }
            Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    take(&mut line, &mut skipped, &buf[..i], max_line);
                    (i + 1, true)
                }
                None => {
                    take(&mut line, &mut skipped, buf, max_line);
                    (buf.len(), false)
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                return;
            }
        };
        input.consume(used);
        if ended {
            let item = match skipped.take() {
                Some(n) => Line::TooLong(n),
                None => Line::Text(std::mem::take(&mut line)),
            };
            if tx.send(Ok(item)).is_err() {
                return;
            }
        }
    }
}

/// Appends `part` to the line, or only counts it once the line is too long.
fn take(line: &mut Vec<u8>, skipped: &mut Option<usize>, part: &[u8], max_line: usize) {
    match skipped {
        Some(n) => *n += part.len(),
        None if line.len() + part.len() > max_line => {
            *skipped = Some(line.len() + part.len());
            line.clear();
            line.shrink_to(4096);
        }
        None => line.extend_from_slice(part),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn lines_long_lines_and_a_partial_last_line() {
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend(b"\n\nlast");
        let mut r = LineReader::spawn(std::io::Cursor::new(input), 50);
        assert_eq!(r.next(soon()), Ok(Line::Text(b"{\"a\":1}".to_vec())));
        assert_eq!(r.next(soon()), Ok(Line::TooLong(100)));
        assert_eq!(r.next(soon()), Ok(Line::Text(Vec::new())));
        assert_eq!(r.next(soon()), Ok(Line::Text(b"last".to_vec())));
        assert_eq!(r.next(soon()), Err(ReadEnd::Eof(None)));
        assert_eq!(r.next(soon()), Err(ReadEnd::Eof(None)));
    }

    #[test]
    fn a_silent_provider_is_a_timeout() {
        let (rd, _wr) = std::io::pipe().expect("pipe");
        let mut r = LineReader::spawn(rd, 10);
        let t = Instant::now();
        assert_eq!(
            r.next(Instant::now() + Duration::from_millis(200)),
            Err(ReadEnd::Timeout)
        );
        assert!(t.elapsed() >= Duration::from_millis(200));
    }
}
