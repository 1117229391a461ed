//! OpenTelemetry traces: the host's `tracing` spans exported over OTLP/HTTP when the standard
//! endpoint variables name a collector, and nothing at all when they do not.
//!
//! The configuration is the OpenTelemetry SDK's own: `OTEL_EXPORTER_OTLP_ENDPOINT` (a base
//! URL, `/v1/traces` appended) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) turns
//! export on; `OTEL_EXPORTER_OTLP_HEADERS`, `..._TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_BSP_*` (the batch's size and delay) apply as in any
//! SDK. Spans are batched off the host's threads and dropped, never waited for, when the
//! collector is slow or away.
//!
//! What is exported: the spans of `operator_host` at debug and above (one trace per reconcile:
//! the cache wait, the plugin call with its CPU time and peak memory, the policy check, each
//! write, the finalize path; reloads, rollouts and leader changes as traces of their own), the
//! reconcile span of `kube_runtime` they hang under, and `kube_client`'s HTTP span of each
//! request, which carries the API server's status code. The log filter (`RUST_LOG`) does not
//! apply to them.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::DynFilterFn;
use tracing_subscriber::layer::Context;

/// The variables that name a collector: either turns export on.
pub const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// How long a stopping host waits for its last spans to be sent (the host promises to exit
/// within 10 s of SIGTERM, 8 of which reconciles in flight may take).
pub const SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot set up the OTLP exporter of traces ({variables}): {source}")]
    Exporter {
        variables: String,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// The exporting tracer provider; [`Traces::shutdown`] sends what is still batched.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// The provider if a collector is configured; `None` (export off) if not.
    pub fn from_env() -> Result<Option<Traces>, Error> {
        if !ENDPOINT_VARIABLES
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|value| !value.is_empty()))
        {
            return Ok(None);
        }
        // reqwest's rustls (for an https collector) needs the process-wide crypto provider;
        // kube brings ring. An error only says one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|source| Error::Exporter {
                variables: ENDPOINT_VARIABLES.join(" or "),
                source,
            })?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("operator-host");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Some(Traces { provider }))
    }

    /// The `tracing` layer that exports spans through this provider, with its filter.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        use tracing_subscriber::Layer as _;
        let tracer = self.provider.tracer("operator-host");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(DynFilterFn::new(exported))
    }

    /// Sends the spans still batched, for at most [`SHUTDOWN_TIMEOUT`]: a collector that does
    /// not answer must not keep a stopping host from exiting in time.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            eprintln!("warning: the last traces were not all exported: {error}");
        }
    }
}

/// Whether a span (or an event, which becomes an event of its span) is exported, whatever
/// `RUST_LOG` says of the logs: the host's own, the reconcile span kube-runtime opens for each
/// reconcile, and the HTTP span of a request made inside one of those (not of the watches and
/// Lease renewals, which would each be a trace of their own).
fn exported<S>(metadata: &Metadata<'_>, context: &Context<'_, S>) -> bool
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    match metadata.target() {
        target if target.starts_with("operator_host") => *metadata.level() <= Level::DEBUG,
        "kube_runtime::controller" => *metadata.level() <= Level::INFO,
        "kube_client::client::builder" => metadata.is_span() && context.lookup_current().is_some(),
        _ => false,
    }
}

/// How an event's note names the trace of the reconcile that published it.
const TRACE_NOTE_PREFIX: &str = " (trace ";

/// `note` with the trace id appended, within `limit` characters (the note is cut, not the id).
pub fn note_with_trace(note: &str, trace_id: &str, limit: usize) -> String {
    let suffix = format!("{TRACE_NOTE_PREFIX}{trace_id})");
    let kept: String = note
        .chars()
        .take(limit.saturating_sub(suffix.chars().count()))
        .collect();
    kept + &suffix
}

/// The trace id a note names (see [`note_with_trace`]), if it names one.
pub fn trace_in_note(note: &str) -> Option<&str> {
    let id = note.strip_suffix(')')?.rsplit_once(TRACE_NOTE_PREFIX)?.1;
    (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The trace id of `span` (32 hex digits), if traces are exported.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_note_carries_the_trace_id_within_its_limit() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736";
        let note = note_with_trace("Created Deployment cache", id, 1000);
        assert_eq!(note, format!("Created Deployment cache (trace {id})"));
        assert_eq!(trace_in_note(&note), Some(id));
        let long = note_with_trace(&"x".repeat(2000), id, 1000);
        assert_eq!(long.chars().count(), 1000);
        assert_eq!(trace_in_note(&long), Some(id));
        assert_eq!(trace_in_note("Created Deployment cache"), None);
        assert_eq!(trace_in_note("spec.image (trace of a typo)"), None);
    }
}
