//! `agentsight export --format otlp-json [-o FILE]` and `export
//! --otlp-endpoint [URL]`: the capture as OTLP traces (docs/otlp.md).

use std::{io::Write, path::Path};

use anyhow::{Context, Result, bail};

use agentsight::{
    store::Capture,
    views::otlp::{self, OtlpError, PushConfig, PushOutcome, push::Pusher},
};

use super::{ExportArgs, UserFile};

/// Runs `write` on the output: standard output, or `path` replaced as the
/// invoking user (a new 0600 file, never through a link) once `write` has
/// succeeded; on a failure `path` stays as it was.
pub fn to_output(
    path: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    match path {
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            write(&mut out)
        }
        Some(p) => {
            // Written to a new file renamed over `p` once complete: a
            // failure leaves `p` as it was (see `UserFile`).
            let mut file = UserFile::open(p)?;
            {
                let mut out = std::io::BufWriter::new(file.writer()?);
                write(&mut out)?;
                out.flush()
                    .with_context(|| format!("writing {}", p.display()))?;
            }
            Ok(file.commit()?)
        }
    }
}

pub fn run(a: &ExportArgs, cap: &Capture) -> Result<i32> {
    let opts = otlp::Options {
        capture_content: a.capture_content,
    };
    if let Some(endpoint) = &a.otlp_endpoint {
        return push(cap, opts, endpoint);
    }
    to_output(a.output.as_deref(), |out| {
        match otlp::write_json_lines(cap, opts, out) {
            Ok(_) => Ok(()),
            Err(OtlpError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(e).with_context(|| format!("exporting {}", cap.path)),
        }
    })?;
    Ok(0)
}

/// Pushes every batch; fails naming how many spans did not arrive.
fn push(cap: &Capture, opts: otlp::Options, endpoint: &str) -> Result<i32> {
    let flag = Some(endpoint).filter(|e| !e.is_empty());
    let cfg = PushConfig::resolve(flag, |k| std::env::var(k).ok())?;
    let url = agentsight::views::otlp::push::shown_url(&cfg.url);
    let mut pusher = Pusher::new(cfg);
    let (mut undelivered, mut why) = (0u64, None::<String>);
    let summary = otlp::for_each_batch(cap, opts, |data, n| -> Result<(), OtlpError> {
        match pusher.send(data) {
            PushOutcome::Delivered { rejected, .. } if rejected > 0 => {
                undelivered += rejected.min(n as u64);
                why.get_or_insert_with(|| {
                    format!("{url}: the receiver rejected {rejected} span(s)")
                });
            }
            PushOutcome::Delivered { .. } => {}
            PushOutcome::Failed { reason, attempts } => {
                undelivered += n as u64;
                why.get_or_insert_with(|| match attempts {
                    1 => format!("{reason} (one attempt)"),
                    n => format!("{reason} (after {n} attempts)"),
                });
            }
        }
        Ok(())
    })
    .with_context(|| format!("exporting {}", cap.path))?;
    if undelivered > 0 {
        bail!(
            "{undelivered} of {} spans undelivered: {}",
            summary.spans,
            why.unwrap_or_default()
        );
    }
    agentsight::sayln!(
        "agentsight: sent {} spans ({} traces, {} requests) to {url}",
        summary.spans,
        summary.traces,
        summary.batches
    );
    Ok(0)
}
