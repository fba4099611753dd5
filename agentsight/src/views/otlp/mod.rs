//! `agentsight export --format otlp-json` and `--otlp-endpoint`: a capture
//! as OpenTelemetry traces in the GenAI semantic conventions (v1.42.0, see
//! [`SCHEMA_URL`] and docs/otlp.md for the whole mapping).
//!
//! The spans are reconstructed history, not live instrumentation: their ids
//! are derived from the capture and their times come from it. So they are
//! built directly as `opentelemetry-proto` messages rather than through the
//! OpenTelemetry SDK, whose tracer mints random ids, stamps the live clock
//! and batches in the background: none of which an export of a finished
//! capture can use, and each of which would make two exports differ.
//!
//! Output is produced a trace at a time ([`for_each_batch`]): a session is
//! correlated, its spans built and handed on, then dropped, so memory holds
//! one session's report, not the capture. A trace larger than
//! [`MAX_SPANS_PER_BATCH`] goes out in several batches with the same ids.

mod attrs;
#[cfg(test)]
mod mcp_tests;
pub mod push;
mod spans;

use std::io::Write;

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::InstrumentationScope,
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, TracesData},
};
use prost::Message;

pub use push::{PushConfig, PushError, PushOutcome, Pusher, Wire};
pub use spans::{MAX_EVENTS_PER_SPAN, agent_of};

use crate::{
    store::{Capture, meta::RunMeta},
    views::run::{RunError, RunModel},
};

/// The semantic-conventions version followed (the last release holding
/// the GenAI conventions in the main repository), stated on every batch.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.42.0";

/// Spans per `TracesData` line or request at most.
pub const MAX_SPANS_PER_BATCH: usize = 1000;

/// What an export includes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Prompt and response text, tool arguments and command lines
    /// (`--capture-content`); off by default.
    pub capture_content: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// What an export produced.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub traces: u64,
    pub spans: u64,
    pub batches: u64,
}

fn resource(facts: &RunMeta) -> Resource {
    let mut a = attrs::Attrs::default();
    a.str("service.name", "agentsight")
        .opt_str("host.name", facts.host.as_deref())
        .opt_str("agentsight.capture.started_at", facts.started_at.as_deref());
    Resource {
        attributes: a.0,
        ..Default::default()
    }
}

fn batch(resource: &Resource, spans: Vec<Span>) -> TracesData {
    TracesData {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "agentsight".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                schema_url: SCHEMA_URL.into(),
            }],
            schema_url: SCHEMA_URL.into(),
        }],
    }
}

/// A failure to load or correlate the run, as an export error.
fn run_err(e: impl Into<RunError>) -> OtlpError {
    OtlpError::Run(e.into())
}

/// Builds every trace of the capture — one per stored session, then one
/// for the trees bound to no session (when there are any) — and hands
/// each to `emit` in batches of at most [`MAX_SPANS_PER_BATCH`] spans,
/// with the batch's span count.
pub fn for_each_batch<E: From<OtlpError>>(
    cap: &Capture,
    opts: Options,
    mut emit: impl FnMut(TracesData, usize) -> Result<(), E>,
) -> Result<Summary, E> {
    let run = RunModel::load(cap).map_err(run_err)?;
    let res = resource(&run.meta);
    let source = spans::Source {
        run: &run,
        view: run.view().map_err(run_err)?,
        last_event_wall_ns: cap.last_event_wall_ns().map_err(run_err)?,
    };
    let mut summary = Summary::default();
    let mut send = |spans: Vec<Span>, summary: &mut Summary| -> Result<(), E> {
        summary.traces += 1;
        let mut spans = spans.into_iter().peekable();
        while spans.peek().is_some() {
            let chunk: Vec<Span> = spans.by_ref().take(MAX_SPANS_PER_BATCH).collect();
            summary.spans += chunk.len() as u64;
            summary.batches += 1;
            let n = chunk.len();
            emit(batch(&res, chunk), n)?;
        }
        Ok(())
    };
    for stored in run.stored_sessions().map_err(run_err)? {
        let session = run.correlate(stored).map_err(run_err)?;
        let trace = spans::session_trace(&source, &session, opts);
        send(trace.spans, &mut summary)?;
    }
    let unbound = run.unbound().map_err(OtlpError::from)?;
    if !unbound.trees.is_empty() {
        let trace = spans::unbound_trace(&source, &unbound, opts);
        send(trace.spans, &mut summary)?;
    }
    Ok(summary)
}

/// The OTLP file exporter format: one `TracesData` JSON object per line
/// (hex ids, nanosecond times as decimal strings).
pub fn write_json_lines(
    cap: &Capture,
    opts: Options,
    out: &mut dyn Write,
) -> Result<Summary, OtlpError> {
    let summary = for_each_batch(cap, opts, |data, _| -> Result<(), OtlpError> {
        serde_json::to_writer(&mut *out, &data).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        Ok(())
    })?;
    out.flush()?;
    Ok(summary)
}

/// One batch as the OTLP/HTTP protobuf body.
pub fn encode_request(data: TracesData) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: data.resource_spans,
    }
    .encode_to_vec()
}
